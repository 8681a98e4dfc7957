package render

import (
	"context"
	"crypto/sha1" //nolint:gosec // git blob ids are SHA-1 by definition
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/driftback/driftback/internal/gitrepo"
)

// Tree is a read-only snapshot of a repository's files: either a commit read
// straight from the git object store or a working-tree directory. Paths are
// slash-separated and relative to the repository root.
//
// Symlinks and submodules are never followed: they are recorded as skipped so that
// a kustomization that points at one gets an error naming it, and nothing outside
// the repository can be reached through them.
type Tree struct {
	// Rev names what the tree was read from (a commit SHA or a directory).
	Rev string

	files   map[string]treeFile
	skipped map[string]string // path → why it is not readable
	open    func(treeFile) ([]byte, error)

	dirs map[string]bool // every directory holding a file or skipped entry

	mu       sync.Mutex
	hashes   map[string]string // path → blob id, for trees that must compute it
	kusts    map[string]*kustomization
	closures map[string]*closure
}

func newTree(rev string) *Tree {
	return &Tree{
		Rev:      rev,
		files:    map[string]treeFile{},
		skipped:  map[string]string{},
		dirs:     map[string]bool{},
		hashes:   map[string]string{},
		kusts:    map[string]*kustomization{},
		closures: map[string]*closure{},
	}
}

// index records the directories above every entry once the tree is read.
func (t *Tree) index() {
	mark := func(p string) {
		for d := path.Dir(p); d != "." && !t.dirs[d]; d = path.Dir(d) {
			t.dirs[d] = true
		}
	}
	for p := range t.files {
		mark(p)
	}
	for p := range t.skipped {
		mark(p)
	}
}

// kustomization parses a kustomization file once per tree.
func (t *Tree) kustomization(file string) (*kustomization, error) {
	t.mu.Lock()
	k, ok := t.kusts[file]
	t.mu.Unlock()
	if ok {
		return k, nil
	}
	k, err := parseKustomization(t, file)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.kusts[file] = k
	t.mu.Unlock()
	return k, nil
}

// ClosureFiles are the files overlay's build reads, sorted.
func (t *Tree) ClosureFiles(overlay string) []string {
	return append([]string(nil), t.closure(overlay).files...)
}

// SameClosure says whether an overlay's build reads the same files with
// the same content in a and b, so that it renders the same in both (the
// render cache's key is made of them).
func SameClosure(a, b *Tree, overlay string) bool {
	fa, fb := a.ClosureFiles(overlay), b.ClosureFiles(overlay)
	if !slices.Equal(fa, fb) {
		return false
	}
	for _, f := range fa {
		ha, errA := a.Hash(f)
		hb, errB := b.Hash(f)
		if errA != nil || errB != nil || ha != hb {
			return false
		}
	}
	return true
}

// closure computes an overlay's dependency closure once per tree.
func (t *Tree) closure(overlay string) *closure {
	t.mu.Lock()
	c, ok := t.closures[overlay]
	t.mu.Unlock()
	if ok {
		return c
	}
	c = closureOf(t, overlay)
	t.mu.Lock()
	t.closures[overlay] = c
	t.mu.Unlock()
	return c
}

type treeFile struct {
	path string
	size int64
	hash string // git blob id; empty until computed for directory trees
}

// MaxTreeEntries bounds the files and directories a commit's tree may hold
// (each path counted once per place it appears). GitOps repositories hold
// thousands; a commit whose trees name each other can expand to millions.
const MaxTreeEntries = 250_000

// MaxTreePathBytes bounds the bytes of all a commit's paths together, and
// MaxTreePathLength one path: a few kilobytes of trees with long names that
// name each other expand to gigabytes of paths well under MaxTreeEntries.
// GitOps repositories hold a few megabytes of paths; no file system takes a
// path longer than 4,096 bytes.
const (
	MaxTreePathBytes  = 32 << 20
	MaxTreePathLength = 4096
)

// TooLargeError is a commit whose tree passes one of the bounds
// (MaxTreeEntries, MaxTreeDepth, MaxTreePathBytes, MaxTreePathLength): it is
// not compared.
type TooLargeError struct {
	Commit string
	// Entries, Depth, PathBytes or PathLength is the bound the tree passed.
	Entries, Depth, PathBytes, PathLength int
}

func (e *TooLargeError) Error() string {
	switch {
	case e.PathLength > 0:
		return fmt.Sprintf("commit %s is too large to compare: its tree holds a path longer than %d bytes", shortHash(e.Commit), e.PathLength)
	case e.PathBytes > 0:
		return fmt.Sprintf("commit %s is too large to compare: its tree's paths add up to more than %d MiB", shortHash(e.Commit), e.PathBytes>>20)
	}
	if e.Depth > 0 {
		return fmt.Sprintf("commit %s is too large to compare: its tree nests paths deeper than %d directories", shortHash(e.Commit), e.Depth)
	}
	return fmt.Sprintf("commit %s is too large to compare: its tree holds more than %d files and directories", shortHash(e.Commit), e.Entries)
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// GitTree reads the tree of rev (a branch, tag, SHA or any revision go-git
// resolves) from the repository's object store, without a checkout. A tree
// over MaxTreeEntries is a *TooLargeError.
func GitTree(repo *git.Repository, rev string) (*Tree, error) {
	return GitTreeContext(context.Background(), repo, rev)
}

// MaxTreeDepth bounds how deep a commit's paths may nest.
const MaxTreeDepth = 64

// GitTreeContext is GitTree, stopped when ctx ends: the repository's lock is
// held no longer than the job that asked. A path nested deeper than
// MaxTreeDepth is a *TooLargeError too.
func GitTreeContext(ctx context.Context, repo *git.Repository, rev string) (*Tree, error) {
	lock := gitrepo.Lock(repo)
	lock.Lock()
	defer lock.Unlock()
	h, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, fmt.Errorf("resolve %q: %w", rev, err)
	}
	commit, err := repo.CommitObject(*h)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", h, err)
	}
	root, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("commit %s: read tree: %w", h, err)
	}
	t := newTree(h.String())
	walker := object.NewTreeWalker(root, true, nil)
	defer walker.Close()
	entries, pathBytes := 0, 0
	for {
		name, entry, err := walker.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("commit %s: walk tree: %w", h, err)
		}
		// A few kilobytes of trees that name each other expand to millions
		// of paths: stop at the bound, before the memory and time go.
		if entries++; entries > MaxTreeEntries {
			return nil, &TooLargeError{Commit: h.String(), Entries: MaxTreeEntries}
		}
		if strings.Count(name, "/") >= MaxTreeDepth {
			return nil, &TooLargeError{Commit: h.String(), Depth: MaxTreeDepth}
		}
		if len(name) > MaxTreePathLength {
			return nil, &TooLargeError{Commit: h.String(), PathLength: MaxTreePathLength}
		}
		if pathBytes += len(name); pathBytes > MaxTreePathBytes {
			return nil, &TooLargeError{Commit: h.String(), PathBytes: MaxTreePathBytes}
		}
		if entries%1024 == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("commit %s: walk tree: %w", h, ctx.Err())
		}
		switch entry.Mode {
		case filemode.Regular, filemode.Executable, filemode.Deprecated:
			t.files[name] = treeFile{path: name, size: -1, hash: entry.Hash.String()}
		case filemode.Symlink:
			target := ""
			if blob, err := repo.BlobObject(entry.Hash); err == nil && blob.Size < 4096 {
				if r, err := blob.Reader(); err == nil {
					b, _ := io.ReadAll(r) // a short read only shortens the message
					r.Close()
					target = string(b)
				}
			}
			t.skipped[name] = symlinkReason(target)
		case filemode.Submodule:
			t.skipped[name] = "is a git submodule; submodules are not rendered"
		}
	}
	t.index()
	t.open = func(f treeFile) ([]byte, error) {
		lock.Lock()
		defer lock.Unlock()
		blob, err := repo.BlobObject(plumbing.NewHash(f.hash))
		if err != nil {
			return nil, err
		}
		r, err := blob.Reader()
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return io.ReadAll(r)
	}
	return t, nil
}

// DirTree reads a working-tree directory. The .git folder is left out; files are
// read only when a render needs them.
func DirTree(dir string) (*Tree, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	t := newTree(abs)
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(abs, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if d.Name() == ".git" && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p) // an unreadable link is still skipped
			t.skipped[rel] = symlinkReason(target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			t.files[rel] = treeFile{path: rel, size: info.Size()}
		default:
			t.skipped[rel] = "is not a regular file"
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	t.index()
	t.open = func(f treeFile) ([]byte, error) {
		return os.ReadFile(filepath.Join(abs, filepath.FromSlash(f.path)))
	}
	return t, nil
}

func symlinkReason(target string) string {
	if target == "" {
		return "is a symlink; symlinks are not followed"
	}
	return fmt.Sprintf("is a symlink to %q; symlinks are not followed", target)
}

// HasKustomization reports whether dir holds a kustomization file.
func (t *Tree) HasKustomization(dir string) bool {
	return KustomizationFile(t, dir) != ""
}

// With returns a copy of the tree in which the given files have the given
// content (added or replaced; nil removes the file), for rendering a planned
// change or a merge in memory.
func (t *Tree) With(files map[string][]byte) *Tree {
	c := newTree(t.Rev + "+edits")
	for p, f := range t.files {
		c.files[p] = f
	}
	for p, why := range t.skipped {
		c.skipped[p] = why
	}
	for p, b := range files {
		delete(c.skipped, p)
		if b == nil {
			delete(c.files, p)
			continue
		}
		c.files[p] = treeFile{path: p, size: int64(len(b)), hash: blobHash(b)}
	}
	c.index()
	open := t.open
	c.open = func(f treeFile) ([]byte, error) {
		if b, ok := files[f.path]; ok {
			return b, nil
		}
		return open(f)
	}
	return c
}

// HasDir reports whether p is a directory of the tree ("." is the root).
func (t *Tree) HasDir(p string) bool { return p == "." || t.isDir(p) }

// Has reports whether p is a regular file of the tree.
func (t *Tree) Has(p string) bool {
	_, ok := t.files[p]
	return ok
}

// isDir reports whether some entry of the tree lies under directory p.
func (t *Tree) isDir(p string) bool {
	return p == "." || t.dirs[p]
}

// Skipped returns why p (or the first skipped directory above it) cannot be
// read, or "" when it is not a skipped entry.
func (t *Tree) Skipped(p string) string {
	for q := p; q != "." && q != "/" && q != ""; q = path.Dir(q) {
		if why, ok := t.skipped[q]; ok {
			if q == p {
				return why
			}
			return fmt.Sprintf("lies under %s, which %s", q, why)
		}
	}
	return ""
}

// Files returns every regular file path, sorted.
func (t *Tree) Files() []string {
	out := make([]string, 0, len(t.files))
	for p := range t.files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// ReadFile returns the content of the file at p.
func (t *Tree) ReadFile(p string) ([]byte, error) {
	f, ok := t.files[p]
	if !ok {
		if why := t.Skipped(p); why != "" {
			return nil, fmt.Errorf("%s %s", p, why)
		}
		return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	b, err := t.open(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if f.hash == "" {
		t.mu.Lock()
		t.hashes[p] = blobHash(b)
		t.mu.Unlock()
	}
	return b, nil
}

// Size returns the size in bytes of the file at p, reading it if the tree does
// not record sizes.
func (t *Tree) Size(p string) (int64, error) {
	f, ok := t.files[p]
	if !ok {
		return 0, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	if f.size >= 0 {
		return f.size, nil
	}
	b, err := t.ReadFile(p)
	return int64(len(b)), err
}

// Hash returns the git blob id of the file at p: free for git trees, computed
// (once) from the content for directory trees.
func (t *Tree) Hash(p string) (string, error) {
	f, ok := t.files[p]
	if !ok {
		return "", fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	if f.hash != "" {
		return f.hash, nil
	}
	t.mu.Lock()
	h, ok := t.hashes[p]
	t.mu.Unlock()
	if ok {
		return h, nil
	}
	if _, err := t.ReadFile(p); err != nil {
		return "", err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hashes[p], nil
}

// blobHash is git's object id for a blob with content b.
func blobHash(b []byte) string {
	h := sha1.New() //nolint:gosec // git's object format
	h.Write([]byte("blob " + strconv.Itoa(len(b)) + "\x00"))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// Changed returns the paths whose content differs between a and b: added,
// deleted or modified files, and skipped entries that appeared or vanished.
func Changed(a, b *Tree) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for p := range a.files {
		if !b.Has(p) {
			add(p)
			continue
		}
		ha, err := a.Hash(p)
		if err != nil {
			return nil, err
		}
		hb, err := b.Hash(p)
		if err != nil {
			return nil, err
		}
		if ha != hb {
			add(p)
		}
	}
	for p := range b.files {
		if !a.Has(p) {
			add(p)
		}
	}
	for p, why := range a.skipped {
		if b.skipped[p] != why {
			add(p)
		}
	}
	for p, why := range b.skipped {
		if a.skipped[p] != why {
			add(p)
		}
	}
	sort.Strings(out)
	return out, nil
}
