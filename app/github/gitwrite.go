package github

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/driftback/driftback/internal/gitrepo"
)

func tokenAuth(token string) *githttp.BasicAuth {
	if token == "" {
		return nil
	}
	return &githttp.BasicAuth{Username: "x-access-token", Password: token}
}

// RemoteRefs lists a remote's branches: name (refs/heads/…) → commit.
func RemoteRefs(ctx context.Context, url, token string) (map[string]string, error) {
	remote := git.NewRemote(memory.NewStorage(), &gitconfig.RemoteConfig{Name: "origin", URLs: []string{url}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: tokenAuth(token)})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range refs {
		if r.Type() == plumbing.HashReference && r.Name().IsBranch() {
			out[r.Name().String()] = r.Hash().String()
		}
	}
	return out, nil
}

// commitFiles writes one commit on parent whose tree is parent's with files
// (repository path → content) replaced or added, and returns it.
func commitFiles(repo *git.Repository, parent string, files map[string][]byte, message string, who object.Signature) (plumbing.Hash, error) {
	lock := gitrepo.Lock(repo)
	lock.Lock()
	defer lock.Unlock()
	pc, err := repo.CommitObject(plumbing.NewHash(parent))
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("commit %s: %w", parent, err)
	}
	root, err := pc.Tree()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	treeHash, err := writeTree(repo, root, files)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	c := &object.Commit{
		Author: who, Committer: who, Message: message,
		TreeHash: treeHash, ParentHashes: []plumbing.Hash{pc.Hash},
	}
	obj := repo.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return repo.Storer.SetEncodedObject(obj)
}

// writeTree writes tree (nil for a new folder) with files, relative to it,
// replaced or added, and returns the new tree's hash.
func writeTree(repo *git.Repository, tree *object.Tree, files map[string][]byte) (plumbing.Hash, error) {
	entries := map[string]object.TreeEntry{}
	if tree != nil {
		for _, e := range tree.Entries {
			entries[e.Name] = e
		}
	}
	sub := map[string]map[string][]byte{}
	for p, content := range files {
		dir, rest, nested := strings.Cut(p, "/")
		if nested {
			if sub[dir] == nil {
				sub[dir] = map[string][]byte{}
			}
			sub[dir][rest] = content
			continue
		}
		blob := repo.Storer.NewEncodedObject()
		blob.SetType(plumbing.BlobObject)
		w, err := blob.Writer()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if _, err := w.Write(content); err != nil {
			return plumbing.ZeroHash, err
		}
		if err := w.Close(); err != nil {
			return plumbing.ZeroHash, err
		}
		h, err := repo.Storer.SetEncodedObject(blob)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		mode := filemode.Regular
		if e, ok := entries[p]; ok && e.Mode == filemode.Executable {
			mode = e.Mode
		}
		entries[p] = object.TreeEntry{Name: p, Mode: mode, Hash: h}
	}
	for dir, inner := range sub {
		var child *object.Tree
		if e, ok := entries[dir]; ok {
			if e.Mode != filemode.Dir {
				return plumbing.ZeroHash, fmt.Errorf("%s is a file, not a folder", dir)
			}
			t, err := repo.TreeObject(e.Hash)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			child = t
		}
		h, err := writeTree(repo, child, inner)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("%s: %w", dir, err)
		}
		entries[dir] = object.TreeEntry{Name: dir, Mode: filemode.Dir, Hash: h}
	}
	out := &object.Tree{}
	for _, e := range entries {
		out.Entries = append(out.Entries, e)
	}
	// Git orders entries by name, a folder as if its name ended in "/".
	sortKey := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(out.Entries, func(i, j int) bool { return sortKey(out.Entries[i]) < sortKey(out.Entries[j]) })
	obj := repo.Storer.NewEncodedObject()
	if err := out.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return repo.Storer.SetEncodedObject(obj)
}

// errBranchMoved says a branch was not where driftback last saw it: someone
// pushed meanwhile, and nothing was overwritten.
var errBranchMoved = errors.New("the branch moved since it was read")

// pushBranch points a remote branch at a commit, replacing what it had, but
// only while the branch is still at expected ("" for absent): a person's
// push in between is never overwritten (a force-push with lease).
func pushBranch(ctx context.Context, repo *git.Repository, url, token string, commit plumbing.Hash, branch, expected string) error {
	local := plumbing.ReferenceName("refs/driftback/" + branch)
	// go-git reads the lease from the local name's remote-tracking ref.
	tracking := plumbing.ReferenceName("refs/remotes/origin/" + local.String())
	lock := gitrepo.Lock(repo)
	lock.Lock()
	defer lock.Unlock()
	if err := repo.Storer.SetReference(plumbing.NewHashReference(local, commit)); err != nil {
		return err
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference(tracking, plumbing.NewHash(expected))); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	spec := gitconfig.RefSpec("+" + local.String() + ":refs/heads/" + branch)
	err := repo.PushContext(ctx, &git.PushOptions{
		RemoteURL: url, RefSpecs: []gitconfig.RefSpec{spec}, Auth: tokenAuth(token),
		ForceWithLease: &git.ForceWithLease{RefName: plumbing.ReferenceName("refs/heads/" + branch)},
	})
	switch {
	case errors.Is(err, git.NoErrAlreadyUpToDate):
		return nil
	case err != nil && strings.Contains(err.Error(), "non-fast-forward"):
		return fmt.Errorf("push %s: %w", branch, errBranchMoved)
	case err != nil:
		return fmt.Errorf("push %s: %w", spec, err)
	}
	return nil
}

// deleteBranch removes a remote branch.
func deleteBranch(ctx context.Context, repo *git.Repository, url, token, branch string) error {
	lock := gitrepo.Lock(repo)
	lock.Lock()
	defer lock.Unlock()
	return push(ctx, repo, url, token, gitconfig.RefSpec(":refs/heads/"+branch))
}

func push(ctx context.Context, repo *git.Repository, url, token string, spec gitconfig.RefSpec) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := repo.PushContext(ctx, &git.PushOptions{
		RemoteURL: url, RefSpecs: []gitconfig.RefSpec{spec}, Auth: tokenAuth(token), Force: true,
	})
	if errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("push %s: %w", spec, err)
	}
	return nil
}

// commitAuthor reads who made a commit, by committer e-mail.
func commitAuthor(repo *git.Repository, sha string) (string, error) {
	lock := gitrepo.Lock(repo)
	lock.Lock()
	defer lock.Unlock()
	c, err := repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return "", err
	}
	return c.Committer.Email, nil
}
