// Package gittest builds hostile git objects for tests.
package gittest

import (
	"fmt"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

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
	blob := s.NewEncodedObject()
	blob.SetType(plumbing.BlobObject)
	w, err := blob.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	h, err := s.SetEncodedObject(blob)
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
