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
	s := repo.Storer
	store := func(o interface {
		Encode(plumbing.EncodedObject) error
	}) (plumbing.Hash, error) {
		obj := s.NewEncodedObject()
		if err := o.Encode(obj); err != nil {
			return plumbing.ZeroHash, err
		}
		return s.SetEncodedObject(obj)
	}
	h, err := blobOf(repo, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	if err != nil {
		return plumbing.ZeroHash, err
	}
	mode := filemode.Regular
	for range depth {
		t := &object.Tree{}
		for _, c := range "ab" {
			t.Entries = append(t.Entries, object.TreeEntry{Name: strings.Repeat(string(c), nameLength), Mode: mode, Hash: h})
		}
		if h, err = store(t); err != nil {
			return plumbing.ZeroHash, err
		}
		mode = filemode.Dir
	}
	sig := object.Signature{Name: "dev", Email: "dev@example.com", When: time.Unix(1_760_000_000, 0)}
	c := &object.Commit{Author: sig, Committer: sig, Message: "long names", TreeHash: h}
	if !parent.IsZero() {
		c.ParentHashes = []plumbing.Hash{parent}
	}
	return store(c)
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

// Bomb commits, on parent (zero: a root commit), a tree three levels deep in
// which each level names the one below width times: a few kilobytes of
// objects that expand to width + width² + width³ paths.
func Bomb(repo *git.Repository, parent plumbing.Hash, width int) (plumbing.Hash, error) {
	s := repo.Storer
	store := func(o interface {
		Encode(plumbing.EncodedObject) error
	}) (plumbing.Hash, error) {
		obj := s.NewEncodedObject()
		if err := o.Encode(obj); err != nil {
			return plumbing.ZeroHash, err
		}
		return s.SetEncodedObject(obj)
	}
	h, err := blobOf(repo, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	if err != nil {
		return plumbing.ZeroHash, err
	}
	mode := filemode.Regular
	for range 3 {
		t := &object.Tree{}
		for i := range width {
			t.Entries = append(t.Entries, object.TreeEntry{Name: fmt.Sprintf("e%03d.yaml", i), Mode: mode, Hash: h})
		}
		if h, err = store(t); err != nil {
			return plumbing.ZeroHash, err
		}
		mode = filemode.Dir
	}
	sig := object.Signature{Name: "dev", Email: "dev@example.com", When: time.Unix(1_760_000_000, 0)}
	c := &object.Commit{Author: sig, Committer: sig, Message: "a small commit", TreeHash: h}
	if !parent.IsZero() {
		c.ParentHashes = []plumbing.Hash{parent}
	}
	return store(c)
}
