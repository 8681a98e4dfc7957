package render_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/driftback/driftback/internal/gitrepo"
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
	if !gitrepo.Lock(g.repo).TryLock() {
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
	if !gitrepo.Lock(g.repo).TryLock() {
		t.Error("the repository lock is still held")
	}
}

// TestGitTreeIsBoundedInPathBytes: a few kilobytes of trees with long names
// that name each other expand to gigabytes of paths under the entry bound
// (2^14 files of 3.5 KB paths; at 4,000-byte names, heap in gigabytes).
// Reading stops at the bound on all paths' bytes, or on one path's length,
// fast and without the memory.
func TestGitTreeIsBoundedInPathBytes(t *testing.T) {
	g := newGitRepo(t)
	for _, tc := range []struct {
		name              string
		depth, nameLength int
		check             func(*render.TooLargeError) bool
	}{
		{"255-byte names, 14 deep", 14, 255, func(e *render.TooLargeError) bool { return e.PathBytes == render.MaxTreePathBytes }},
		{"4,000-byte names", 12, 4000, func(e *render.TooLargeError) bool { return e.PathLength == render.MaxTreePathLength }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bomb, err := gittest.LongNameBomb(g.repo, plumbing.ZeroHash, tc.depth, tc.nameLength)
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err = render.GitTree(g.repo, bomb.String())
			runtime.ReadMemStats(&after)
			var tl *render.TooLargeError
			if !errors.As(err, &tl) || !tc.check(tl) {
				t.Fatalf("err = %v, want a TooLargeError on this bound", err)
			}
			// Allocated, not held: a bound that holds stops well under
			// what the expansion would take.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 512<<20 {
				t.Errorf("reading allocated %d MiB before it stopped", alloc>>20)
			}
			t.Logf("%v after %s", err, time.Since(start))
		})
	}
	// A repository's own long paths are fine.
	sha := g.commit("long", map[string]any{strings.Repeat("long-directory-name/", 50) + "kustomization.yaml": "resources: []\n"})
	if _, err := render.GitTree(g.repo, sha); err != nil {
		t.Errorf("a 1,018-byte path: %v", err)
	}
}
