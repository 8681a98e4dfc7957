// Package merge chooses the commits a comparison reads, so that it tells
// what merging a branch does rather than what two branch tips differ by:
// GitHub's test merge checked against its parents, the merge base when
// there is no merge to read, and, for the command line, a merge of two
// trees made in memory.
package merge

import (
	"fmt"
	"slices"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/internal/gitrepo"
	"github.com/driftback/driftback/render"
)

// Base returns the best common ancestor of two commits, as `git
// merge-base` does.
func Base(repo *git.Repository, a, b string) (string, error) {
	lock := gitrepo.Lock(repo)
	lock.Lock()
	defer lock.Unlock()
	ca, err := repo.CommitObject(plumbing.NewHash(a))
	if err != nil {
		return "", fmt.Errorf("commit %s: %w", short(a), err)
	}
	cb, err := repo.CommitObject(plumbing.NewHash(b))
	if err != nil {
		return "", fmt.Errorf("commit %s: %w", short(b), err)
	}
	bases, err := ca.MergeBase(cb)
	if err != nil {
		return "", fmt.Errorf("the merge base of %s and %s: %w", short(a), short(b), err)
	}
	if len(bases) == 0 {
		return "", fmt.Errorf("%s and %s have no commit in common", short(a), short(b))
	}
	return bases[0].Hash.String(), nil
}

// PullRequest is a pull request as GitHub reports it.
type PullRequest struct {
	// Base is the tip of the branch it merges into (base.sha), BaseRef the
	// branch; Head is its head.
	Base, BaseRef, Head string
	// Merge is GitHub's test merge (merge_commit_sha, fetched as
	// refs/pull/N/merge); "" when there is none to read.
	Merge string
	// Conflicts says GitHub found the pull request cannot merge
	// (mergeable: false).
	Conflicts bool
}

// Choose returns the commits a pull request's review compares: the base
// branch's tip and GitHub's test merge (what merging does), its head alone
// when it already holds the base's tip, and otherwise its head against the
// merge base, with a note saying why.
func Choose(repo *git.Repository, pr PullRequest) (drift.Compared, error) {
	c := drift.Compared{How: drift.HowMerge, Base: pr.Base, Head: pr.Head, BaseRef: pr.BaseRef}
	mb, err := Base(repo, pr.Base, pr.Head)
	if err != nil {
		return c, err
	}
	if mb == pr.Base {
		// Merging it is a fast-forward: the head is what merging gives.
		return c, nil
	}
	stale := ""
	if pr.Merge != "" {
		parents, err := Parents(repo, pr.Merge)
		switch {
		case err != nil:
			stale = fmt.Sprintf("GitHub's test merge %s could not be read (%v)", short(pr.Merge), err)
		case len(parents) == 2 && parents[1] == pr.Head:
			c.Base, c.Head, c.PullHead = parents[0], pr.Merge, pr.Head
			return c, nil
		default:
			stale = fmt.Sprintf("GitHub's test merge %s is of another head", short(pr.Merge))
		}
	}
	branch := pr.BaseRef
	if branch == "" {
		branch = "its base"
	}
	c.How, c.Base = drift.HowMergeBase, mb
	switch {
	case pr.Conflicts:
		c.Note = fmt.Sprintf("This pull request conflicts with %s: its head is compared with where it left %s (the merge base %s), which shows what the branch changes; what merging does is shown once the conflict is resolved.", branch, branch, short(mb))
	case stale != "":
		c.Note = fmt.Sprintf("%s: this pull request's head is compared with where it left %s (the merge base %s), not with %s's newer commits.", stale, branch, short(mb), branch)
	default:
		c.Note = fmt.Sprintf("GitHub had not made this pull request's test merge yet: its head is compared with where it left %s (the merge base %s), not with %s's newer commits.", branch, short(mb), branch)
	}
	return c, nil
}

// Parents are a commit's parents, first parent first.
func Parents(repo *git.Repository, sha string) ([]string, error) {
	lock := gitrepo.Lock(repo)
	lock.Lock()
	defer lock.Unlock()
	c, err := repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range c.ParentHashes {
		out = append(out, p.String())
	}
	return out, nil
}

// ConflictError names the files both sides changed differently.
type ConflictError struct{ Files []string }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("both sides change %s differently: merge or rebase, or compare with the merge base (without --merged)", strings.Join(e.Files, ", "))
}

// Trees merges ours and theirs, whose merge base is base, file by file: a
// file takes the side that changed it; a file both sides changed alike is
// kept; a file both changed differently is a conflict (*ConflictError), as
// a line-level merge is git's to make.
func Trees(base, ours, theirs *render.Tree) (*render.Tree, error) {
	changedOurs, err := render.Changed(base, ours)
	if err != nil {
		return nil, err
	}
	changedTheirs, err := render.Changed(base, theirs)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	var conflicts []string
	for _, p := range changedTheirs {
		content, err := read(theirs, p)
		if err != nil {
			return nil, err
		}
		if slices.Contains(changedOurs, p) {
			mine, err := read(ours, p)
			if err != nil {
				return nil, err
			}
			if (mine == nil) != (content == nil) || string(mine) != string(content) {
				conflicts = append(conflicts, p)
			}
			continue
		}
		files[p] = content // nil: theirs removed it
	}
	if len(conflicts) > 0 {
		slices.Sort(conflicts)
		return nil, &ConflictError{Files: conflicts}
	}
	out := ours.With(files)
	out.Rev = ours.Rev + "+" + theirs.Rev
	return out, nil
}

// read returns a file's content, nil when the tree has no such file.
func read(t *render.Tree, p string) ([]byte, error) {
	if !t.Has(p) {
		return nil, nil
	}
	b, err := t.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// short is a commit's abbreviated name.
func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
