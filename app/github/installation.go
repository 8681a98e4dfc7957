package github

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/driftback/driftback/report"
	"github.com/driftback/driftback/rollback"
)

// Installation is the App's access to the repositories of one installation:
// what the pull-request flow and the drift loop read from GitHub and write
// to it. Its methods speak driftback's types, not the API's.
type Installation struct {
	clients *Clients // nil for access with a token (WithToken)
	id      int64
	gh      *github.Client
	// token, login and app are a token's access: its token, the login its
	// comments carry and the App its check runs belong to.
	token string
	login string
	app   string
}

// botLogin is the login driftback's comments carry.
func (i *Installation) botLogin(ctx context.Context) (string, error) {
	if i.clients == nil {
		return i.login, nil
	}
	return i.clients.BotLogin(ctx)
}

// checkRunsOf says which check runs are driftback's own: the App's.
func (i *Installation) checkRunsOf() checkApp {
	if i.clients == nil {
		return checkApp{slug: i.app}
	}
	return checkApp{id: i.clients.appID}
}

// Installation returns the access of installation id.
func (c *Clients) Installation(id int64) (*Installation, error) {
	gh, err := c.Client(id)
	if err != nil {
		return nil, err
	}
	return &Installation{clients: c, id: id, gh: gh}, nil
}

// InstallationFor returns the access to a repository ("owner/name") for work
// no webhook started (the drift loop).
func (c *Clients) InstallationFor(ctx context.Context, fullName string) (*Installation, error) {
	owner, name, _ := strings.Cut(fullName, "/")
	id, err := c.InstallationOf(ctx, owner, name)
	if err != nil {
		return nil, err
	}
	return c.Installation(id)
}

// ID is the installation's id.
func (i *Installation) ID() int64 { return i.id }

// Token returns an installation token for git over HTTPS.
func (i *Installation) Token(ctx context.Context) (string, error) {
	if i.clients == nil {
		return i.token, nil
	}
	return i.clients.Token(ctx, i.id)
}

// Repository is a repository as driftback reads it.
type Repository struct {
	Owner, Name, FullName string
	DefaultBranch         string
	CloneURL              string
}

// Repository reads a repository.
func (i *Installation) Repository(ctx context.Context, owner, name string) (*Repository, error) {
	r, _, err := i.gh.Repositories.Get(ctx, owner, name)
	if err != nil {
		return nil, fmt.Errorf("read the repository: %w", err)
	}
	full := r.GetFullName()
	if full == "" {
		full = owner + "/" + name
	}
	return &Repository{Owner: owner, Name: name, FullName: full, DefaultBranch: r.GetDefaultBranch(), CloneURL: r.GetCloneURL()}, nil
}

// Head reads a repository and the commit its default branch points at now,
// from git itself (the API's answer may lag a push).
func (i *Installation) Head(ctx context.Context, owner, name string) (*Repository, string, error) {
	r, err := i.Repository(ctx, owner, name)
	if err != nil {
		return nil, "", err
	}
	token, err := i.Token(ctx)
	if err != nil {
		return nil, "", err
	}
	refs, err := RemoteRefs(ctx, r.CloneURL, token)
	if err != nil {
		return nil, "", fmt.Errorf("list the repository's branches: %w", err)
	}
	head := refs["refs/heads/"+r.DefaultBranch]
	if head == "" {
		return nil, "", fmt.Errorf("the default branch %s does not exist", r.DefaultBranch)
	}
	return r, head, nil
}

// PullRequest is a pull request as the pull-request flow reads it.
type PullRequest struct {
	Number int
	Open   bool
	Draft  bool
	// HeadSHA and HeadRepo ("owner/name"; "" when the fork is gone) are
	// what is proposed; BaseSHA and BaseRef where it merges.
	HeadSHA, HeadRepo string
	BaseSHA, BaseRef  string
	Labels            []string
	// Mergeable is GitHub's answer to whether it merges cleanly; nil while
	// GitHub has not computed it. MergeSHA is its test merge
	// (refs/pull/N/merge), "" when there is none.
	Mergeable *bool
	MergeSHA  string
}

// PullRequest reads a pull request.
func (i *Installation) PullRequest(ctx context.Context, owner, name string, number int) (*PullRequest, error) {
	pr, _, err := i.gh.PullRequests.Get(ctx, owner, name, number)
	if err != nil {
		return nil, fmt.Errorf("read the pull request: %w", err)
	}
	out := &PullRequest{
		Number: number, Open: pr.GetState() != "closed", Draft: pr.GetDraft(),
		HeadSHA: pr.GetHead().GetSHA(), HeadRepo: pr.GetHead().GetRepo().GetFullName(),
		BaseSHA: pr.GetBase().GetSHA(), BaseRef: pr.GetBase().GetRef(),
		Mergeable: pr.Mergeable,
	}
	if pr.GetMergeable() {
		out.MergeSHA = pr.GetMergeCommitSHA()
	}
	for _, l := range pr.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	return out, nil
}

// CanWrite says whether a user may push to a repository (admin, maintain or
// write), and the permission GitHub gives them.
func (i *Installation) CanWrite(ctx context.Context, owner, name, user string) (bool, string, error) {
	perm, _, err := i.gh.Repositories.GetPermissionLevel(ctx, owner, name, user)
	if err != nil {
		return false, "", fmt.Errorf("read %s's permission: %w", user, err)
	}
	switch p := perm.GetPermission(); p {
	case "admin", "maintain", "write":
		return true, p, nil
	default:
		return false, p, nil
	}
}

// WritersLabels keeps, of a pull request's labels, those of ack (labels that
// acknowledge a target's dangers) that someone with write permission applied
// last: GitHub lets the triage role label, and an acknowledgement counts
// only from someone who could merge, as a /driftback command does. Labels
// not in ack are kept as they are.
func (i *Installation) WritersLabels(ctx context.Context, owner, name string, number int, labels map[string]bool, ackLabels []string, log *slog.Logger) (map[string]bool, error) {
	ack := map[string]bool{}
	for _, l := range ackLabels {
		if labels[l] {
			ack[l] = true
		}
	}
	if len(ack) == 0 {
		return labels, nil
	}
	by := map[string]string{}
	opts := &github.ListOptions{PerPage: 100}
	for {
		events, resp, err := i.gh.Issues.ListIssueEvents(ctx, owner, name, number, opts)
		if err != nil {
			return nil, fmt.Errorf("read who labelled the pull request: %w", err)
		}
		for _, e := range events { // oldest first: the last one counts
			if e.GetEvent() == "labeled" && ack[e.GetLabel().GetName()] {
				by[e.GetLabel().GetName()] = e.GetActor().GetLogin()
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	out := maps.Clone(labels)
	writer := map[string]bool{}
	for l := range ack {
		who := by[l]
		ok, seen := writer[who]
		if !seen && who != "" {
			can, _, err := i.CanWrite(ctx, owner, name, who)
			if err != nil {
				return nil, err
			}
			ok, writer[who] = can, can
		}
		if !ok {
			delete(out, l)
			log.Info("danger acknowledgement ignored: the label was not applied by someone with write permission", "label", l, "by", who)
		}
	}
	return out, nil
}

// Comment adds a comment to an issue or pull request.
func (i *Installation) Comment(ctx context.Context, owner, name string, number int, body string) error {
	if _, _, err := i.gh.Issues.CreateComment(ctx, owner, name, number, &github.IssueComment{Body: &body}); err != nil {
		return fmt.Errorf("comment on #%d: %w", number, err)
	}
	return nil
}

// Commented says whether driftback's comment is on a pull request.
func (i *Installation) Commented(ctx context.Context, owner, name string, number int) (bool, error) {
	bot, err := i.botLogin(ctx)
	if err != nil {
		return false, err
	}
	existing, err := ourComments(ctx, i.gh, bot, owner, name, number)
	return len(existing) > 0, err
}

// PublishComment makes a pull request's driftback comment equal parts (see
// publishComment).
func (i *Installation) PublishComment(ctx context.Context, owner, name string, number int, parts []string) error {
	bot, err := i.botLogin(ctx)
	if err != nil {
		return err
	}
	return publishComment(Urgent(ctx), i.gh, bot, owner, name, number, parts)
}

// PublishChecks writes check runs on a commit, after one listing of the runs
// already on it: one write per check, however many the commit has. The
// first is the one branch protection requires: it takes the pace's urgent
// lane.
func (i *Installation) PublishChecks(ctx context.Context, owner, name, sha string, checks []Check) error {
	existing, err := listCheckRuns(ctx, i.gh, i.checkRunsOf(), owner, name, sha)
	if err != nil {
		return err
	}
	for n, c := range checks {
		cctx := ctx
		if n == 0 {
			cctx = Urgent(ctx)
		} else if stopped(ctx) {
			return nil // the rest are no longer worth the installation's writes
		}
		if err := publishCheck(cctx, i.gh, owner, name, sha, existing[c.Name], c); err != nil {
			return err
		}
	}
	return nil
}

type stopKey struct{}

// UnlessStopped marks what is optional in the writes under ctx (a pull
// request's per-target check runs, after its required one) as not worth
// making once stop says so: a newer commit superseded them.
func UnlessStopped(ctx context.Context, stop func() bool) context.Context {
	return context.WithValue(ctx, stopKey{}, stop)
}

func stopped(ctx context.Context) bool {
	stop, ok := ctx.Value(stopKey{}).(func() bool)
	return ok && stop()
}

// Earlier finds what driftback counted when a commit removed an object: the
// pull requests that carried the commit, and its comment on them.
func (i *Installation) Earlier(owner, name string) rollback.Earlier {
	return func(ctx context.Context, commit, kind, objName string) (int, bool) {
		bot, err := i.botLogin(ctx)
		if err != nil {
			return 0, false
		}
		prs, _, err := i.gh.PullRequests.ListPullRequestsWithCommit(ctx, owner, name, commit, nil)
		if err != nil {
			return 0, false // the count is then said to be unknown
		}
		for _, pr := range prs {
			comments, err := ourComments(ctx, i.gh, bot, owner, name, pr.GetNumber())
			if err != nil {
				continue
			}
			for _, c := range comments {
				if n, ok := report.LostCount(c.GetBody(), kind, objName); ok {
					return n, true
				}
			}
		}
		return 0, false
	}
}
