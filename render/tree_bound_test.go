package render_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/driftback/driftback/internal/gittest"
	"github.com/driftback/driftback/render"
)

// TestGitTreeIsBounded: a commit of a few kilobytes whose trees name each
// other expands past the bound; reading it stops there with TooLargeError,
// fast, and the repository's lock is free again. A commit under the bound
// reads whole.
func TestGitTreeIsBounded(t *testing.T) {
	g := newGitRepo(t)
	ok, err := gittest.Bomb(g.repo, plumbing.ZeroHash, 20) // 8,420 paths
	if err != nil {
		t.Fatal(err)
	}
	tree, err := render.GitTree(g.repo, ok.String())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tree.Files()); n != 8000 {
		t.Errorf("%d files, want 8000", n)
	}
	bomb, err := gittest.Bomb(g.repo, ok, 64) // 266,304 paths
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = render.GitTree(g.repo, bomb.String())
	var tl *render.TooLargeError
	if !errors.As(err, &tl) || tl.Commit != bomb.String() {
		t.Fatalf("err = %v, want a TooLargeError for %s", err, bomb)
	}
	t.Logf("%v after %s", err, time.Since(start))
	if !render.RepoLock(g.repo).TryLock() {
		t.Error("the repository lock is still held")
	}
}

// TestGitTreeIsBoundedInDepthAndStopsWithItsJob: a path nested deeper than
// MaxTreeDepth is too large to compare, and a walk whose job ended stops,
// letting go of the repository's lock.
func TestGitTreeIsBoundedInDepthAndStopsWithItsJob(t *testing.T) {
	g := newGitRepo(t)
	deep := strings.Repeat("d/", render.MaxTreeDepth) + "kustomization.yaml"
	sha := g.commit("deep", map[string]any{deep: "resources: []\n"})
	_, err := render.GitTree(g.repo, sha)
	var tl *render.TooLargeError
	if !errors.As(err, &tl) || tl.Depth != render.MaxTreeDepth || !strings.Contains(err.Error(), "deeper than") {
		t.Errorf("a path %d directories deep: err = %v, want a TooLargeError on depth", render.MaxTreeDepth, err)
	}
	bomb, err := gittest.Bomb(g.repo, plumbing.ZeroHash, 20)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := render.GitTreeContext(ctx, g.repo, bomb.String()); !errors.Is(err, context.Canceled) {
		t.Errorf("a walk for a job that ended: err = %v, want it stopped", err)
	}
	if !render.RepoLock(g.repo).TryLock() {
		t.Error("the repository lock is still held")
	}
}
