package repos

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// TestCacheConcurrentAndBounded proves concurrent jobs share one clone and
// fetch only when a commit is missing, and that the cache removes the least
// recently used clone to stay within its size.
func TestCacheConcurrentAndBounded(t *testing.T) {
	w := newServer(t)
	base := w.commit(plumbing.ZeroHash, map[string]string{"deploy/prod/kustomization.yaml": "resources: []\n"})
	head := w.commit(base, map[string]string{"deploy/prod/kustomization.yaml": "resources: [a.yaml]\n"})
	w.push(map[string]plumbing.Hash{"refs/heads/main": base, "refs/pull/1/head": head})
	url := w.url
	cache, err := New(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	token := testToken
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
	if n := w.Uploads(); n != 1 {
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

	// A clone larger than the whole cache is an error naming the setting,
	// and it leaves the disk once released.
	tiny, err := New(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tiny.Fetch(context.Background(), "acme/one", url, token, []string{"refs/heads/main"}, []string{base.String()}); err == nil || !strings.Contains(err.Error(), "server.cacheMaxBytes") {
		t.Errorf("a clone over the whole cache: err = %v, want one naming server.cacheMaxBytes", err)
	}
	if n := len(tiny.repos); n != 0 {
		t.Errorf("%d clones kept after a clone over the whole cache", n)
	}

	// Bounded: a cache that holds one clone keeps the one in use and evicts
	// the other once it is released, never while it is read.
	one, err := New(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	_, release, err = one.Fetch(context.Background(), "acme/probe", url, token, []string{"refs/heads/main"}, []string{base.String()})
	if err != nil {
		t.Fatal(err)
	}
	release()
	small, err := New(t.TempDir(), one.repos["acme/probe"].size*3/2)
	if err != nil {
		t.Fatal(err)
	}
	_, releaseOne, err := small.Fetch(context.Background(), "acme/one", url, token, []string{"refs/heads/main"}, []string{base.String()})
	if err != nil {
		t.Fatal(err)
	}
	_, releaseTwo, err := small.Fetch(context.Background(), "acme/two", url, token, []string{"refs/heads/main"}, []string{base.String()})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(small.repos); n != 2 {
		t.Errorf("%d clones while both are read, want both kept", n)
	}
	releaseOne()
	releaseTwo()
	small.evict()
	if n := len(small.repos); n != 1 || small.repos["acme/two"] == nil {
		t.Errorf("after release: %d clones (acme/two kept: %v), want the most recent one only", n, small.repos["acme/two"] != nil)
	}
	if _, err := git.PlainOpen(small.dir + "/acme/one.git"); err == nil {
		t.Errorf("an evicted clone is still on disk")
	}
}

// TestClosedPullRequestsLeaveTheCache: when a pull request closes, its refs
// leave the cached clone and, after a repack, so do the commits only it had.
func TestClosedPullRequestsLeaveTheCache(t *testing.T) {
	t.Parallel()
	w := newServer(t)
	base := w.commit(plumbing.ZeroHash, map[string]string{"deploy/prod/kustomization.yaml": "resources: []\n"})
	noise := make([]byte, 2<<20)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	head := w.commit(base, map[string]string{"deploy/prod/blob.bin": string(noise)}) // 2 MiB that does not compress
	w.push(map[string]plumbing.Hash{"refs/heads/main": base, "refs/pull/9/head": head})
	url := w.url
	cache, err := New(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	_, release, err := cache.Fetch(context.Background(), fullName, url, testToken, []string{"refs/heads/main", "refs/pull/9/head"}, []string{base.String(), head.String()})
	if err != nil {
		t.Fatal(err)
	}
	release()
	before := cache.repos[fullName].size
	if err := cache.ForgetPull(fullName, 9); err != nil {
		t.Fatal(err)
	}
	// The next job's view of the clone.
	repo, release, err := cache.Fetch(context.Background(), fullName, url, "no-fetch-needed", nil, []string{base.String()})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := repo.Reference("refs/pull/9/head", false); err == nil {
		t.Error("the closed pull request's ref is still in the clone")
	}
	if _, err := repo.CommitObject(head); err == nil {
		t.Error("the commit only the closed pull request had is still in the clone")
	}
	if _, err := repo.CommitObject(base); err != nil {
		t.Errorf("the default branch's commit went too: %v", err)
	}
	if after := cache.repos[fullName].size; after > before-(1<<20) {
		t.Errorf("the clone went from %d to %d bytes; the pull request's 2 MiB did not leave the disk", before, after)
	}
}

// TestAFetchLargerThanTheCacheStops: a push of more than the cache may hold
// stops the fetch as it downloads, before it fills the volume, with an error
// naming the setting; what it wrote leaves the disk.
func TestAFetchLargerThanTheCacheStops(t *testing.T) {
	w := newServer(t)
	blob := make([]byte, 4<<20) // random: it does not compress
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	big := w.commit(plumbing.ZeroHash, map[string]string{"deploy/prod/kustomization.yaml": "resources: []\n", "blob.bin": string(blob)})
	w.push(map[string]plumbing.Hash{"refs/heads/main": big})
	dir := t.TempDir()
	const limit = 1 << 20
	cache, err := New(dir, limit)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = cache.Fetch(context.Background(), "acme/big", w.url, testToken, []string{"refs/heads/main"}, []string{big.String()})
	if !errors.Is(err, ErrFetchTooLarge) || !strings.Contains(err.Error(), "server.cacheMaxBytes") {
		t.Fatalf("err = %v, want the fetch stopped, naming server.cacheMaxBytes", err)
	}
	if n := dirSize(dir); n > limit {
		t.Errorf("%d bytes left on disk, over the cache's %d", n, limit)
	}
	if n := len(cache.repos); n != 0 {
		t.Errorf("%d clones kept after a fetch over the cache", n)
	}
}

// TestFetchesShareTheCachesRoom: what fetches download comes out of the
// room the clones leave, so the volume never holds more than the bound
// however many fetches run. A clone a job is reading is not removed to make
// room: the next repository's fetch stops, saying why, with the disk under
// the bound. Once no job reads it, the least recently used clone makes way.
func TestFetchesShareTheCachesRoom(t *testing.T) {
	w := newServer(t)
	blob := func() string {
		b := make([]byte, 2<<20) // random: it does not compress
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	a := w.commit(plumbing.ZeroHash, map[string]string{"a.bin": blob()})
	w.push(map[string]plumbing.Hash{"refs/heads/a": a})
	// The worktree still has a.bin: b's commit holds both, 4 MiB.
	b := w.commit(plumbing.ZeroHash, map[string]string{"b.bin": blob()})
	w.push(map[string]plumbing.Hash{"refs/heads/b": b})
	dir := t.TempDir()
	const limit = 5 << 20 // one clone fits, not two
	// What git writes beside the packs it downloads (indexes, refs) is not
	// downloaded: the volume's headroom is for it.
	const beside = 64 << 10
	cache, err := New(dir, limit)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, releaseA, err := cache.Fetch(ctx, "acme/a", w.url, testToken, []string{"refs/heads/a"}, []string{a.String()})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = cache.Fetch(ctx, "acme/b", w.url, testToken, []string{"refs/heads/b"}, []string{b.String()})
	if !errors.Is(err, ErrFetchTooLarge) || !strings.Contains(err.Error(), "other jobs are reading") {
		t.Errorf("a second clone while the first is read: err %v, want it stopped for want of room", err)
	}
	if n := dirSize(dir); n > limit+beside {
		t.Errorf("%d bytes on disk, over the cache's %d", n, limit)
	}
	if _, ok := cache.repos["acme/a"]; !ok {
		t.Fatal("the clone a job reads was removed")
	}

	releaseA()
	_, releaseB, err := cache.Fetch(ctx, "acme/b", w.url, testToken, []string{"refs/heads/b"}, []string{b.String()})
	if err != nil {
		t.Fatalf("the second clone once the first is not read: %v", err)
	}
	defer releaseB()
	if n := dirSize(dir); n > limit+beside {
		t.Errorf("%d bytes on disk, over the cache's %d", n, limit)
	}
	if _, ok := cache.repos["acme/a"]; ok {
		t.Error("the least recently used clone did not make way")
	}
}

// TestAFetchHasATimeBound: a fetch holds its clone for writing, so every job
// on the repository waits for it: one that takes longer than the cache's
// FetchTimeout stops, saying so, and the clone is free again.
func TestAFetchHasATimeBound(t *testing.T) {
	w := newServer(t)
	c := w.commit(plumbing.ZeroHash, map[string]string{"deploy/prod/kustomization.yaml": "resources: []\n"})
	w.push(map[string]plumbing.Hash{"refs/heads/main": c})
	target, err := url.Parse(w.HTTPAddress())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	stop := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
			select { // a server that does not answer the fetch itself
			case <-stop:
			case <-r.Context().Done():
			}
			return
		}
		proxy.ServeHTTP(rw, r)
	}))
	defer slow.Close()
	defer close(stop)
	cache, err := New(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	cache.FetchTimeout = 500 * time.Millisecond
	start := time.Now()
	_, _, err = cache.Fetch(context.Background(), fullName, slow.URL+"/"+fullName+".git", testToken, []string{"refs/heads/main"}, []string{c.String()})
	if err == nil || !strings.Contains(err.Error(), "time bound") {
		t.Errorf("err %v, want the fetch stopped by its time bound", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the fetch took %s, over its bound of %s", d, cache.FetchTimeout)
	}
	if _, release, err := cache.Fetch(context.Background(), fullName, w.url, testToken, []string{"refs/heads/main"}, []string{c.String()}); err != nil {
		t.Errorf("the next fetch of the repository: %v", err)
	} else {
		release()
	}
}
