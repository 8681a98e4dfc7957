package render

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/driftback/driftback/render/childbin"
)

var kustomizeChildBuilt struct {
	once     sync.Once
	dir, bin string
	err      error
}

// KustomizeChild builds driftback-render, the render child that links
// kustomize alone, once for the test binary.
func KustomizeChild(t testing.TB) string {
	t.Helper()
	b := &kustomizeChildBuilt
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "driftback-render"); b.err != nil {
			return
		}
		b.bin = filepath.Join(b.dir, childbin.Name)
		// Stamped, as every install is: a build that names no version,
		// commit or link flags is never taken for another.
		args := []string{"build", "-buildvcs=false", "-ldflags=-X main.build=test", "-o", b.bin}
		if raceEnabled {
			args = append(args, "-race") // only the link is left
		}
		cmd := exec.Command("go", append(args, "../cmd/driftback-render")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// RemoveKustomizeChild removes what KustomizeChild built: TestMain's, last.
func RemoveKustomizeChild() {
	if kustomizeChildBuilt.dir != "" {
		os.RemoveAll(kustomizeChildBuilt.dir)
	}
}
