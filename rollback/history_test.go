package rollback

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// repoWith commits each step in order and returns the repository and the
// commits.
func repoWith(t *testing.T, steps []map[string]string, messages []string) (*git.Repository, []string) {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	var shas []string
	for i, files := range steps {
		for name, content := range files {
			p := filepath.Join(dir, name)
			if content == "" {
				_ = os.Remove(p) // absent is what the step wants
				continue
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
			t.Fatal(err)
		}
		h, err := wt.Commit(messages[i], &git.CommitOptions{All: true, AllowEmptyCommits: true,
			Author: &object.Signature{Name: "dev", Email: "dev@example.com", When: time.Unix(1_760_000_000+int64(i)*60, 0)}})
		if err != nil {
			t.Fatal(err)
		}
		shas = append(shas, h.String())
	}
	return repo, shas
}

const claims = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: data}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n"

func TestHistoryFindsTheRemovalAndTheEarlierImage(t *testing.T) {
	repo, shas := repoWith(t, []map[string]string{
		{"app/claims.yaml": claims, "app/web.yaml": "image: web:1.0\n"},
		{"app/web.yaml": "image: web:2.0\n"},
		// The claim moves to another file changed in the same commit: not a removal.
		{"app/claims.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: data}\n", "app/moved.yaml": "kind: PersistentVolumeClaim\nmetadata: {name: data}\n"},
		{"app/moved.yaml": ""},
		{"README.md": "unrelated\n"},
	}, []string{"first", "upgrade", "move", "drop the claim", "docs"})
	h := NewHistory(repo, shas[4], Limits{})
	c, err := h.Removed("PersistentVolumeClaim", "data")
	if err != nil || c == nil || c.SHA != shas[3] || c.Subject != "drop the claim" {
		t.Fatalf("removal: %+v, %v; want %s", c, err, shas[3])
	}
	if c, err := h.Removed("ConfigMap", "data"); err != nil || c != nil {
		t.Errorf("a ConfigMap still there is not removed: %+v, %v", c, err)
	}
	if c, err := h.Seen("web:1.0"); err != nil || c == nil || c.SHA != shas[0] {
		t.Errorf("web:1.0 was set by the first commit: %+v, %v", c, err)
	}
	if c, err := h.Seen("web:3.0"); err != nil || c != nil {
		t.Errorf("an image Git never had is no rollback: %+v, %v", c, err)
	}

	// A bounded walk stops and says so.
	short := NewHistory(repo, shas[4], Limits{Commits: 1})
	if c, err := short.Removed("PersistentVolumeClaim", "data"); err != nil || c != nil || !short.Truncated {
		t.Errorf("one commit read: %+v, %v, truncated %v", c, err, short.Truncated)
	}
}

func TestRevertsAreFoundByTheirMessage(t *testing.T) {
	repo, shas := repoWith(t, []map[string]string{{"a.yaml": "a: 1\n"}, {"a.yaml": "a: 2\n"}, {"a.yaml": "a: 1\n"}, {"b.yaml": "b: 1\n"}},
		[]string{"base", "change a", "Revert \"change a\"\n\nThis reverts commit 0123456789abcdef.\n", "add b"})
	got, err := Reverts(repo, shas[1], shas[3], Limits{})
	if err != nil || len(got) != 1 || got[0].Subject != `Revert "change a"` {
		t.Errorf("reverts: %+v, %v", got, err)
	}
	if got, _ := Reverts(repo, shas[2], shas[3], Limits{}); len(got) != 0 {
		t.Errorf("the revert is before this base: %+v", got)
	}
}
