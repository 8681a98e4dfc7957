// Package repos keeps the local clones of the repositories driftback serves:
// one bare clone per repository, fetched only for the commits a job needs,
// read by many jobs at once and kept under a size bound.
package repos

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/driftback/driftback/render"
)

// Cache keeps one bare clone per repository on local disk and fetches into
// it only the refs a job needs, when it does not have their commits yet. Jobs
// on one repository read it together; a fetch waits for them. The cache stays
// under a size bound by removing the least recently used clones.
type Cache struct {
	dir string
	max int64

	mu    sync.Mutex
	repos map[string]*cachedRepo
}

type cachedRepo struct {
	lock sync.RWMutex
	path string
	repo *git.Repository
	// Guarded by Cache.mu:
	lastUsed time.Time
	size     int64
	users    int // jobs between entry and release; never evicted while > 0
	// oversize is a clone larger than the whole cache: evicted first.
	oversize bool
}

// New keeps clones under dir, at most maxBytes in all.
func New(dir string, maxBytes int64) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	installBudgets()
	return &Cache{dir: dir, max: maxBytes, repos: map[string]*cachedRepo{}}, nil
}

// Fetch makes sure the clone of fullName has every commit of want, fetching
// refs from cloneURL with the installation token when it does not. It returns
// the repository, to read until release is called.
func (c *Cache) Fetch(ctx context.Context, fullName, cloneURL, token string, refs []string, want []string) (*git.Repository, func(), error) {
	cr, err := c.entry(fullName) // counts this job as a user
	if err != nil {
		return nil, nil, err
	}
	done := func() {
		cr.lock.RUnlock()
		c.mu.Lock()
		cr.users--
		oversize := cr.oversize
		c.mu.Unlock()
		if oversize {
			c.evict()
		}
	}
	cr.lock.RLock()
	if hasAll(cr.repo, want) {
		c.touch(cr, -1)
		return cr.repo, done, nil
	}
	cr.lock.RUnlock()

	cr.lock.Lock()
	size := int64(-1)
	if !hasAll(cr.repo, want) {
		fail := func(err error) (*git.Repository, func(), error) {
			cr.lock.Unlock()
			c.mu.Lock()
			cr.users--
			c.mu.Unlock()
			return nil, nil, err
		}
		// What one fetch downloads is bounded by the whole cache: a clone
		// larger than that could not be kept anyway.
		bctx, budget := withFetchBudget(ctx, c.max)
		err := fetch(bctx, cr.repo, cloneURL, token, refs)
		if err != nil && budget.spent() {
			// What it wrote goes with the clone, once no job reads it.
			c.mu.Lock()
			cr.oversize = true
			c.mu.Unlock()
			fail(nil)
			c.evict()
			return nil, nil, fmt.Errorf("fetch %s: %w: over server.cacheMaxBytes (%d MiB); raise it to check this repository", fullName, ErrFetchTooLarge, c.max>>20)
		}
		if err != nil {
			return fail(fmt.Errorf("fetch %s: %w", fullName, err))
		}
		if missing := missingOf(cr.repo, want); len(missing) > 0 {
			return fail(fmt.Errorf("fetch %s: commits %s are not on the server", fullName, strings.Join(missing, ", ")))
		}
		size = dirSize(cr.path)
	}
	cr.lock.Unlock()
	c.touch(cr, size)
	if size > c.max {
		// One clone over the whole cache: nothing else is evicted for it,
		// and it goes once no job reads it.
		c.mu.Lock()
		cr.users--
		cr.oversize = true
		c.mu.Unlock()
		c.evict()
		return nil, nil, fmt.Errorf("%s: the clone takes %d MiB on disk, over server.cacheMaxBytes (%d MiB): raise it to check this repository", fullName, size>>20, c.max>>20)
	}
	c.evict()
	cr.lock.RLock()
	return cr.repo, done, nil
}

// ForgetPull drops a closed pull request's refs from the clone of fullName
// and repacks it, so the commits only that pull request had leave the disk.
func (c *Cache) ForgetPull(fullName string, number int) error {
	c.mu.Lock()
	cr, ok := c.repos[fullName]
	if ok {
		cr.users++
	}
	c.mu.Unlock()
	if !ok {
		return nil // not cached: nothing to forget
	}
	defer func() {
		c.mu.Lock()
		cr.users--
		c.mu.Unlock()
	}()
	cr.lock.Lock()
	defer cr.lock.Unlock()
	lock := render.RepoLock(cr.repo)
	lock.Lock()
	defer lock.Unlock() // the old repository's lock: no one takes it after the swap
	removed := false
	for _, name := range []string{fmt.Sprintf("refs/pull/%d/head", number), fmt.Sprintf("refs/pull/%d/merge", number)} {
		if _, err := cr.repo.Reference(plumbing.ReferenceName(name), false); err != nil {
			continue
		}
		if err := cr.repo.Storer.RemoveReference(plumbing.ReferenceName(name)); err != nil {
			return fmt.Errorf("%s: remove %s: %w", fullName, name, err)
		}
		removed = true
	}
	if !removed {
		return nil
	}
	repackErr := cr.repo.RepackObjects(&git.RepackConfig{})
	// The open repository still indexes the packs the repack replaced, even
	// one that failed part way: it is opened again (no job holds it: this is
	// the write lock).
	repo, err := git.PlainOpen(cr.path)
	if err != nil {
		return fmt.Errorf("%s: reopen after the repack: %w", fullName, err)
	}
	render.ForgetRepo(cr.repo)
	cr.repo = repo
	c.touch(cr, dirSize(cr.path))
	if repackErr != nil {
		return fmt.Errorf("%s: repack after pull request #%d closed: %w", fullName, number, repackErr)
	}
	return nil
}

func (c *Cache) entry(fullName string) (*cachedRepo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cr, ok := c.repos[fullName]; ok {
		cr.users++
		return cr, nil
	}
	path := clonePath(c.dir, fullName)
	repo, err := git.PlainOpen(path)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		repo, err = git.PlainInit(path, true)
	}
	if err != nil {
		return nil, fmt.Errorf("repository cache %s: %w", path, err)
	}
	cr := &cachedRepo{path: path, repo: repo, size: dirSize(path), users: 1}
	c.repos[fullName] = cr
	return cr, nil
}

// touch marks a clone used now and records its size when size >= 0.
func (c *Cache) touch(cr *cachedRepo, size int64) {
	c.mu.Lock()
	cr.lastUsed = time.Now()
	if size >= 0 {
		cr.size = size
	}
	c.mu.Unlock()
}

// evict removes least recently used clones that no job uses until the cache
// fits.
func (c *Cache) evict() {
	c.mu.Lock()
	defer c.mu.Unlock()
	var total int64
	var names []string
	for name, cr := range c.repos {
		if !cr.oversize { // on its way out: no reason to evict others
			total += cr.size
		}
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := c.repos[names[i]], c.repos[names[j]]
		if a.oversize != b.oversize {
			return a.oversize
		}
		return a.lastUsed.Before(b.lastUsed)
	})
	for _, name := range names {
		if total <= c.max && !c.repos[name].oversize {
			return
		}
		cr := c.repos[name]
		if cr.users > 0 { // in use: not now
			continue
		}
		if err := os.RemoveAll(cr.path); err == nil {
			total -= cr.size
			delete(c.repos, name)
			render.ForgetRepo(cr.repo)
		}
	}
}

func fetch(ctx context.Context, repo *git.Repository, url, token string, refs []string) error {
	remote, err := repo.Remote("origin")
	if errors.Is(err, git.ErrRemoteNotFound) || (err == nil && remote.Config().URLs[0] != url) {
		_ = repo.DeleteRemote("origin") // absent is fine; it is recreated below
		remote, err = repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{url}})
	}
	if err != nil {
		return err
	}
	var specs []config.RefSpec
	for _, r := range refs {
		specs = append(specs, config.RefSpec("+"+r+":"+r))
	}
	var auth *githttp.BasicAuth
	if token != "" {
		auth = &githttp.BasicAuth{Username: "x-access-token", Password: token}
	}
	// The cache's write lock keeps this repository's jobs out; the object
	// store's lock keeps out reads through trees still held elsewhere.
	lock := render.RepoLock(repo)
	lock.Lock()
	defer lock.Unlock()
	err = remote.FetchContext(ctx, &git.FetchOptions{RefSpecs: specs, Auth: auth, Tags: git.NoTags, Force: true})
	if errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil
	}
	return err
}

func hasAll(repo *git.Repository, want []string) bool { return len(missingOf(repo, want)) == 0 }

func missingOf(repo *git.Repository, want []string) []string {
	lock := render.RepoLock(repo)
	lock.Lock()
	defer lock.Unlock()
	var out []string
	for _, sha := range want {
		if _, err := repo.CommitObject(plumbing.NewHash(sha)); err != nil {
			out = append(out, sha)
		}
	}
	return out
}

func dirSize(path string) int64 {
	var n int64
	_ = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error { // an unreadable entry counts as nothing
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// clonePath is where the cache under dir keeps fullName's clone.
func clonePath(dir, fullName string) string {
	return filepath.Join(dir, filepath.FromSlash(fullName)+".git")
}

// Open opens, read-only and without fetching, the clone of fullName that a
// cache under dir keeps, as another process left it; nil when there is none.
// The name is matched in lower case, else as GitHub spells it.
func Open(dir, fullName string) *git.Repository {
	if dir == "" {
		return nil
	}
	for _, name := range []string{strings.ToLower(fullName), fullName} {
		if r, err := git.PlainOpen(clonePath(dir, name)); err == nil {
			return r
		}
	}
	return nil
}
