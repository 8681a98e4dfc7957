// Package gitrepo opens a repository as git finds it, and holds the lock
// that every read of its object store takes: go-git's filesystem storage
// loads its indexes lazily and is not safe for concurrent use. The
// repository cache, the trees read from a repository and the writes of
// drift branches all take it.
package gitrepo

import (
	"sync"

	git "github.com/go-git/go-git/v5"
)

// locks holds one lock per open repository.
var locks sync.Map // *git.Repository → *sync.Mutex

// Lock returns the lock of repo's object store.
func Lock(repo *git.Repository) *sync.Mutex {
	l, _ := locks.LoadOrStore(repo, &sync.Mutex{})
	return l.(*sync.Mutex)
}

// Forget drops the lock of a repository that is no longer read.
func Forget(repo *git.Repository) { locks.Delete(repo) }
