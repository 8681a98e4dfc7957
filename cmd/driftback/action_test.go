package main

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"sigs.k8s.io/yaml"

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
func driftbackBinary(t testing.TB) string {
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
		// driftback-render beside it, as every install puts it.
		args := []string{"build", "-buildvcs=true", "-o", dir + string(filepath.Separator)}
		if raceEnabled {
			// The same flags as the test binary's: its packages are
			// compiled already, and only the link is left.
			args = append(args, "-race")
		}
		build := exec.Command("go", append(args, "./cmd/driftback", "./cmd/driftback-render")...)
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

// actionStep runs action.yml's composite step as a runner does: its env
// with ${{ inputs.* }} (given, else the input's default) and
// ${{ github.token }} filled in, its run script in bash from the action's
// directory, the step's outputs from $GITHUB_OUTPUT mapped to the action's
// outputs, and the step summary. env adds the runner's variables.
func actionStep(t *testing.T, inputs map[string]string, env []string) (out string, code int, outputs map[string]string, summary string) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var action struct {
		Inputs  map[string]struct{ Default string }
		Outputs map[string]struct{ Value string }
		Runs    struct {
			Using string
			Steps []struct {
				ID, Shell, Run, Uses, If string
				Env                      map[string]string
				With                     map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(raw, &action); err != nil {
		t.Fatal(err)
	}
	steps := action.Runs.Steps
	if action.Runs.Using != "composite" || len(steps) != 2 || steps[0].Shell != "bash" || steps[1].Uses == "" {
		t.Fatalf("action.yml runs %s with %d steps: the runner here runs one bash step, then an action", action.Runs.Using, len(steps))
	}
	step := steps[0]
	// The second step uploads the report the first names (actions are not
	// run here).
	if up := steps[1]; !strings.HasPrefix(up.Uses, "actions/upload-artifact@") || up.With["path"] != "${{ steps."+step.ID+".outputs.report }}" || !strings.Contains(up.If, "always()") {
		t.Fatalf("action.yml's second step does not upload the report whatever the first's exit: %+v", up)
	}
	for name := range inputs {
		if _, ok := action.Inputs[name]; !ok {
			t.Fatalf("action.yml has no input %q", name)
		}
	}
	expr := regexp.MustCompile(`\$\{\{\s*([^}]*?)\s*\}\}`)
	token := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GITHUB_TOKEN="); ok {
			token = v
		}
	}
	fill := func(s string) string {
		return expr.ReplaceAllStringFunc(s, func(m string) string {
			e := expr.FindStringSubmatch(m)[1]
			switch {
			case e == "github.token":
				return token
			case strings.HasPrefix(e, "inputs."):
				name := strings.TrimPrefix(e, "inputs.")
				if v, ok := inputs[name]; ok {
					return v
				}
				in, ok := action.Inputs[name]
				if !ok {
					t.Fatalf("action.yml uses the unknown input %q", name)
				}
				return expr.ReplaceAllString(in.Default, "${{ $1 }}") // defaults are filled once more below
			}
			t.Fatalf("action.yml's step uses ${{ %s }}, which this runner does not give", e)
			return ""
		})
	}
	dir := t.TempDir()
	outFile, summaryFile := filepath.Join(dir, "output"), filepath.Join(dir, "summary")
	cmd := exec.Command("bash", "-e", "-c", step.Run)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GITHUB_ACTION_PATH="); ok {
			root = v
		}
	}
	cmd.Dir = t.TempDir()
	// The runner's variables; env's win (GITHUB_ACTION_PATH: another copy of the action).
	cmd.Env = append(append(os.Environ(), "GITHUB_ACTION_PATH="+root, "GITHUB_OUTPUT="+outFile, "GITHUB_STEP_SUMMARY="+summaryFile, "RUNNER_TEMP="+t.TempDir()), env...)
	for k, v := range step.Env {
		cmd.Env = append(cmd.Env, k+"="+fill(fill(v)))
	}
	b, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	stepOut := map[string]string{}
	if o, err := os.ReadFile(outFile); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(o)), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				stepOut[k] = v
			}
		}
	}
	outputs = map[string]string{}
	ref := regexp.MustCompile(`^\$\{\{\s*steps\.` + regexp.QuoteMeta(step.ID) + `\.outputs\.([a-z-]+)\s*\}\}$`)
	for name, o := range action.Outputs {
		m := ref.FindStringSubmatch(o.Value)
		if m == nil {
			t.Fatalf("action.yml's output %s is %q, not one of its step's", name, o.Value)
		}
		outputs[name] = stepOut[m[1]]
	}
	sum, _ := os.ReadFile(summaryFile)
	return string(b), code, outputs, string(sum)
}

// TestActionEntryPoint runs the GitHub Action's entry point
// (hack/action/entrypoint.sh, what action.yml runs) as a workflow would, in
// a checkout of a pull request, against the GitHub fake: the comment and the
// check run are created, split when the report is long, edited in place
// when the job runs again, and the parts a shorter report no longer needs
// are deleted.
func TestActionEntryPoint(t *testing.T) {
	bin := driftbackBinary(t)
	repo := t.TempDir()
	git := func(args ...string) string { return gitIn(t, repo, args...) }
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
	var outputs map[string]string
	var summary string
	action := func() (string, int) {
		t.Helper()
		out, code, o, sum := actionStep(t, map[string]string{"fail-on": "crd-removal, pvc-removal"},
			[]string{"DRIFTBACK_BIN=" + bin, "GITHUB_WORKSPACE=" + repo, "GITHUB_TOKEN=" + run.token})
		if strings.Contains(out+sum, run.token) {
			t.Fatal("the token was printed")
		}
		outputs, summary = o, sum
		return out, code
	}

	out, code := action()
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if outputs["verdict"] != "nothing-dangerous" || outputs["conclusion"] != "neutral" || outputs["update"] != "300" || outputs["complete"] != "true" {
		t.Errorf("the step's outputs: %v", outputs)
	}
	if b, err := os.ReadFile(outputs["report"]); err != nil || !strings.Contains(string(b), `"verdict": "nothing-dangerous"`) {
		t.Errorf("the report output %q: %v", outputs["report"], err)
	}
	if !strings.Contains(summary, "## driftback: what merging this pull request does to the cluster") {
		t.Errorf("the step summary holds no comment:\n%.500s", summary)
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

// TestActionOnAForksPullRequest: on a fork's pull_request event the
// workflow's token reads only. The step says so in one line, puts the
// report in the step summary and its outputs, and exits by the verdict:
// 1 when a danger fails the check, never a raw 403.
func TestActionOnAForksPullRequest(t *testing.T) {
	bin := driftbackBinary(t)
	repo := t.TempDir()
	git := func(args ...string) string { return gitIn(t, repo, args...) }
	git("init", "-q", "-b", "main")
	writeFile(t, filepath.Join(repo, "apps", "shop", "kustomization.yaml"), "namespace: shop\nresources: [data.yaml, web.yaml]\n")
	writeFile(t, filepath.Join(repo, "apps", "shop", "data.yaml"), "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\nspec:\n  resources: {requests: {storage: 1Gi}}\n")
	writeFile(t, filepath.Join(repo, "apps", "shop", "web.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {a: b}\n")
	git("add", "-A")
	git("commit", "-q", "-m", "shop")
	base := git("rev-parse", "HEAD")
	writeFile(t, filepath.Join(repo, "apps", "shop", "kustomization.yaml"), "namespace: shop\nresources: [web.yaml]\n")
	git("commit", "-q", "-a", "-m", "no claim")
	head := git("rev-parse", "HEAD")
	run := newActionsRun(t, githubfake.Pull{Number: 7, User: "stranger", HeadSHA: head, BaseSHA: base, BaseRef: "main", HeadRef: "patch", HeadRepo: "stranger/gitops"})
	token := run.gh.ReadOnlyActionsToken(1)
	for _, tc := range []struct {
		failOn string
		code   int
	}{{"pvc-removal", 1}, {"crd-removal", 0}} {
		out, code, outputs, summary := actionStep(t, map[string]string{"fail-on": tc.failOn},
			[]string{"DRIFTBACK_BIN=" + bin, "GITHUB_WORKSPACE=" + repo, "GITHUB_TOKEN=" + token})
		if code != tc.code || !strings.Contains(out, "this workflow's token may not write to pull request #7") || strings.Contains(out, "403") {
			t.Errorf("fail-on %s: exit %d, want %d:\n%s", tc.failOn, code, tc.code, out)
		}
		if outputs["verdict"] != "dangerous" || outputs["dangers"] != "1" || !strings.Contains(summary, "pvc-removal") {
			t.Errorf("fail-on %s: outputs %v, summary:\n%.400s", tc.failOn, outputs, summary)
		}
	}
	if c := run.gh.Comments("acme/gitops", 7); len(c) != 0 {
		t.Errorf("%d comments written with a read-only token", len(c))
	}
	if r := run.gh.CheckRuns("acme/gitops", head); len(r) != 0 {
		t.Errorf("%d check runs written with a read-only token", len(r))
	}
	// The repository's own branch refused a write: the workflow's
	// permissions are wrong, an error, never read as a fork's.
	run.gh.SetPull("acme/gitops", githubfake.Pull{Number: 7, User: "dev", HeadSHA: head, BaseSHA: base, BaseRef: "main", HeadRef: "patch", HeadRepo: "acme/gitops"})
	out, code, _, _ := actionStep(t, map[string]string{"fail-on": "crd-removal"}, []string{"DRIFTBACK_BIN=" + bin, "GITHUB_WORKSPACE=" + repo, "GITHUB_TOKEN=" + token})
	if code != 2 || strings.Contains(out, "a fork's pull_request event") || !strings.Contains(out, "Resource not accessible by integration") {
		t.Errorf("a same-repository pull request whose token may not write: exit %d:\n%s", code, out)
	}
}

// TestTheActionInstallsItsOwnRelease: an Action is not told its own ref in
// a composite step; it reads its release from its own tree
// (hack/action/version), downloads that release's archive and runs it only
// when the archive has the digest its tree pins; a replaced archive is not
// run.
func TestTheActionInstallsItsOwnRelease(t *testing.T) {
	bin := driftbackBinary(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// The release's archive, as the release workflow names it.
	archive := filepath.Join(t.TempDir(), "driftback_linux_amd64.tar.gz")
	if out, err := exec.Command("tar", "-czf", archive, "-C", filepath.Dir(bin), "driftback").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	good, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Pointer[[]byte]
	served.Store(&good)
	releases := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v9.8.7/driftback_"+runtime.GOOS+"_"+runtime.GOARCH+".tar.gz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(*served.Load())
	}))
	defer releases.Close()
	action := t.TempDir()
	entry, err := os.ReadFile(filepath.Join(root, "hack", "action", "entrypoint.sh"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(action, "action.yml"), "") // not read: the runner reads the checkout's
	if err := os.MkdirAll(filepath.Join(action, "hack", "action"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(action, "hack", "action", "entrypoint.sh"), entry, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(action, "hack", "action", "version"), "v9.8.7\n")
	writeFile(t, filepath.Join(action, "hack", "action", "checksums.txt"), fmt.Sprintf("%x  v9.8.7/driftback_%s_%s.tar.gz\n", sha256.Sum256(good), runtime.GOOS, runtime.GOARCH))

	repo := t.TempDir()
	gitIn(t, repo, "init", "-q", "-b", "main")
	gitIn(t, repo, "commit", "-q", "--allow-empty", "-m", "empty")
	head := gitIn(t, repo, "rev-parse", "HEAD")
	run := newActionsRun(t, githubfake.Pull{Number: 3, User: "dev", HeadSHA: head, BaseSHA: head, BaseRef: "main", HeadRef: "x", HeadRepo: "acme/gitops"})
	step := func() (string, int) {
		out, code, _, _ := actionStep(t, nil, []string{"GITHUB_ACTION_PATH=" + action, "DRIFTBACK_RELEASES_URL=" + releases.URL,
			"GITHUB_WORKSPACE=" + repo, "GITHUB_TOKEN=" + run.token, "DRIFTBACK_BIN="})
		return out, code
	}
	if out, code := step(); code != 0 || !strings.Contains(out, "installing driftback v9.8.7") || len(run.gh.Comments("acme/gitops", 3)) != 1 {
		t.Fatalf("the pinned release: exit %d:\n%s", code, out)
	}
	replaced := append(append([]byte{}, good...), 0) // replaced on the release
	served.Store(&replaced)
	if out, code := step(); code != 2 || !strings.Contains(out, "not the "+fmt.Sprintf("%x", sha256.Sum256(good))+" this Action pins: not installed") {
		t.Errorf("a replaced archive: exit %d:\n%s", code, out)
	}
}

// TestTheActionBuildsItsOwnSourceWhenNotARelease: an Action run from a
// branch or commit (hack/action/version says devel) builds driftback from
// its own files, never from @latest, and runs it.
func TestTheActionBuildsItsOwnSourceWhenNotARelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	repo := t.TempDir()
	gitIn(t, repo, "init", "-q", "-b", "main")
	gitIn(t, repo, "commit", "-q", "--allow-empty", "-m", "empty")
	head := gitIn(t, repo, "rev-parse", "HEAD")
	run := newActionsRun(t, githubfake.Pull{Number: 4, User: "dev", HeadSHA: head, BaseSHA: head, BaseRef: "main", HeadRef: "x", HeadRepo: "acme/gitops"})
	flags := "GOFLAGS=-buildvcs=false"
	if raceEnabled {
		flags += " -race" // the tests' packages are compiled so: only the link is left
	}
	temp := t.TempDir()
	out, code, outputs, _ := actionStep(t, nil, []string{"GITHUB_WORKSPACE=" + repo, "GITHUB_TOKEN=" + run.token, "DRIFTBACK_BIN=", flags, "RUNNER_TEMP=" + temp})
	if code != 0 || !strings.Contains(out, "building driftback from its own source") || outputs["verdict"] != "nothing-dangerous" {
		t.Errorf("exit %d, outputs %v:\n%s", code, outputs, out)
	}
	// Built outside version control (a runner downloads an Action without
	// .git), stamped: it renders overlays in the driftback-render built
	// beside it.
	dir, err := filepath.EvalSymlinks(filepath.Join(temp, "driftback-src")) // as the render child is named
	if err != nil {
		t.Fatal(err)
	}
	version, err := exec.Command(filepath.Join(dir, "driftback"), "version").CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^driftback devel-source\.\d{8}T\d{6}Z\ncommit not recorded \(built from source`).Match(version) || !strings.Contains(string(version), "render child "+filepath.Join(dir, "driftback-render")+" ") {
		t.Errorf("driftback version of the Action's own build: %v\n%s", err, version)
	}
	if strings.Contains(out, "@latest") {
		t.Errorf("the Action fetched @latest:\n%s", out)
	}
}

// gitIn runs git in repo, as a committer named t, and returns its output.
func gitIn(t *testing.T, repo string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	cmd.Dir = repo
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
