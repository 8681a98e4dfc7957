package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/driftback/driftback/internal/githubfake"
)

var built struct {
	once sync.Once
	bin  string
	err  error
}

// driftbackBinary builds driftback once for the tests that run it as a
// program, as `go build` in a git checkout does (the toolchain records the
// version and commit), with the test binary's race setting.
func driftbackBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "driftback-bin")
		if err != nil {
			built.err = err
			return
		}
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
		built.bin = filepath.Join(dir, "driftback")
		args := []string{"build", "-buildvcs=true", "-o", built.bin}
		if raceEnabled {
			// The same flags as the test binary's: its packages are
			// compiled already, and only the link is left.
			args = append(args, "-race")
		}
		build := exec.Command("go", append(args, "./cmd/driftback")...)
		build.Dir = filepath.Join("..", "..")
		// The machine's own GOFLAGS (which may say -buildvcs=false) must
		// not decide what the tests see.
		build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true")
		if out, err := build.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// cleanups run after every test of the package.
var cleanups []func()

// TestActionEntryPoint runs the GitHub Action's entry point
// (hack/action/entrypoint.sh, what action.yml runs) as a workflow would, in
// a checkout of a pull request, against the GitHub fake: the comment and the
// check run are created, split when the report is long, edited in place
// when the job runs again, and the parts a shorter report no longer needs
// are deleted.
func TestActionEntryPoint(t *testing.T) {
	bin := driftbackBinary(t)
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	writeConfigMaps(t, filepath.Join(repo, "apps", "settings"), 300, "old")
	git("add", "-A")
	git("commit", "-q", "-m", "settings")
	base := git("rev-parse", "HEAD")
	writeConfigMaps(t, filepath.Join(repo, "apps", "settings"), 300, "new")
	git("commit", "-q", "-a", "-m", "new settings")
	head := git("rev-parse", "HEAD")

	pull := githubfake.Pull{Number: 12, User: "dev", HeadSHA: head, BaseSHA: base, BaseRef: "main", HeadRef: "settings", HeadRepo: "acme/gitops"}
	run := newActionsRun(t, pull)
	action := func() (string, int) {
		t.Helper()
		root, err := filepath.Abs(filepath.Join("..", ".."))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", filepath.Join(root, "hack", "action", "entrypoint.sh"))
		// What action.yml gives the step, and what a runner sets.
		cmd.Env = append(os.Environ(), "DRIFTBACK_BIN="+bin, "GITHUB_WORKSPACE="+repo, "RUNNER_TEMP="+t.TempDir(),
			"INPUT_FAIL_ON=crd-removal, pvc-removal", "INPUT_ACK_LABEL=driftback/allow-danger", "INPUT_PATHS=", "INPUT_KUBECONFIG=", "INPUT_ARGS=")
		out, err := cmd.CombinedOutput()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), run.token) {
			t.Fatal("the token was printed")
		}
		return string(out), code
	}

	out, code := action()
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	first := run.gh.Comments("acme/gitops", 12)
	if len(first) < 2 {
		t.Fatalf("%d comment parts for 300 changed objects, want several:\n%s", len(first), out)
	}
	for i, c := range first {
		if c.User != githubfake.ActionsLogin || len(c.Body) > githubfake.MaxCommentBody ||
			!strings.HasPrefix(c.Body, fmt.Sprintf("<!-- driftback:comment part=%d of=%d -->", i+1, len(first))) {
			t.Errorf("part %d: by %s, %d characters, starting %q", i+1, c.User, len(c.Body), firstLine(c.Body))
		}
	}
	runs := run.gh.CheckRuns("acme/gitops", head)
	if len(runs) != 1 || runs[0].Name != "driftback" || runs[0].Conclusion != "neutral" {
		t.Fatalf("check runs %+v; want one neutral driftback run (Git only)", runs)
	}

	// The job runs again on the same commit: everything is edited in place.
	if out, code = action(); code != 0 {
		t.Fatalf("second run: exit %d:\n%s", code, out)
	}
	again := run.gh.Comments("acme/gitops", 12)
	if len(again) != len(first) || again[0].ID != first[0].ID {
		t.Errorf("second run: %d parts (first id %d); want the same %d parts edited (first id %d)", len(again), again[0].ID, len(first), first[0].ID)
	}
	if runs = run.gh.CheckRuns("acme/gitops", head); len(runs) != 1 {
		t.Errorf("second run: %d check runs on the head, want the one updated", len(runs))
	}

	// A push that changes one object: a short report, one part left.
	writeConfigMaps(t, filepath.Join(repo, "apps", "settings"), 300, "old")
	writeConfigMaps(t, filepath.Join(repo, "apps", "settings", "one"), 1, "new")
	git("add", "-A")
	git("commit", "-q", "-m", "one setting")
	pull.HeadSHA = git("rev-parse", "HEAD")
	run.gh.SetPull("acme/gitops", pull)
	if out, code = action(); code != 0 {
		t.Fatalf("third run: exit %d:\n%s", code, out)
	}
	last := run.gh.Comments("acme/gitops", 12)
	if len(last) != 1 || last[0].ID != first[0].ID || !strings.HasPrefix(last[0].Body, "<!-- driftback:comment part=1 of=1 -->") {
		t.Errorf("third run: %d parts; want the first part alone, edited", len(last))
	}
}
