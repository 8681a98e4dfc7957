package app

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/driftback/driftback/report"
)

// diffCommandPattern is the command that re-runs driftback on a pull
// request, with live data on forks: "/driftback diff <sha>", where the
// commit is the one the writer reviewed. Approval covers that commit only: a
// push after it is not shown live data until approved again. The whole SHA is
// needed: a fork's author makes both commits, and two sharing a short prefix
// are cheap to make. The bare command, or a short one, is answered with how
// to approve.
var diffCommandPattern = regexp.MustCompile(`^/driftback diff(?:[ \t]+([0-9a-fA-F]{7,40}))?$`)

// Route implements Router: which events become work.
func (a *App) Route(event, delivery string, payload any, log *slog.Logger) ([]*Job, []string, bool) {
	switch ev := payload.(type) {
	case *github.PullRequestEvent:
		req := prRequest{
			installation: ev.GetInstallation().GetID(),
			owner:        ev.GetRepo().GetOwner().GetLogin(), repo: ev.GetRepo().GetName(),
			number: ev.GetNumber(), sha: ev.GetPullRequest().GetHead().GetSHA(),
		}
		if !a.servesRepo(ev.GetRepo().GetFullName()) {
			return nil, nil, false
		}
		switch ev.GetAction() {
		case "opened", "synchronize", "reopened", "ready_for_review":
			return []*Job{a.prJob(req, delivery, log)}, nil, true
		case "labeled", "unlabeled":
			// Any label may be a target's acknowledge label: .github/driftback.yml
			// can rename it, so the check is decided on the refined policy.
			return []*Job{a.prJob(req, delivery, log)}, nil, true
		case "closed":
			// Its queued work goes, and so do its refs in the repository
			// cache, with the commits only it had.
			full := req.owner + "/" + req.repo
			forget := &Job{Key: req.key() + " closed", SHA: delivery, Log: log, Run: func(context.Context) error {
				if a.cache == nil {
					return nil
				}
				return a.cache.ForgetPull(full, req.number)
			}}
			return []*Job{forget}, []string{req.key()}, true
		}
	case *github.IssueCommentEvent:
		m := diffCommandPattern.FindStringSubmatch(strings.TrimSpace(ev.GetComment().GetBody()))
		// IsPullRequest has a value receiver: a missing issue is checked first.
		if ev.GetAction() != "created" || ev.Issue == nil || !ev.Issue.IsPullRequest() || m == nil {
			return nil, nil, false
		}
		approved := strings.ToLower(m[1])
		if !a.servesRepo(ev.GetRepo().GetFullName()) {
			return nil, nil, false
		}
		req := prRequest{
			installation: ev.GetInstallation().GetID(),
			owner:        ev.GetRepo().GetOwner().GetLogin(), repo: ev.GetRepo().GetName(),
			number: ev.GetIssue().GetNumber(), forceLive: true,
		}
		user := ev.GetComment().GetUser().GetLogin()
		j := a.prJob(req, delivery, log)
		// A command has its own key: whoever comments, it can neither replace
		// nor cancel the report of a new commit. Publishing is serialized per
		// pull request, so the two never interleave.
		j.Key, j.SHA = req.key()+" command", delivery
		j.Run = func(ctx context.Context) error {
			gh, err := a.clients.Client(req.installation)
			if err != nil {
				return err
			}
			perm, _, err := gh.Repositories.GetPermissionLevel(ctx, req.owner, req.repo, user)
			if err != nil {
				return fmt.Errorf("read %s's permission: %w", user, err)
			}
			switch perm.GetPermission() {
			case "admin", "maintain", "write":
			default:
				j.Log.Info("command ignored: no write permission", "user", user, "permission", perm.GetPermission())
				return nil
			}
			pr, _, err := gh.PullRequests.Get(ctx, req.owner, req.repo, req.number)
			if err != nil {
				return err
			}
			head := pr.GetHead().GetSHA()
			switch {
			case len(approved) != len(head):
				return a.reply(ctx, gh, req, report.ApproveHowTo(user, head))
			case approved != strings.ToLower(head):
				j.Log.Info("command names a commit that is not the head", "user", user, "approved", approved, "head", head)
				return a.reply(ctx, gh, req, report.ApproveStale(user, approved, head))
			}
			// processPR renders this commit only, and stops if the head
			// moves on before it reads the pull request again.
			req.sha = head
			j.Log.Info("live data approved for one commit", "user", user, "head", head)
			return a.processPR(ctx, req, j.Log)
		}
		return []*Job{j}, nil, true
	case *github.CheckRunEvent:
		if name := ev.GetCheckRun().GetName(); ev.GetAction() != "rerequested" || (name != AggregateCheckName && !strings.HasPrefix(name, "driftback / ")) {
			return nil, nil, false
		}
		var jobs []*Job
		for _, p := range ev.GetCheckRun().PullRequests {
			req := prRequest{
				installation: ev.GetInstallation().GetID(),
				owner:        ev.GetRepo().GetOwner().GetLogin(), repo: ev.GetRepo().GetName(),
				number: p.GetNumber(), sha: ev.GetCheckRun().GetHeadSHA(),
			}
			jobs = append(jobs, a.prJob(req, delivery, log))
		}
		return jobs, nil, len(jobs) > 0
	case *github.PushEvent:
		full := ev.GetRepo().GetFullName()
		if !a.servesRepo(full) || ev.GetRef() != "refs/heads/"+ev.GetRepo().GetDefaultBranch() || ev.GetDeleted() {
			return nil, nil, false
		}
		owner, name := ev.GetRepo().GetOwner().GetLogin(), ev.GetRepo().GetName()
		if owner == "" {
			owner = ev.GetRepo().GetOwner().GetName()
		}
		sha := ev.GetAfter()
		plog := log.With("repo", full, "sha", sha)
		return []*Job{{Key: full + "@default", SHA: sha, Log: plog, Run: func(ctx context.Context) error {
			return a.refreshDefaultBranch(ctx, ev.GetInstallation().GetID(), owner, name, sha, plog)
		}}}, nil, true
	case *github.InstallationEvent:
		if ev.GetAction() == "deleted" || ev.GetAction() == "suspend" {
			a.clients.Forget(ev.GetInstallation().GetID())
		}
		log.Info("installation event", "action", ev.GetAction(), "installation", ev.GetInstallation().GetID())
		return nil, nil, true
	case *github.InstallationRepositoriesEvent:
		log.Info("installation repositories changed", "action", ev.GetAction(), "added", len(ev.RepositoriesAdded), "removed", len(ev.RepositoriesRemoved))
		return nil, nil, true
	}
	return nil, nil, false
}

// prJob is the job that reports on a pull request at req.sha.
func (a *App) prJob(req prRequest, delivery string, log *slog.Logger) *Job {
	log = log.With("repo", req.owner+"/"+req.repo, "pr", req.number, "sha", req.sha)
	return &Job{
		Key: req.key(), SHA: req.sha, Log: log,
		Run:  func(ctx context.Context) error { return a.processPR(ctx, req, log) },
		Fail: func(ctx context.Context, err error) { a.errorComment(ctx, req, err) },
	}
}

// reply answers a command on its pull request.
func (a *App) reply(ctx context.Context, gh *github.Client, req prRequest, body string) error {
	_, _, err := gh.Issues.CreateComment(ctx, req.owner, req.repo, req.number, &github.IssueComment{Body: &body})
	if err != nil {
		return fmt.Errorf("reply to the command: %w", err)
	}
	return nil
}
