package repos

import (
	"context"
	"errors"
	"fmt"

	"github.com/driftback/driftback/internal/gitrepo"
	"github.com/driftback/driftback/render"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// BranchTree is the tree at the tip of a branch.
func BranchTree(ctx context.Context, repo *git.Repository, branch string) (*render.Tree, error) {
	lock := gitrepo.Lock(repo)
	lock.Lock()
	ref, err := repo.Reference(plumbing.NewBranchReferenceName(branch), true)
	lock.Unlock()
	if err != nil {
		return nil, fmt.Errorf("read the branch %s: %w", branch, err)
	}
	return render.GitTreeContext(ctx, repo, ref.Hash().String())
}

// BranchFile reads a file at the tip of a branch; nil
// when it does not exist.
func BranchFile(repo *git.Repository, branch, path string) ([]byte, error) {
	lock := gitrepo.Lock(repo)
	lock.Lock()
	ref, err := repo.Reference(plumbing.NewBranchReferenceName(branch), true)
	lock.Unlock()
	if err != nil {
		return nil, err
	}
	return CommitFile(repo, ref.Hash().String(), path)
}

// CommitFile reads a file at a commit; nil when it does not exist.
func CommitFile(repo *git.Repository, sha, path string) ([]byte, error) {
	lock := gitrepo.Lock(repo)
	lock.Lock()
	defer lock.Unlock()
	commit, err := repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return nil, err
	}
	f, err := commit.File(path)
	if errors.Is(err, object.ErrFileNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s, err := f.Contents()
	return []byte(s), err
}
