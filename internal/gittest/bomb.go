// Package gittest builds hostile git objects for tests.
package gittest

import (
	"fmt"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// LongNameBomb commits, on parent, a tree depth levels deep in which each
// level names the one below twice, under names nameLength bytes long: a few
// kilobytes of objects whose 2^depth paths are each about depth × nameLength
// bytes.
func LongNameBomb(repo *git.Repository, parent plumbing.Hash, depth, nameLength int) (plumbing.Hash, error) {
	return nested(repo, parent, depth, "long names", func() []string {
		return []string{strings.Repeat("a", nameLength), strings.Repeat("b", nameLength)}
	})
}

// Bomb commits, on parent (zero: a root commit), a tree three levels deep in
// which each level names the one below width times: a few kilobytes of
// objects that expand to width + width² + width³ paths.
func Bomb(repo *git.Repository, parent plumbing.Hash, width int) (plumbing.Hash, error) {
	return nested(repo, parent, 3, "a small commit", func() []string {
		names := make([]string, width)
		for i := range names {
			names[i] = fmt.Sprintf("e%03d.yaml", i)
		}
		return names
	})
}

// nested commits, on parent, a tree depth levels deep in which each level
// names the one below (the deepest, one blob) under each of names().
func nested(repo *git.Repository, parent plumbing.Hash, depth int, message string, names func() []string) (plumbing.Hash, error) {
	h, err := blobOf(repo, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	if err != nil {
		return plumbing.ZeroHash, err
	}
	mode := filemode.Regular
	for range depth {
		t := &object.Tree{}
		for _, name := range names() {
			t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: mode, Hash: h})
		}
		if h, err = store(repo, t); err != nil {
			return plumbing.ZeroHash, err
		}
		mode = filemode.Dir
	}
	sig := object.Signature{Name: "dev", Email: "dev@example.com", When: time.Unix(1_760_000_000, 0)}
	c := &object.Commit{Author: sig, Committer: sig, Message: message, TreeHash: h}
	if !parent.IsZero() {
		c.ParentHashes = []plumbing.Hash{parent}
	}
	return store(repo, c)
}

// store encodes a tree or a commit into the repository.
func store(repo *git.Repository, o interface {
	Encode(plumbing.EncodedObject) error
}) (plumbing.Hash, error) {
	obj := repo.Storer.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return repo.Storer.SetEncodedObject(obj)
}

// blobOf stores content as a blob.
func blobOf(repo *git.Repository, content string) (plumbing.Hash, error) {
	blob := repo.Storer.NewEncodedObject()
	blob.SetType(plumbing.BlobObject)
	w, err := blob.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write([]byte(content)); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return repo.Storer.SetEncodedObject(blob)
}
