package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/driftback/driftback/cmd/driftback/internal/quick"
	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/render"
)

func TestMain(m *testing.M) {
	render.ServeChild()
	serveCurl()
	if os.Getenv(mainEnv) == "1" {
		main() // the command as a user runs it; never returns
	}
	code := kubetest.Main(m)
	for _, c := range cleanups {
		c()
	}
	os.Exit(code)
}

// mainEnv makes the test binary the driftback command itself (main, with
// what it sets up for the libraries), for tests of the process's own
// output.
const mainEnv = "DRIFTBACK_TEST_MAIN"

// runProcess runs driftback as a process: what reaches its stderr from
// any library is seen.
func runProcess(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return out.String(), errb.String(), code
}

// TestRenderCommand proves `driftback render` prints kubectl kustomize's output
// for the working tree and for a ref, and exits 2 with the problem on stderr
// for an overlay that cannot render.
func TestRenderCommand(t *testing.T) {
	fixtures := filepath.Join("..", "..", "fixtures", "render")
	golden, err := os.ReadFile(filepath.Join("..", "..", "render", "testdata", "golden", "overlays-dev.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	out, errOut, code := runCLI(t, "render", "--repo", fixtures, "overlays/dev")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if diff := cmp.Diff(string(golden), out); diff != "" {
		t.Errorf("working tree render (-want +got):\n%s", diff)
	}

	// The same overlay at a ref of a real repository: the working tree is then
	// changed so that only the object store can give the right answer.
	repo := t.TempDir()
	if err := os.CopyFS(repo, os.DirFS(fixtures)); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, repo, "init", "-q", "-b", "main")
	gitCmd(t, repo, "add", "-A")
	gitCmd(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "fixtures")
	if err := os.WriteFile(filepath.Join(repo, "overlays/dev/kustomization.yaml"), []byte("resources: [missing.yaml]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCLI(t, "render", "--repo", repo, "--ref", "main", "overlays/dev")
	if code != exitOK {
		t.Fatalf("--ref main: exit %d: %s", code, errOut)
	}
	if diff := cmp.Diff(string(golden), out); diff != "" {
		t.Errorf("render at ref (-want +got):\n%s", diff)
	}

	// Flags may follow the paths; the broken working tree is an error naming
	// the file and line.
	_, errOut, code = runCLI(t, "render", "overlays/dev", "--repo", repo)
	if code != exitError {
		t.Errorf("broken overlay: exit %d, want %d", code, exitError)
	}
	if !strings.Contains(errOut, "overlays/dev/kustomization.yaml:1: resources entry \"missing.yaml\"") {
		t.Errorf("stderr does not name the file and line:\n%s", errOut)
	}
}

// TestRenderCommandReadsRepositoriesAsGitDoes: a kustomization at the
// repository's root, however a reconciler writes that path, and a ref of a
// clone that borrows its objects (git clone --shared, as CI caches do), of a
// linked worktree, and of the repository seen from a subdirectory.
func TestRenderCommandReadsRepositoriesAsGitDoes(t *testing.T) {
	origin := t.TempDir()
	for name, content := range map[string]string{
		"kustomization.yaml": "resources: [cm.yaml]\n",
		"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: root}\ndata: {n: \"1\"}\n",
		"apps/readme.txt":    "a subdirectory\n",
	} {
		writeFile(t, filepath.Join(origin, name), content)
	}
	gitCmd(t, origin, "init", "-q", "-b", "main")
	gitCmd(t, origin, "add", "-A")
	gitCmd(t, origin, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "root")
	shared := filepath.Join(t.TempDir(), "shared")
	gitCmd(t, origin, "clone", "-q", "--shared", origin, shared)
	worktree := filepath.Join(t.TempDir(), "wt")
	gitCmd(t, origin, "worktree", "add", "-q", "-b", "side", worktree)
	for _, c := range []struct{ name, repo, ref, path string }{
		{"the root as Argo CD writes it", origin, "main", "."},
		{"the root as Flux writes it", origin, "main", "./"},
		{"the root as an empty path", origin, "main", ""},
		{"a path from the root, as Flux accepts it", origin, "main", "/"},
		{"the working tree's root", origin, "", "."},
		{"a clone with git alternates", shared, "main", "."},
		{"a linked worktree", worktree, "side", "."},
		{"a subdirectory of the repository", filepath.Join(origin, "apps"), "main", "."},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"render", "--repo", c.repo}
			if c.ref != "" {
				args = append(args, "--ref", c.ref)
			}
			out, errOut, code := runCLI(t, append(args, c.path)...)
			if code != exitOK || !strings.Contains(out, "name: root") {
				t.Errorf("exit %d, stdout %q, stderr %q; want the root's ConfigMap", code, out, errOut)
			}
		})
	}
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRenderCommandErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		says string
	}{
		{"a repository that does not exist", []string{"render", "--repo", "/does/not/exist", "x"}, "no such file"},
		{"a ref in a directory that is not a repository", []string{"render", "--repo", t.TempDir(), "--ref", "main", "x"}, "is not in a git repository"},
		{"a path outside the repository", []string{"render", "--repo", ".", "../x"}, "give a path within the repository"},
		{"a path that is no directory", []string{"render", "--repo", ".", "nowhere"}, "driftback render: nowhere: no such directory\n"},
		{"a file", []string{"render", "--repo", ".", "main.go"}, "driftback render: main.go: a file, not a directory with a kustomization\n"},
		{"an unknown flag", []string{"render", "--nope"}, "flag provided but not defined"},
		{"an unknown command", []string{"rendr"}, "unknown command"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, tc.args...)
			if code != exitError || !strings.Contains(errOut, tc.says) {
				t.Errorf("exit %d, stderr %q; want exit 2 saying %q", code, errOut, tc.says)
			}
		})
	}
}

func gitCmd(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// TestEveryCommandRuns: each command the usage lists has what runs it, and
// nothing runs a command the usage does not list.
func TestEveryCommandRuns(t *testing.T) {
	for _, c := range commands() {
		if c.run == nil {
			t.Errorf("%s: nothing runs it", c.name)
		}
	}
	if len(runners) != len(quick.Commands) {
		t.Errorf("%d commands run, the usage lists %d", len(runners), len(quick.Commands))
	}
}

// TestHelpAndFlagMistakes: -h and --help exit 0 for every command and show
// its examples; a mistyped flag prints the error and a one-line hint that
// names the flag it meant, not the whole usage.
func TestHelpAndFlagMistakes(t *testing.T) {
	for _, c := range commands() {
		for _, h := range []string{"-h", "--help"} {
			_, errOut, code := runCLI(t, c.name, h)
			if code != exitOK || !strings.Contains(errOut, "Usage: driftback "+c.name) || !strings.Contains(errOut, "Examples:\n  driftback "+c.name) || strings.Contains(errOut, "panic") {
				t.Errorf("%s %s: exit %d, want 0 with the usage and examples:\n%s", c.name, h, code, errOut)
			}
		}
	}
	_, errOut, code := runCLI(t, "diff", "--bsae", "x")
	want := "flag provided but not defined: -bsae\nDid you mean --base? Run 'driftback diff -h' for its flags and examples.\n"
	if code != exitError || errOut != want {
		t.Errorf("a mistyped flag: exit %d, stderr:\n%s\nwant:\n%s", code, errOut, want)
	}
}

// TestStderrHoldsNoControlCharacters: an error quoting Git (a resources
// entry that clears the screen and recolours it) reaches the terminal
// without its control characters.
func TestStderrHoldsNoControlCharacters(t *testing.T) {
	repo := t.TempDir()
	writeFile(t, filepath.Join(repo, "app", "kustomization.yaml"), "resources:\n- \"\\e[2J\\e[31mwiped\\a.yaml\"\n")
	_, errOut, code := runCLI(t, "render", "--repo", repo, "app")
	if code != exitError || !strings.Contains(errOut, "[2J[31mwiped.yaml") {
		t.Fatalf("exit %d: %q", code, errOut)
	}
	if strings.ContainsAny(errOut, "\x1b\a") {
		t.Errorf("stderr holds control characters: %q", errOut)
	}
}

// TestTheCommandLineFollowsItsConventions: --version; a mistyped command
// gets a suggestion; every -h says what the exit status means; a flag that
// takes one value refuses a second.
func TestTheCommandLineFollowsItsConventions(t *testing.T) {
	if out, _, code := runCLI(t, "--version"); code != exitOK || !strings.HasPrefix(out, "driftback ") {
		t.Errorf("--version: exit %d: %q", code, out)
	}
	if _, errOut, code := runCLI(t, "dif"); code != exitError || !strings.Contains(errOut, `Did you mean "diff"?`) {
		t.Errorf("a mistyped command: exit %d: %q", code, errOut)
	}
	for _, c := range commands() {
		if _, errOut, code := runCLI(t, c.name, "-h"); code != exitOK || !strings.Contains(errOut, "\nExit status: 0 ") {
			t.Errorf("%s -h: exit %d, no exit status:\n%s", c.name, code, errOut)
		}
	}
	for _, args := range [][]string{
		{"drift", "--path", "apps/a", "--path", "apps/b", "--live", "x"},
		{"diff", "--base", "a", "--base", "b", "--head", "c"},
		{"render", "--repo", "a", "--repo", "b", "x"},
	} {
		_, errOut, code := runCLI(t, args...)
		if code != exitError || !strings.Contains(errOut, "given twice: it takes one value") {
			t.Errorf("%v: exit %d: %s", args, code, errOut)
		}
	}
	// A mistyped git ref: the branch it most likely meant.
	repo := t.TempDir()
	gitCmd(t, repo, "init", "-q", "-b", "main")
	gitCmd(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "x")
	if _, errOut, code := runCLI(t, "diff", "--repo", repo, "--base", "mian", "--head", "main"); code != exitError || !strings.Contains(errOut, `resolve "mian": reference not found; did you mean main?`) {
		t.Errorf("a mistyped ref: exit %d: %s", code, errOut)
	}
	// A repeatable flag keeps every value.
	if _, errOut, _ := runCLI(t, "diff", "--path", "a", "--path", "b", "--base", "x", "--head", "y"); strings.Contains(errOut, "given twice") {
		t.Errorf("--path is repeatable in diff: %s", errOut)
	}
}

// TestCheckConfig: app.yml and a repository's .github/driftback.yml are
// checked before they are used: a mistake with its line and key, a
// variable nothing reads named, a repository file checked alone (a pull
// request's own CI) or against app.yml's targets.
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "app.yml")
	writeFile(t, good, "github:\n  appID: 12\nclusters:\n  prod: {context: prod}\ntargets:\n- name: shop\n  repo: acme/gitops\n  path: apps/shop\n  cluster: prod\n")
	t.Setenv("DRIFTBACK_SERVER_WORKRES", "4")
	out, errOut, code := runCLI(t, "check-config", "--config", good)
	if code != exitOK || !strings.Contains(out, "app.yml: valid (1 targets, 1 clusters)") || !strings.Contains(errOut, "DRIFTBACK_SERVER_WORKRES is not a setting driftback reads") {
		t.Errorf("a valid app.yml, a misspelled variable: exit %d:\n%s%s", code, out, errOut)
	}
	bad := filepath.Join(dir, "bad.yml")
	writeFile(t, bad, "github:\n  appID: 12\nclusters:\n  prod: {kubeconfg: x}\n")
	if _, errOut, code := runCLI(t, "check-config", "--config", bad); code != exitError || !strings.Contains(errOut, "line 4: clusters.prod.kubeconfg: unknown key (did you mean kubeconfig?)") {
		t.Errorf("a mistake: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "check-config", "--config", good, "--secrets"); code != exitError || !strings.Contains(errOut, "privateKey: set DRIFTBACK_GITHUB_PRIVATE_KEY or github.privateKeyFile") {
		t.Errorf("--secrets without a key: exit %d: %s", code, errOut)
	}
	repo := filepath.Join(dir, "driftback.yml")
	writeFile(t, repo, "targets:\n- name: shop\n  policy: {failOn: [pvc-removal]}\n")
	if out, _, code := runCLI(t, "check-config", "--repo-config", repo); code != exitOK || !strings.Contains(out, "driftback.yml: valid") {
		t.Errorf("a repository's file alone: exit %d: %s", code, out)
	}
	writeFile(t, repo, "targets:\n- name: cart\n  policy: {failOn: [pvc-removel]}\n")
	if _, errOut, code := runCLI(t, "check-config", "--repo-config", repo); code != exitError || !strings.Contains(errOut, `unknown danger "pvc-removel"`) {
		t.Errorf("an unknown danger: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "check-config", "--config", good, "--repo-config", repo); code != exitError || !strings.Contains(errOut, `target "cart" is not one app.yml gives`) {
		t.Errorf("against app.yml's targets: exit %d: %s", code, errOut)
	}
}

// TestTheDemoReportHasThePublishedSchema: the demo's JSON report, every
// part of it real, validates against docs/schema/report-v1.json.
func TestTheDemoReportHasThePublishedSchema(t *testing.T) {
	out, errOut, code := runCLI(t, "diff", "--base", demoDir+"/base", "--head", demoDir+"/pr", "--live", demoDir+"/live", "--format", "json")
	if code != exitChanges {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	f, err := os.Open(filepath.Join("..", "..", "docs", "schema", "report-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("report-v1.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("report-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(inst); err != nil {
		t.Errorf("the demo's report does not validate: %v", err)
	}
}

// TestShellCompletion: bash's completion, sourced, completes a command
// and a command's flags, asked of driftback itself.
func TestShellCompletion(t *testing.T) {
	bin := driftbackBinary(t)
	script, _, code := runCLI(t, "completion", "bash")
	if code != exitOK {
		t.Fatal("completion bash failed")
	}
	for _, c := range []struct{ words, want string }{
		{"driftback dif", "diff"}, {"driftback diff --bas", "--base"}, {"driftback dump --o", "--out"},
	} {
		sh := script + "\nCOMP_WORDS=(" + c.words + "); COMP_CWORD=" + fmt.Sprint(len(strings.Fields(c.words))-1) + "; _driftback; printf '%s\\n' \"${COMPREPLY[@]}\"\n"
		cmd := exec.Command("bash", "-c", sh)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != c.want {
			t.Errorf("%q completes to %q (%v), want %q", c.words, out, err, c.want)
		}
	}
	for _, shell := range []string{"zsh", "fish"} {
		if out, _, code := runCLI(t, "completion", shell); code != exitOK || !strings.Contains(out, "driftback __complete") {
			t.Errorf("completion %s: exit %d:\n%s", shell, code, out)
		}
	}
}
