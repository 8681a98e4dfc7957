package gitrepo

import (
	"errors"
	"fmt"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Open opens the git repository dir is in, as git itself finds
// it: from a subdirectory, a linked worktree (git worktree add) through its
// common directory, and objects borrowed from another repository through
// objects/info/alternates (git clone --shared or --reference, as CI caches
// clone).
func Open(dir string) (*git.Repository, error) {
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("%s is not in a git repository (give --repo the folder of a clone)", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("open git repository %s: %w", dir, err)
	}
	st, ok := repo.Storer.(*filesystem.Storage)
	if !ok {
		return repo, nil
	}
	// Paths in objects/info/alternates are absolute: read them from the
	// root, not from within the repository's own folder.
	shared := filesystem.NewStorageWithOptions(st.Filesystem(), cache.NewObjectLRUDefault(), filesystem.Options{AlternatesFS: osfs.New("/")})
	var worktree billy.Filesystem // nil for a bare repository
	if wt, err := repo.Worktree(); err == nil {
		worktree = wt.Filesystem
	}
	if repo, err = git.Open(shared, worktree); err != nil {
		return nil, fmt.Errorf("open git repository %s: %w", dir, err)
	}
	return repo, nil
}
