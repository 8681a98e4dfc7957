package app

import (
	"context"
	"sync"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// TestRepoCacheConcurrentAndBounded proves concurrent jobs share one clone and
// fetch only when a commit is missing, and that the cache removes the least
// recently used clone to stay within its size.
func TestRepoCacheConcurrentAndBounded(t *testing.T) {
	w := newWorld(t, nil)
	base := w.commit(plumbing.ZeroHash, baseFiles)
	head := w.commit(base, withReplicas(3))
	w.push(map[string]plumbing.Hash{"refs/heads/main": base, "refs/pull/1/head": head})
	url := w.git.HTTPAddress() + "/" + fullName + ".git"
	cache, err := NewRepoCache(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	token := w.gh.Token(instID)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			repo, release, err := cache.Fetch(context.Background(), fullName, url, token, []string{"refs/heads/main", "refs/pull/1/head"}, []string{base.String(), head.String()})
			if err != nil {
				t.Error(err)
				return
			}
			defer release()
			if _, err := repo.CommitObject(head); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := w.uploads.Load(); n != 1 {
		t.Errorf("%d fetches for 8 concurrent jobs on the same commits, want 1", n)
	}
	_, release, err := cache.Fetch(context.Background(), fullName, url, "wrong-token", nil, []string{head.String()})
	if err != nil {
		t.Errorf("a clone that has the commits needs no fetch, so no token: %v", err)
	} else {
		release()
	}
	if _, _, err := cache.Fetch(context.Background(), fullName, url, "wrong-token", []string{"refs/heads/other"}, []string{plumbing.NewHash("1111111111111111111111111111111111111111").String()}); err == nil {
		t.Errorf("a fetch with a bad token succeeded")
	}

	// Bounded: a tiny cache keeps only the clone in use.
	small, err := NewRepoCache(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"acme/one", "acme/two"} {
		_, release, err := small.Fetch(context.Background(), name, url, token, []string{"refs/heads/main"}, []string{base.String()})
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	small.evict()
	if n := len(small.repos); n != 0 {
		t.Errorf("%d clones kept in a 1-byte cache after release", n)
	}
	if _, err := git.PlainOpen(small.dir + "/acme/one.git"); err == nil {
		t.Errorf("an evicted clone is still on disk")
	}
}
