package app

import (
	"context"
	"log/slog"

	git "github.com/go-git/go-git/v5"
	"github.com/google/go-github/v60/github"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/report"
	"github.com/driftback/driftback/rollback"
)

// historyAnalysis reads the repository's past before a pull request's base,
// under the repository's lock, to say what restoring earlier state does not
// restore (see package rollback). An earlier removal's count comes from
// driftback's own comment on the pull request that carried it.
func (a *App) historyAnalysis(gh *github.Client, req prRequest, repo *git.Repository, base string) func(context.Context, *drift.Target, drift.LiveReader) error {
	return func(ctx context.Context, t *drift.Target, live drift.LiveReader) error {
		lock := render.RepoLock(repo)
		lock.Lock()
		defer lock.Unlock()
		return rollback.Analyze(ctx, rollback.Input{
			Target: t, Live: live,
			History: rollback.NewHistory(repo, base, rollback.DefaultLimits()),
			Earlier: a.earlierCount(gh, req.owner, req.repo),
		})
	}
}

// earlierCount finds what driftback counted when a commit removed an object:
// the pull requests that carried the commit, and its comment on them.
func (a *App) earlierCount(gh *github.Client, owner, repo string) rollback.Earlier {
	return func(ctx context.Context, commit, kind, name string) (int, bool) {
		bot, err := a.clients.BotLogin(ctx)
		if err != nil {
			return 0, false
		}
		prs, _, err := gh.PullRequests.ListPullRequestsWithCommit(ctx, owner, repo, commit, nil)
		if err != nil {
			return 0, false // the count is then said to be unknown
		}
		for _, pr := range prs {
			comments, err := ourComments(ctx, gh, bot, owner, repo, pr.GetNumber())
			if err != nil {
				continue
			}
			for _, c := range comments {
				if n, ok := report.LostCount(c.GetBody(), kind, name); ok {
					return n, true
				}
			}
		}
		return 0, false
	}
}

// revertsOf are the subjects of a pull request's revert commits.
func revertsOf(repo *git.Repository, base, head string, log *slog.Logger) []string {
	lock := render.RepoLock(repo)
	lock.Lock()
	defer lock.Unlock()
	cs, err := rollback.Reverts(repo, base, head, rollback.DefaultLimits())
	if err != nil {
		log.Warn("cannot read the pull request's commits", "err", err)
		return nil
	}
	var out []string
	for _, c := range cs {
		out = append(out, c.Subject)
	}
	return out
}
