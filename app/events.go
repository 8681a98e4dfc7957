package app

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	ghapp "github.com/driftback/driftback/app/github"
	"github.com/driftback/driftback/app/queue"
	"github.com/driftback/driftback/app/review"

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

// prJob is the job that reports on a pull request at req.sha.
func (a *App) prJob(req prRequest, delivery string, log *slog.Logger) *queue.Job {
	log = log.With("repo", req.owner+"/"+req.repo, "pr", req.number, "sha", req.sha)
	return &queue.Job{
		Key: req.key(), SHA: req.sha, Log: log,
		Run:  func(ctx context.Context) error { return a.processPR(ctx, req, log) },
		Fail: func(ctx context.Context, err error) { a.errorComment(ctx, req, err) },
	}
}

// servesRepo says a repository has targets, or discovered sources to list.
// Until discovery has read its clusters once it cannot say no: the pull
// request is taken, and waits for it.
func (a *App) servesRepo(repo string) bool {
	if !a.targets.Synced() {
		return true
	}
	t, skipped := a.targetsOf(repo)
	return len(t) > 0 || len(skipped) > 0
}

// Route implements Router: which events become work.
func (a *App) Route(event, delivery string, payload any, log *slog.Logger) ([]*queue.Job, []string, bool) {
	switch ev := payload.(type) {
	case *ghapp.PullRequestEvent:
		req := prRequest{
			installation: ev.Installation,
			owner:        ev.Repo.Owner, repo: ev.Repo.Name,
			number: ev.Number, sha: ev.HeadSHA,
		}
		if !a.servesRepo(ev.Repo.FullName) {
			return nil, nil, false
		}
		switch ev.Action {
		case "opened", "synchronize", "reopened", "ready_for_review":
			j := a.prJob(req, delivery, log)
			// A fork's pushes wait for the repository's own pull requests
			// (fail closed: a head repository that is gone is a fork's).
			j.Yield = !strings.EqualFold(ev.HeadRepo, ev.Repo.FullName)
			return []*queue.Job{j}, nil, true
		case "labeled", "unlabeled":
			// Any label may be a target's acknowledge label: .github/driftback.yml
			// can rename it, so the check is decided on the refined policy.
			return []*queue.Job{a.prJob(req, delivery, log)}, nil, true
		case "closed":
			// Its queued work goes, and so do its refs in the repository
			// cache, with the commits only it had.
			full := req.owner + "/" + req.repo
			forget := &queue.Job{Key: req.key() + " closed", SHA: delivery, Log: log, Run: func(context.Context) error {
				if a.cache == nil {
					return nil
				}
				return a.cache.ForgetPull(full, req.number)
			}}
			jobs := []*queue.Job{forget}
			if ev.Merged && ev.MergeSHA != "" && a.follow != nil {
				jobs = append(jobs, a.followMerge(ev))
			}
			return jobs, []string{req.key()}, true
		}
	case *ghapp.CommentEvent:
		m := diffCommandPattern.FindStringSubmatch(strings.TrimSpace(ev.Body))
		if ev.Action != "created" || !ev.OnPullRequest || m == nil {
			return nil, nil, false
		}
		approved := strings.ToLower(m[1])
		if !a.servesRepo(ev.Repo.FullName) {
			return nil, nil, false
		}
		req := prRequest{
			installation: ev.Installation,
			owner:        ev.Repo.Owner, repo: ev.Repo.Name,
			number: ev.Number, forceLive: true,
		}
		j := a.prJob(req, delivery, log)
		// A command has its own key: whoever comments, it can neither replace
		// nor cancel the report of a new commit. Publishing is serialized per
		// pull request, so the two never interleave.
		j.Key, j.SHA = req.key()+" command", delivery
		j.Run = func(ctx context.Context) error { return a.approveLive(ctx, req, ev.User, approved, j.Log) }
		return []*queue.Job{j}, nil, true
	case *ghapp.IssueEvent:
		if ev.Action != "edited" || ev.BodyBefore == nil || !a.servesRepo(ev.Repo.FullName) {
			return nil, nil, false
		}
		full := ev.Repo.Owner + "/" + ev.Repo.Name
		// Each edit is its own job: two boxes ticked within a second are
		// two edits, and neither may replace the other.
		j := &queue.Job{Key: full + "#" + fmt.Sprint(ev.Number) + " dashboard " + delivery, SHA: delivery, Log: log.With("repo", full, "issue", ev.Number)}
		j.Run = func(ctx context.Context) error { return a.dashboardEdited(ctx, ev, j.Log) }
		return []*queue.Job{j}, nil, true
	case *ghapp.CheckRunEvent:
		if ev.Action != "rerequested" || (ev.Name != review.AggregateCheckName && !strings.HasPrefix(ev.Name, "driftback / ")) {
			return nil, nil, false
		}
		var jobs []*queue.Job
		for _, n := range ev.PullRequests {
			req := prRequest{
				installation: ev.Installation,
				owner:        ev.Repo.Owner, repo: ev.Repo.Name,
				number: n, sha: ev.HeadSHA,
			}
			jobs = append(jobs, a.prJob(req, delivery, log))
		}
		return jobs, nil, len(jobs) > 0
	case *ghapp.PushEvent:
		full := ev.Repo.FullName
		if !a.servesRepo(full) || ev.Ref != "refs/heads/"+ev.Repo.DefaultBranch || ev.Deleted {
			return nil, nil, false
		}
		sha := ev.After
		plog := log.With("repo", full, "sha", sha)
		return []*queue.Job{{Key: full + "@default", SHA: sha, Log: plog, Run: func(ctx context.Context) error {
			return a.refreshDefaultBranch(ctx, ev.Installation, ev.Repo.Owner, ev.Repo.Name, sha, plog)
		}}}, nil, true
	case *ghapp.InstallationEvent:
		if ev.Action == "deleted" || ev.Action == "suspend" {
			a.clients.Forget(ev.Installation)
		}
		log.Info("installation event", "action", ev.Action, "installation", ev.Installation)
		return nil, nil, true
	case *ghapp.InstallationRepositoriesEvent:
		log.Info("installation repositories changed", "action", ev.Action, "added", ev.Added, "removed", ev.Removed)
		return nil, nil, true
	}
	return nil, nil, false
}

// approveLive runs a writer's "/driftback diff <sha>": the pull request is
// compared with live data, for that commit only.
func (a *App) approveLive(ctx context.Context, req prRequest, user, approved string, log *slog.Logger) error {
	gh, err := a.clients.Installation(req.installation)
	if err != nil {
		return err
	}
	ok, perm, err := gh.CanWrite(ctx, req.owner, req.repo, user)
	if err != nil {
		return err
	}
	if !ok {
		log.Info("command ignored: no write permission", "user", user, "permission", perm)
		return nil
	}
	pr, err := gh.PullRequest(ctx, req.owner, req.repo, req.number)
	if err != nil {
		return err
	}
	head := pr.HeadSHA
	switch {
	case len(approved) != len(head):
		return a.reply(ctx, gh, req, report.ApproveHowTo(user, head))
	case approved != strings.ToLower(head):
		log.Info("command names a commit that is not the head", "user", user, "approved", approved, "head", head)
		return a.reply(ctx, gh, req, report.ApproveStale(user, approved, head))
	}
	// processPR renders this commit only, and stops if the head moves on
	// before it reads the pull request again.
	req.sha = head
	log.Info("live data approved for one commit", "user", user, "head", head)
	return a.processPR(ctx, req, log)
}

// reply answers a command on its pull request.
func (a *App) reply(ctx context.Context, gh *ghapp.Installation, req prRequest, body string) error {
	if err := gh.Comment(ctx, req.owner, req.repo, req.number, body); err != nil {
		return fmt.Errorf("reply to the command: %w", err)
	}
	return nil
}
