package render_test

import (
	"errors"
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
