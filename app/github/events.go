package github

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
)

// The webhook headers GitHub sends with every delivery.
const (
	SignatureHeader = github.SHA256SignatureHeader
	EventHeader     = github.EventTypeHeader
	DeliveryHeader  = github.DeliveryIDHeader
)

// DeliveryID is the id GitHub gives a webhook delivery.
func DeliveryID(r *http.Request) string { return github.DeliveryID(r) }

// EventType is the event a webhook delivery carries.
func EventType(r *http.Request) string { return github.WebHookType(r) }

// ValidSignature says whether sig (an X-Hub-Signature-256 header) signs body
// with secret. Only the SHA-256 signature counts.
func ValidSignature(sig string, body, secret []byte) bool {
	return strings.HasPrefix(sig, "sha256=") && github.ValidateSignature(sig, body, secret) == nil
}

// ErrUnknownEvent says a delivery carries an event driftback does not read.
var ErrUnknownEvent = errors.New("an event driftback does not read")

// PullRequestEvent is a pull request opened, pushed to, labelled, closed…
type PullRequestEvent struct {
	Action       string
	Installation int64
	Repo         Repository
	Number       int
	HeadSHA      string
	// HeadRepo is where the head commit comes from ("owner/name"; "" when
	// the fork is gone).
	HeadRepo string
	// Merged says a closed pull request was merged: MergeSHA is the commit
	// on the base branch BaseRef, at MergedAt; BaseSHA the base branch's
	// commit it was last compared with.
	Merged                     bool
	MergeSHA, BaseSHA, BaseRef string
	MergedAt                   time.Time
}

// CommentEvent is a comment on an issue or a pull request.
type CommentEvent struct {
	Action        string
	Installation  int64
	Repo          Repository
	Number        int
	OnPullRequest bool
	Body, User    string
}

// IssueEvent is an issue opened, edited, closed or reopened.
type IssueEvent struct {
	Action       string
	Installation int64
	Repo         Repository
	Number       int
	// Author opened the issue; Sender did what the event tells.
	Author, Sender string
	Body           string
	// BodyBefore is the body before an edit; nil when the edit left the
	// body as it was.
	BodyBefore *string
	// UpdatedAt names this edit of the issue.
	UpdatedAt string
}

// CheckRunEvent is a check run someone asked to run again.
type CheckRunEvent struct {
	Action        string
	Installation  int64
	Repo          Repository
	Name, HeadSHA string
	PullRequests  []int
}

// PushEvent is a push to a branch.
type PushEvent struct {
	Installation int64
	Repo         Repository
	Ref, After   string
	Deleted      bool
}

// InstallationEvent is the App installed, removed or suspended.
type InstallationEvent struct {
	Action       string
	Installation int64
}

// InstallationRepositoriesEvent is repositories added to or removed from
// an installation.
type InstallationRepositoriesEvent struct {
	Action         string
	Added, Removed int
}

// ParseEvent reads a webhook payload: a *PullRequestEvent, *CommentEvent, *IssueEvent,
// *CheckRunEvent, *PushEvent, *InstallationEvent or
// *InstallationRepositoriesEvent; ErrUnknownEvent for any other event.
func ParseEvent(event string, body []byte) (any, error) {
	payload, err := github.ParseWebHook(event, body)
	if err != nil {
		// An event type go-github does not know is one driftback ignores.
		if strings.Contains(err.Error(), "unknown X-Github-Event") {
			return nil, ErrUnknownEvent
		}
		return nil, err
	}
	switch ev := payload.(type) {
	case *github.PullRequestEvent:
		return &PullRequestEvent{
			Action: ev.GetAction(), Installation: ev.GetInstallation().GetID(), Repo: repositoryOf(ev.GetRepo()),
			Number: ev.GetNumber(), HeadSHA: ev.GetPullRequest().GetHead().GetSHA(),
			HeadRepo: ev.GetPullRequest().GetHead().GetRepo().GetFullName(),
			Merged:   ev.GetPullRequest().GetMerged(), MergeSHA: ev.GetPullRequest().GetMergeCommitSHA(),
			BaseSHA: ev.GetPullRequest().GetBase().GetSHA(), BaseRef: ev.GetPullRequest().GetBase().GetRef(),
			MergedAt: ev.GetPullRequest().GetMergedAt().Time,
		}, nil
	case *github.IssueCommentEvent:
		return &CommentEvent{
			Action: ev.GetAction(), Installation: ev.GetInstallation().GetID(), Repo: repositoryOf(ev.GetRepo()),
			Number: ev.GetIssue().GetNumber(),
			// IsPullRequest has a value receiver: a missing issue is checked first.
			OnPullRequest: ev.Issue != nil && ev.Issue.IsPullRequest(),
			Body:          ev.GetComment().GetBody(), User: ev.GetComment().GetUser().GetLogin(),
		}, nil
	case *github.IssuesEvent:
		out := &IssueEvent{
			Action: ev.GetAction(), Installation: ev.GetInstallation().GetID(), Repo: repositoryOf(ev.GetRepo()),
			Number: ev.GetIssue().GetNumber(), Author: ev.GetIssue().GetUser().GetLogin(), Sender: ev.GetSender().GetLogin(),
			Body: ev.GetIssue().GetBody(), UpdatedAt: ev.GetIssue().GetUpdatedAt().UTC().Format(time.RFC3339),
		}
		if ev.Changes != nil && ev.Changes.Body != nil {
			out.BodyBefore = ev.Changes.Body.From
		}
		return out, nil
	case *github.CheckRunEvent:
		out := &CheckRunEvent{
			Action: ev.GetAction(), Installation: ev.GetInstallation().GetID(), Repo: repositoryOf(ev.GetRepo()),
			Name: ev.GetCheckRun().GetName(), HeadSHA: ev.GetCheckRun().GetHeadSHA(),
		}
		for _, p := range ev.GetCheckRun().PullRequests {
			out.PullRequests = append(out.PullRequests, p.GetNumber())
		}
		return out, nil
	case *github.PushEvent:
		r := ev.GetRepo()
		owner := r.GetOwner().GetLogin()
		if owner == "" {
			owner = r.GetOwner().GetName()
		}
		return &PushEvent{
			Installation: ev.GetInstallation().GetID(),
			Repo:         Repository{Owner: owner, Name: r.GetName(), FullName: r.GetFullName(), DefaultBranch: r.GetDefaultBranch(), CloneURL: r.GetCloneURL()},
			Ref:          ev.GetRef(), After: ev.GetAfter(), Deleted: ev.GetDeleted(),
		}, nil
	case *github.InstallationEvent:
		return &InstallationEvent{Action: ev.GetAction(), Installation: ev.GetInstallation().GetID()}, nil
	case *github.InstallationRepositoriesEvent:
		return &InstallationRepositoriesEvent{Action: ev.GetAction(), Added: len(ev.RepositoriesAdded), Removed: len(ev.RepositoriesRemoved)}, nil
	}
	return nil, ErrUnknownEvent
}

func repositoryOf(r *github.Repository) Repository {
	return Repository{
		Owner: r.GetOwner().GetLogin(), Name: r.GetName(), FullName: r.GetFullName(),
		DefaultBranch: r.GetDefaultBranch(), CloneURL: r.GetCloneURL(),
	}
}
