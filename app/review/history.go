package review

import (
	"context"
	"log/slog"

	git "github.com/go-git/go-git/v5"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/drift/scope"
	"github.com/driftback/driftback/internal/gitrepo"
	"github.com/driftback/driftback/rollback"
)

// History reads the repository's past before a pull request's base, under
// the repository's lock, to say what restoring earlier state does not
// restore (see package rollback). earlier finds an earlier removal's count
// (driftback's own comment on the pull request that carried it). It reads
// the cluster within the target's scope.
func History(repo *git.Repository, base string, earlier rollback.Earlier) func(context.Context, *drift.Target, object.LiveReader, *scope.Scope) error {
	return func(ctx context.Context, t *drift.Target, live object.LiveReader, sc *scope.Scope) error {
		lock := gitrepo.Lock(repo)
		lock.Lock()
		defer lock.Unlock()
		return rollback.Analyze(ctx, rollback.Input{
			Target: t, Live: live, Scope: sc,
			History: rollback.NewHistory(repo, base, rollback.DefaultLimits()),
			Earlier: earlier,
		})
	}
}

// Reverts are the subjects of a pull request's revert commits.
func Reverts(repo *git.Repository, base, head string, log *slog.Logger) []string {
	lock := gitrepo.Lock(repo)
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
