package render_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftback/driftback/render"
)

// TestCache proves an overlay whose inputs did not change is never rendered
// twice, across commits, and that a change renders exactly the overlays it
// touches again.
func TestCache(t *testing.T) {
	repo := newGitRepo(t)
	first := repo.commit("base", clone(affectedRepo))
	second := repo.commit("change the shared base", map[string]any{
		"base/web/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 9\n",
	})
	cache := render.NewCache(64 << 20)
	r := render.New(render.Options{Cache: cache})
	overlays := []string{"envs/dev", "envs/prod", "envs/staging", "standalone"}

	renderAt := func(rev string) map[string]bool {
		t.Helper()
		tr, err := render.GitTree(repo.repo, rev)
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.Render(context.Background(), tr, overlays)
		if err != nil {
			t.Fatal(err)
		}
		cached := map[string]bool{}
		for _, o := range res.Overlays {
			if err := o.Err(); err != nil {
				t.Fatalf("%s: %v", o.Path, err)
			}
			cached[o.Path] = o.Cached
		}
		return cached
	}

	steps := []struct {
		rev  string
		want map[string]bool
	}{
		{first, map[string]bool{"envs/dev": false, "envs/prod": false, "envs/staging": false, "standalone": false}},
		{first, map[string]bool{"envs/dev": true, "envs/prod": true, "envs/staging": true, "standalone": true}},
		{second, map[string]bool{"envs/dev": false, "envs/prod": false, "envs/staging": false, "standalone": true}},
		{first, map[string]bool{"envs/dev": true, "envs/prod": true, "envs/staging": true, "standalone": true}},
	}
	for i, s := range steps {
		if diff := cmp.Diff(s.want, renderAt(s.rev)); diff != "" {
			t.Errorf("step %d: cached (-want +got):\n%s", i, diff)
		}
	}
	if hits, misses := cache.Stats(); hits != 9 || misses != 7 {
		t.Errorf("cache stats: %d hits, %d misses; want 9, 7", hits, misses)
	}
}

// TestCacheIsBounded proves the cache drops the least recently used renders to
// stay within its size.
func TestCacheIsBounded(t *testing.T) {
	repo := newGitRepo(t)
	tr, err := render.GitTree(repo.repo, repo.commit("base", clone(affectedRepo)))
	if err != nil {
		t.Fatal(err)
	}
	cache := render.NewCache(600) // room for about two of these small renders
	r := render.New(render.Options{Cache: cache})
	if _, err := r.Render(context.Background(), tr, []string{"envs/dev", "envs/prod", "envs/staging", "standalone"}); err != nil {
		t.Fatal(err)
	}
	if n := cache.Len(); n == 0 || n >= 4 {
		t.Errorf("cache holds %d renders; want between 1 and 3 for its size", n)
	}
}
