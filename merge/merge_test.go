package merge_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/internal/testfs"
	"github.com/driftback/driftback/merge"
)

// repo builds commits in memory: each is a tree of files over parents.
type repo struct {
	t *testing.T
	r *git.Repository
	n int64
}

func (x *repo) commit(files map[string]string, parents ...plumbing.Hash) plumbing.Hash {
	x.t.Helper()
	var entries []object.TreeEntry
	for name, content := range files {
		blob := x.r.Storer.NewEncodedObject()
		blob.SetType(plumbing.BlobObject)
		w, _ := blob.Writer()
		_, _ = w.Write([]byte(content))
		_ = w.Close()
		h, err := x.r.Storer.SetEncodedObject(blob)
		if err != nil {
			x.t.Fatal(err)
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: 0o100644, Hash: h})
	}
	tree := &object.Tree{Entries: entries}
	sortEntries(tree)
	to := x.r.Storer.NewEncodedObject()
	if err := tree.Encode(to); err != nil {
		x.t.Fatal(err)
	}
	th, err := x.r.Storer.SetEncodedObject(to)
	if err != nil {
		x.t.Fatal(err)
	}
	x.n++
	sig := object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1_760_000_000+x.n, 0)}
	c := &object.Commit{Author: sig, Committer: sig, Message: "c", TreeHash: th, ParentHashes: parents}
	co := x.r.Storer.NewEncodedObject()
	if err := c.Encode(co); err != nil {
		x.t.Fatal(err)
	}
	h, err := x.r.Storer.SetEncodedObject(co)
	if err != nil {
		x.t.Fatal(err)
	}
	return h
}

func sortEntries(t *object.Tree) {
	for i := range t.Entries {
		for j := i + 1; j < len(t.Entries); j++ {
			if t.Entries[j].Name < t.Entries[i].Name {
				t.Entries[i], t.Entries[j] = t.Entries[j], t.Entries[i]
			}
		}
	}
}

// TestChooseComparesWhatMergingDoes: a head that holds its base is what
// merging gives; GitHub's test merge is read when its parents are the base
// and this head; a stale test merge, a conflict, or none yet compare the
// head with the merge base, each saying why.
func TestChooseComparesWhatMergingDoes(t *testing.T) {
	r, err := git.Init(memory.NewStorage(), nil)
	if err != nil {
		t.Fatal(err)
	}
	x := &repo{t: t, r: r}
	root := x.commit(map[string]string{"a": "1"})
	head := x.commit(map[string]string{"a": "1", "b": "2"}, root)
	tip := x.commit(map[string]string{"a": "1", "pvc": "x"}, root)
	testMerge := x.commit(map[string]string{"a": "1", "b": "2", "pvc": "x"}, tip, head)
	older := x.commit(map[string]string{"a": "1", "b": "1"}, root)
	staleMerge := x.commit(map[string]string{"a": "1", "b": "1", "pvc": "x"}, tip, older)

	ahead, err := merge.Choose(r, merge.PullRequest{Base: root.String(), BaseRef: "main", Head: head.String()})
	if err != nil || ahead.How != drift.HowMerge || ahead.Base != root.String() || ahead.Head != head.String() || ahead.Note != "" {
		t.Errorf("a head holding its base: %+v %v", ahead, err)
	}
	merged, err := merge.Choose(r, merge.PullRequest{Base: tip.String(), BaseRef: "main", Head: head.String(), Merge: testMerge.String()})
	if err != nil || merged.How != drift.HowMerge || merged.Base != tip.String() || merged.Head != testMerge.String() || merged.PullHead != head.String() {
		t.Errorf("GitHub's test merge: %+v %v", merged, err)
	}
	for _, c := range []struct {
		name string
		pr   merge.PullRequest
		says string
	}{
		{"a stale test merge", merge.PullRequest{Base: tip.String(), BaseRef: "main", Head: head.String(), Merge: staleMerge.String()}, "is of another head"},
		{"a conflict", merge.PullRequest{Base: tip.String(), BaseRef: "main", Head: head.String(), Conflicts: true}, "conflicts with main"},
		{"no test merge yet", merge.PullRequest{Base: tip.String(), BaseRef: "main", Head: head.String()}, "had not made this pull request's test merge yet"},
		{"a test merge not fetched", merge.PullRequest{Base: tip.String(), BaseRef: "main", Head: head.String(), Merge: strings.Repeat("a", 40)}, "could not be read"},
	} {
		got, err := merge.Choose(r, c.pr)
		if err != nil || got.How != drift.HowMergeBase || got.Base != root.String() || got.Head != head.String() || !strings.Contains(got.Note, c.says) {
			t.Errorf("%s: %+v %v, want the merge base saying %q", c.name, got, err, c.says)
		}
	}
}

// TestTreesMergeFileByFile: each side's changes are kept (a file one side
// removes is removed); a file both change alike is kept; one both change
// differently is a conflict that names it.
func TestTreesMergeFileByFile(t *testing.T) {
	base := testfs.Tree(t, map[string]string{"a.yaml": "a: 1\n", "b.yaml": "b: 1\n", "c.yaml": "c: 1\n", "gone.yaml": "x: 1\n"})
	ours := testfs.Tree(t, map[string]string{"a.yaml": "a: 2\n", "b.yaml": "b: 1\n", "c.yaml": "c: 3\n", "gone.yaml": "x: 1\n"})
	theirs := testfs.Tree(t, map[string]string{"a.yaml": "a: 1\n", "b.yaml": "b: 9\n", "c.yaml": "c: 3\n", "new.yaml": "n: 1\n"})
	m, err := merge.Trees(base, ours, theirs)
	if err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"a.yaml": "a: 2\n", "b.yaml": "b: 9\n", "c.yaml": "c: 3\n", "new.yaml": "n: 1\n"} {
		if b, err := m.ReadFile(f); err != nil || string(b) != want {
			t.Errorf("%s: %q %v, want %q", f, b, err, want)
		}
	}
	if m.Has("gone.yaml") {
		t.Error("a file theirs removed is still there")
	}
	clash := testfs.Tree(t, map[string]string{"a.yaml": "a: 7\n", "b.yaml": "b: 1\n", "c.yaml": "c: 1\n", "gone.yaml": "x: 1\n"})
	_, err = merge.Trees(base, ours, clash)
	var ce *merge.ConflictError
	if err == nil || !strings.Contains(err.Error(), "a.yaml") {
		t.Errorf("a file both change differently: %v", err)
	} else if !errors.As(err, &ce) || len(ce.Files) != 1 {
		t.Errorf("the conflict: %v", err)
	}
}
