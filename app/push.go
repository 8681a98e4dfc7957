package app

import (
	"context"
	"log/slog"

	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/render"
)

// refreshDefaultBranch fetches the default branch's new head into the cache
// and renders the repository's targets there, so the desired state is ready
// (and cached) before the next pull request or drift check needs it.
func (a *App) refreshDefaultBranch(ctx context.Context, installation int64, owner, repo, sha string, log *slog.Logger) error {
	gh, err := a.clients.Installation(installation)
	if err != nil {
		return err
	}
	info, err := gh.Repository(ctx, owner, repo)
	if err != nil {
		return err
	}
	token, err := gh.Token(ctx)
	if err != nil {
		return err
	}
	fullName := owner + "/" + repo
	r, release, err := a.cache.Fetch(ctx, fullName, info.CloneURL, token, []string{"refs/heads/" + info.DefaultBranch}, []string{sha})
	if err != nil {
		return err
	}
	defer release()
	tree, err := render.GitTreeContext(ctx, r, sha)
	if err != nil {
		return err
	}
	var paths []string
	ts, _ := a.targetsOf(fullName)
	for _, t := range targets.ExpandGlobs(ts, tree) {
		// Targets a reconciler builds its own way are rendered when first
		// compared.
		plain := t.Found == nil || (t.Found.Flux == nil && t.Found.Kustomize == nil)
		if plain && tree.HasKustomization(t.Path) {
			paths = append(paths, t.Path)
		}
	}
	res, err := a.renderer.Render(ctx, tree, paths)
	if err != nil {
		return err
	}
	log.Info("desired state refreshed", "targets", len(paths), "problems", len(res.Problems()))
	if a.drift != nil {
		a.drift.Nudge(fullName)
	}
	return nil
}
