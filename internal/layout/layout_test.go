// Package layout checks the import rules of driftback's packages: which
// package may talk to GitHub, log, or serve HTTP, and how large a package
// may grow. The rules are the README's architecture section.
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
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
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
var domain = []string{"render", "drift", "prgen", "report", "discover", "rollback", "internal/argocd", "app/config", "app/repos"}

// maxLines bounds a package's code (tests aside). The packages named in
// ceilings are larger today: each ceiling is about its size, lowered as it is split.
const maxLines = 2500

var ceilings = map[string]int{"app": 6700, "drift": 5350, "render": 2950}

func TestImportRules(t *testing.T) {
	serves := regexp.MustCompile(`\bhttp\.(Server\{|ListenAndServe|Serve\()`)
	for _, p := range packages(t) {
		name := rel(p.ImportPath)
		for _, imp := range p.Imports {
			switch {
			case strings.HasPrefix(imp, "github.com/google/go-github/") && name != "app" && name != "internal/githubfake":
				t.Errorf("%s imports go-github: only the GitHub side of the app does", name)
			case slices.Contains(domain, name) && imp == "log/slog":
				t.Errorf("%s imports log/slog: a domain package returns what happened, it does not log", name)
			case slices.Contains(domain, name) && (imp == module+"/app" || strings.HasPrefix(imp, module+"/app/") || strings.HasPrefix(imp, module+"/cmd/")):
				t.Errorf("%s imports %s: a domain package does not import what wires it", name, rel(imp))
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
		limit := maxLines
		if c, ok := ceilings[name]; ok {
			limit = c
		}
		if lines > limit {
			t.Errorf("%s has %d lines of code, over its bound of %d: split it by concern", name, lines, limit)
		}
	}
}
