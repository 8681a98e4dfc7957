// Package rollback says what restoring earlier state in Git does not
// restore: the data that went with a deleted volume, the custom resources
// deleted with their CRD, the objects deleted with their namespace, and what
// the Jobs that ran since an image went live did. It reads Git history from
// the repository cache (no checkout), bounded in commits and time, and the
// live cluster; it writes nothing.
package rollback

import (
	"bytes"
	"errors"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"go.yaml.in/yaml/v3"
)

// Limits bound a walk through history: a deep history costs a bounded time.
type Limits struct {
	// Commits is how many commits are read at most (zero: 300).
	Commits int
	// Time is how long a walk may take (zero: two seconds).
	Time time.Duration
	// Blob is the largest file read (zero: 1 MiB); larger ones are skipped.
	Blob int64
}

// DefaultLimits are the bounds a pull request's analysis uses.
func DefaultLimits() Limits { return Limits{Commits: 300, Time: 2 * time.Second, Blob: 1 << 20} }

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.Commits <= 0 {
		l.Commits = d.Commits
	}
	if l.Time <= 0 {
		l.Time = d.Time
	}
	if l.Blob <= 0 {
		l.Blob = d.Blob
	}
	return l
}

// Commit is a commit that history names.
type Commit struct {
	SHA     string    `json:"sha"`
	Subject string    `json:"subject"`
	When    time.Time `json:"when"`
}

// History reads a repository's first-parent history back from a commit.
type History struct {
	repo *git.Repository
	from plumbing.Hash
	lim  Limits
	// Truncated says a walk stopped at a limit before the root: "not
	// found" then means "not found in the commits read".
	Truncated bool
}

// NewHistory reads history back from the commit from (a pull request's
// base).
func NewHistory(repo *git.Repository, from string, lim Limits) *History {
	return &History{repo: repo, from: plumbing.NewHash(from), lim: lim.withDefaults()}
}

// walk visits commits from the start back along first parents, each with
// its first parent (nil at the root), until visit says stop or a limit is
// reached.
func (h *History) walk(visit func(c, parent *object.Commit) (bool, error)) error {
	deadline := time.Now().Add(h.lim.Time)
	c, err := h.repo.CommitObject(h.from)
	if err != nil {
		return err
	}
	for n := 0; ; n++ {
		if n >= h.lim.Commits || time.Now().After(deadline) {
			h.Truncated = true
			return nil
		}
		var parent *object.Commit
		if c.NumParents() > 0 {
			if parent, err = c.Parent(0); err != nil {
				if errors.Is(err, plumbing.ErrObjectNotFound) {
					h.Truncated = true // a shallow clone ends here
					return nil
				}
				return err
			}
		}
		stop, err := visit(c, parent)
		if err != nil || stop || parent == nil {
			return err
		}
		c = parent
	}
}

// changedFiles are the files a commit changed against its parent: the
// parent's blob and the commit's (nil where absent).
func changedFiles(c, parent *object.Commit) ([][2]*object.File, error) {
	tree, err := c.Tree()
	if err != nil {
		return nil, err
	}
	var ptree *object.Tree
	if parent != nil {
		if ptree, err = parent.Tree(); err != nil {
			return nil, err
		}
	}
	changes, err := object.DiffTree(ptree, tree)
	if err != nil {
		return nil, err
	}
	var out [][2]*object.File
	for _, ch := range changes {
		from, to, err := ch.Files()
		if err != nil {
			return nil, err
		}
		// Named by their path in the repository, not their base name.
		if from != nil {
			from.Name = ch.From.Name
		}
		if to != nil {
			to.Name = ch.To.Name
		}
		out = append(out, [2]*object.File{from, to})
	}
	return out, nil
}

func (h *History) read(f *object.File) []byte {
	if f == nil || f.Size > h.lim.Blob || !isYAML(f.Name) {
		return nil
	}
	r, err := f.Reader()
	if err != nil {
		return nil
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, h.lim.Blob))
	if err != nil {
		return nil
	}
	return b
}

func isYAML(name string) bool {
	return strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")
}

// Removed finds the latest commit that removed a document of kind named
// name from the repository: a file the commit changed held it before and
// none of the files it changed holds it after (a move between files the
// commit changed is not a removal).
func (h *History) Removed(kind, name string) (*Commit, error) {
	var found *Commit
	err := h.walk(func(c, parent *object.Commit) (bool, error) {
		if parent == nil {
			return true, nil
		}
		files, err := changedFiles(c, parent)
		if err != nil {
			return false, err
		}
		had, has := false, false
		for _, f := range files {
			had = had || holds(h.read(f[0]), kind, name)
			has = has || holds(h.read(f[1]), kind, name)
		}
		if !had && !has {
			// Dropped from a kustomization's resources, its file kept.
			had = h.dropped(parent, files, kind, name)
		}
		if had && !has {
			found = commitOf(c)
			return true, nil
		}
		return false, nil
	})
	return found, err
}

// dropped says whether a change to a kustomization file dropped, from its
// resources, a file that held a document of kind named name at parent.
func (h *History) dropped(parent *object.Commit, files [][2]*object.File, kind, name string) bool {
	for _, f := range files {
		if f[0] == nil || f[1] == nil || !isKustomization(f[0].Name) {
			continue
		}
		before, after := resources(h.read(f[0])), resources(h.read(f[1]))
		for _, r := range before {
			if slices.Contains(after, r) {
				continue
			}
			file, err := parent.File(path.Join(path.Dir(f[0].Name), r))
			if err == nil && holds(h.read(file), kind, name) {
				return true
			}
		}
	}
	return false
}

func isKustomization(name string) bool {
	switch path.Base(name) {
	case "kustomization.yaml", "kustomization.yml", "Kustomization":
		return true
	}
	return false
}

// resources are a kustomization's resources entries, "" when it does not
// parse.
func resources(b []byte) []string {
	var k struct {
		Resources []string `yaml:"resources"`
	}
	if yaml.Unmarshal(b, &k) != nil {
		return nil
	}
	return k.Resources
}

// Seen finds the latest commit before the start whose changes added text
// (an image reference, say) to a YAML file: the value existed in Git then.
func (h *History) Seen(text string) (*Commit, error) {
	var found *Commit
	needle := []byte(text)
	err := h.walk(func(c, parent *object.Commit) (bool, error) {
		files, err := changedFiles(c, parent)
		if err != nil {
			return false, err
		}
		for _, f := range files {
			if bytes.Contains(h.read(f[1]), needle) && !bytes.Contains(h.read(f[0]), needle) {
				found = commitOf(c)
				return true, nil
			}
		}
		return false, nil
	})
	return found, err
}

func commitOf(c *object.Commit) *Commit {
	subject, _, _ := strings.Cut(strings.TrimSpace(c.Message), "\n")
	return &Commit{SHA: c.Hash.String(), Subject: subject, When: c.Committer.When.UTC()}
}

// holds reports whether a YAML stream has a document of kind named name.
func holds(b []byte, kind, name string) bool {
	if len(b) == 0 || !bytes.Contains(b, []byte(name)) {
		return false
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for range 1000 {
		var doc struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			return false // not a manifest this analysis can read
		}
		if doc.Kind == kind && doc.Metadata.Name == name {
			return true
		}
	}
	return false
}

var revertMessage = regexp.MustCompile(`(?m)^This reverts commit ([0-9a-f]{7,40})`)

// Reverts lists the commits of base..head that are reverts, by their
// message as `git revert` writes it ("Revert "…"", "This reverts commit
// …"), at most lim.Commits of them read.
func Reverts(repo *git.Repository, base, head string, lim Limits) ([]Commit, error) {
	lim = lim.withDefaults()
	c, err := repo.CommitObject(plumbing.NewHash(head))
	if err != nil {
		return nil, err
	}
	baseHash := plumbing.NewHash(base)
	var out []Commit
	for n := 0; n < lim.Commits && c.Hash != baseHash; n++ {
		if strings.HasPrefix(c.Message, `Revert "`) || revertMessage.MatchString(c.Message) {
			out = append(out, *commitOf(c))
		}
		if c.NumParents() == 0 {
			break
		}
		if c, err = c.Parent(0); err != nil {
			if errors.Is(err, plumbing.ErrObjectNotFound) {
				break
			}
			return nil, err
		}
	}
	return out, nil
}
