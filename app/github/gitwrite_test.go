package github

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// TestCommitFilesWritesValidTrees writes a commit the way the drift loop does,
// with a file beside a folder whose name it prefixes (git orders "prod/"
// after "prod-extra.yaml"), a new nested folder and a changed file, and has
// git itself check the result with fsck --strict.
func TestCommitFilesWritesValidTrees(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required: ", err)
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	repo, err := git.PlainInit(work, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, _ := repo.Worktree()
	write := func(name, content string) {
		t.Helper()
		f, err := wt.Filesystem.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(content))
		f.Close()
		if _, err := wt.Add(name); err != nil {
			t.Fatal(err)
		}
	}
	write("deploy/prod/kustomization.yaml", "resources: []\n")
	write("deploy/prod-extra.yaml", "x: 1\n")
	write("README.md", "hi\n")
	who := object.Signature{Name: "dev", Email: "dev@example.com", When: time.Unix(1_800_000_000, 0)}
	parent, err := wt.Commit("start", &git.CommitOptions{Author: &who})
	if err != nil {
		t.Fatal(err)
	}
	h, err := commitFiles(repo, parent.String(), map[string][]byte{
		"deploy/prod/kustomization.yaml":      []byte("resources:\n- patch.yaml\n"),
		"deploy/prod/patch.yaml":              []byte("kind: Deployment\n"),
		"deploy/prod/new/deeper/adopted.yaml": []byte("kind: ConfigMap\n"),
		"deploy/prod-extra.yaml":              []byte("x: 2\n"),
	}, "drift", who)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference("refs/heads/drift", h)); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", work, "fsck", "--strict", "--no-dangling").CombinedOutput()
	if err != nil {
		t.Fatalf("git fsck: %v\n%s", err, out)
	}
	show, err := exec.Command("git", "-C", work, "show", "--stat", "--format=%P", "drift").CombinedOutput()
	if err != nil {
		t.Fatalf("git show: %v\n%s", err, show)
	}
	for _, want := range []string{parent.String(), "deploy/prod-extra.yaml", "deploy/prod/new/deeper/adopted.yaml", "deploy/prod/patch.yaml", "4 files changed"} {
		if !strings.Contains(string(show), want) {
			t.Errorf("git show lacks %q:\n%s", want, show)
		}
	}
}
