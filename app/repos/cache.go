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

	"github.com/driftback/driftback/internal/gitrepo"
)

// Cache keeps one bare clone per repository on local disk and fetches into
// it only the refs a job needs, when it does not have their commits yet. Jobs
// on one repository read it together; a fetch waits for them. The cache stays
// under a size bound by removing the least recently used clones.
type Cache struct {
	dir string
	max int64
	// FetchTimeout bounds one fetch (0: DefaultFetchTimeout). A fetch holds
	// its clone for writing: every job on the repository waits for it.
	FetchTimeout time.Duration

	mu    sync.Mutex
	repos map[string]*cachedRepo
	// fetching is what the fetches under way have downloaded and not yet
	// counted in their clone's size: with the clones' sizes it stays under
	// max, so the volume holds the cache whatever a push weighs.
	fetching int64
}

// DefaultFetchTimeout bounds one fetch when the Cache does not say.
const DefaultFetchTimeout = 2 * time.Minute

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
		// What fetches download comes out of the room the clones leave
		// (least recently used ones that no job reads make way for it), so
		// the cache's volume never holds more than the bound, however large
		// a push, and however many fetches run at once.
		// Once refused, or once the fetch returned (go-git may still
		// read), nothing more is taken.
		var (
			takeMu       sync.Mutex
			took, wanted int64
			closed       bool
		)
		c.mu.Lock()
		before := cr.size
		c.mu.Unlock()
		bctx, budget := withFetchBudget(ctx, func(n int64) bool {
			takeMu.Lock()
			defer takeMu.Unlock()
			if closed || !c.makeRoom(cr, n) {
				if !closed {
					wanted = took + n
				}
				closed = true
				return false
			}
			took += n
			return true
		})
		bctx, cancel := context.WithTimeoutCause(bctx, c.fetchTimeout(), errFetchSlow)
		err := fetch(bctx, cr.repo, cloneURL, token, refs)
		cancel()
		if err != nil {
			removeTempPacks(cr.path) // what a stopped fetch had begun to write
		}
		// What was downloaded is now the clone's, counted in its size.
		takeMu.Lock()
		closed = true
		takeMu.Unlock()
		size = dirSize(cr.path)
		c.mu.Lock()
		c.fetching -= took
		cr.size = size
		c.mu.Unlock()
		if err != nil && errors.Is(context.Cause(bctx), errFetchSlow) && ctx.Err() == nil {
			err = fmt.Errorf("%w (%s)", errFetchSlow, c.fetchTimeout())
		}
		if err != nil && budget.spent() && before+wanted <= c.max {
			// It would fit alone: the clones other jobs are reading now
			// leave it no room.
			return fail(fmt.Errorf("fetch %s: %w: the clones other jobs are reading leave no room for it under server.cacheMaxBytes (%d MiB); raise it to check this many repositories at once", fullName, ErrFetchTooLarge, c.max>>20))
		}
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
	lock := gitrepo.Lock(cr.repo)
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
	gitrepo.Forget(cr.repo)
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

// removeTempPacks removes the packs a stopped fetch had begun to write
// into the bare clone at path.
func removeTempPacks(path string) {
	tmp, _ := filepath.Glob(filepath.Join(path, "objects", "pack", "tmp_*"))
	for _, f := range tmp {
		_ = os.Remove(f) // a leftover is counted in the clone's size
	}
}

// errFetchSlow stops a fetch that takes longer than its time bound.
var errFetchSlow = errors.New("the fetch took longer than its time bound")

func (c *Cache) fetchTimeout() time.Duration {
	if c.FetchTimeout > 0 {
		return c.FetchTimeout
	}
	return DefaultFetchTimeout
}

// makeRoom takes n bytes for a fetch into cr: the clones' sizes and what
// fetches under way downloaded stay under the bound, once the least
// recently used clones no job reads are removed to make way. It reports
// whether the room is there.
func (c *Cache) makeRoom(cr *cachedRepo, n int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	used := c.fetching
	for _, other := range c.repos {
		used += other.size
	}
	if used+n > c.max {
		for _, name := range c.leastRecent() {
			other := c.repos[name]
			if other == cr || other.users > 0 {
				continue
			}
			if c.remove(name) {
				used -= other.size
			}
			if used+n <= c.max {
				break
			}
		}
	}
	if used+n > c.max {
		return false
	}
	c.fetching += n
	return true
}

// leastRecent are the clones' names, those on their way out first, then
// the least recently used. c.mu is held.
func (c *Cache) leastRecent() []string {
	var names []string
	for name := range c.repos {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := c.repos[names[i]], c.repos[names[j]]
		if a.oversize != b.oversize {
			return a.oversize
		}
		return a.lastUsed.Before(b.lastUsed)
	})
	return names
}

// remove deletes a clone no job uses from the disk and the cache. c.mu is
// held.
func (c *Cache) remove(name string) bool {
	cr := c.repos[name]
	if err := os.RemoveAll(cr.path); err != nil {
		return false
	}
	delete(c.repos, name)
	gitrepo.Forget(cr.repo)
	return true
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
	total := c.fetching
	for _, cr := range c.repos {
		if !cr.oversize { // on its way out: no reason to evict others
			total += cr.size
		}
	}
	for _, name := range c.leastRecent() {
		cr := c.repos[name]
		if total <= c.max && !cr.oversize {
			return
		}
		if cr.users > 0 { // in use: not now
			continue
		}
		if c.remove(name) && !cr.oversize {
			total -= cr.size
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
	lock := gitrepo.Lock(repo)
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
	lock := gitrepo.Lock(repo)
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
