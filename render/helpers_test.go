package render_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// symlink in a test repository's file map makes a symlink to the given target.
type symlink string

// writeFiles writes files (content string or symlink) under dir.
func writeFiles(t testing.TB, dir string, files map[string]any) {
	t.Helper()
	for name, v := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch c := v.(type) {
		case string:
			if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		case symlink:
			if err := os.Symlink(string(c), p); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("writeFiles: %s: unsupported %T", name, v)
		}
	}
}

// gitRepo is a real repository on disk whose commits tests render from.
type gitRepo struct {
	t    testing.TB
	dir  string
	repo *git.Repository
}

func newGitRepo(t testing.TB) *gitRepo {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	return &gitRepo{t: t, dir: dir, repo: repo}
}

// commit writes files (nil content deletes a file), commits everything and
// returns the commit SHA.
func (g *gitRepo) commit(msg string, files map[string]any) string {
	g.t.Helper()
	for name, v := range files {
		if v == nil {
			if err := os.RemoveAll(filepath.Join(g.dir, filepath.FromSlash(name))); err != nil {
				g.t.Fatal(err)
			}
			delete(files, name)
		}
	}
	writeFiles(g.t, g.dir, files)
	wt, err := g.repo.Worktree()
	if err != nil {
		g.t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		g.t.Fatal(err)
	}
	h, err := wt.Commit(msg, &git.CommitOptions{
		All:    true,
		Author: &object.Signature{Name: "test", Email: "test@example.com", When: time.Unix(1_700_000_000, 0)},
	})
	if err != nil {
		g.t.Fatal(err)
	}
	return h.String()
}

// tag points a lightweight tag at a commit.
func (g *gitRepo) tag(name, sha string) {
	g.t.Helper()
	if _, err := g.repo.CreateTag(name, plumbing.NewHash(sha), nil); err != nil {
		g.t.Fatal(err)
	}
}

// copyDir returns every file under dir as a map for commit.
func copyDir(t *testing.T, dir string) map[string]any {
	t.Helper()
	out := map[string]any{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func goldenName(overlay string) string {
	return strings.ReplaceAll(overlay, "/", "-") + ".yaml"
}
