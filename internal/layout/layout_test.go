// Package layout checks the import rules of driftback's packages: which
// package may talk to GitHub, log, or serve HTTP, and how large a package
// may grow. The rules are docs/architecture.md's packages table.
package layout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/driftback/driftback"

type pkg struct {
	ImportPath  string
	Dir         string
	GoFiles     []string
	TestGoFiles []string
	// XTestGoFiles are the tests of the package_test package.
	XTestGoFiles []string
	Imports      []string
}

// packages lists the module's packages as the go command sees them.
func packages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var ps []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if len(ps) < 10 {
		t.Fatalf("go list found %d packages", len(ps))
	}
	return ps
}

func rel(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, module), "/") }

// domain are the packages that decide: they know neither GitHub, nor the
// process's log, nor the packages that wire them.
var domain = []string{"render", "render/child", "render/childbin", "render/helm", "render/slots", "merge", "internal/gitrepo", "drift", "drift/object", "drift/rbac", "drift/syncfail", "drift/admission", "drift/audit", "drift/scope", "drift/livestate", "prgen", "prgen/yamledit", "report", "report/markdown", "report/prediction", "discover", "rollback", "internal/argocd", "internal/lru", "app/config", "app/repos", "reconcile", "reconcile/charts", "reconcile/hide", "reconcile/prepare"}

// githubFree are the app's packages that know nothing of GitHub: not even
// the App's own GitHub package. The review of a pull request is a function
// of its inputs; its caller reads GitHub and publishes.
var githubFree = []string{"app/config", "app/repos", "app/targets", "app/review", "app/auditlog", "app/registration", "app/queue"}

// layers orders the app's packages: each imports only packages of a layer
// below its own. The domain packages (render, drift, …) are layer 0.
var layers = map[string]int{
	"app/config": 1, "app/repos": 1, "app/metrics": 1,
	"app/auditlog": 2, "app/registration": 2,
	"app/targets": 2, "app/queue": 2,
	"app/review": 4, "app/github": 4,
	"app/driftloop": 5, "app/aftermerge": 5,
	"app": 6,
}

func layer(name string) int {
	if strings.HasPrefix(name, "cmd/") && !strings.Contains(name, "/internal/") {
		return 7
	}
	return layers[name]
}

// few are the packages that `driftback version` and `--help` initialise
// (cmd/driftback/internal/quick): each imports the standard library and
// these only.
var few = map[string][]string{
	"cmd/driftback/internal/quick": {"golang.org/x/mod/", module + "/render/childbin"},
	"render/childbin":              {},
}

// maxLines bounds a package's code (tests aside).
const maxLines = 2500

func TestImportRules(t *testing.T) {
	serves := regexp.MustCompile(`\bhttp\.(Server\{|ListenAndServe|Serve\()`)
	for _, p := range packages(t) {
		name := rel(p.ImportPath)
		for _, imp := range p.Imports {
			switch {
			case strings.HasPrefix(imp, "github.com/google/go-github/") && name != "app/github" && name != "internal/githubfake":
				t.Errorf("%s imports go-github: only app/github does", name)
			case slices.Contains(githubFree, name) && imp == module+"/app/github":
				t.Errorf("%s imports app/github: it knows nothing of GitHub", name)
			case slices.Contains(domain, name) && imp == "log/slog":
				t.Errorf("%s imports log/slog: a domain package returns what happened, it does not log", name)
			case strings.HasPrefix(imp, module+"/") && layer(rel(imp)) > 0 && layer(rel(imp)) >= layer(name):
				t.Errorf("%s imports %s: a package imports only the layers below it", name, rel(imp))
			}
		}
		if allowed, ok := few[name]; ok {
			for _, imp := range p.Imports {
				std := !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".")
				if !std && !slices.ContainsFunc(allowed, func(a string) bool { return strings.HasPrefix(imp, a) }) {
					t.Errorf("%s imports %s: it imports the standard library and %v only, or it is no longer answered before the rest initialises", name, imp, allowed)
				}
			}
		}
		lines := 0
		for _, f := range p.GoFiles {
			b, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if name != "app" && !strings.HasPrefix(name, "cmd/") && !strings.HasPrefix(name, "internal/") && serves.Match(b) {
				t.Errorf("%s/%s serves HTTP: only the app and the command line do", name, f)
			}
			sc := bufio.NewScanner(bytes.NewReader(b))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				lines++
			}
		}
		if lines > maxLines {
			t.Errorf("%s has %d lines of code, over the bound of %d: split it by concern", name, lines, maxLines)
		}
	}
}

// TestPackagesStopTheirApiserver: a package whose tests start the shared
// apiserver (kubetest.New) stops it when they end (kubetest.Main in its
// TestMain); otherwise every run leaves a kube-apiserver and an etcd behind.
func TestPackagesStopTheirApiserver(t *testing.T) {
	for _, p := range packages(t) {
		starts, stops := false, false
		for _, f := range append(append([]string{}, p.TestGoFiles...), p.XTestGoFiles...) {
			b, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			starts = starts || bytes.Contains(b, []byte("kubetest.New("))
			stops = stops || bytes.Contains(b, []byte("kubetest.Main("))
		}
		if starts && !stops {
			t.Errorf("%s: its tests start the apiserver (kubetest.New) but no TestMain stops it (kubetest.Main)", rel(p.ImportPath))
		}
	}
}
