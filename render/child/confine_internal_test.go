package child

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const confinedWriteEnv = "DRIFTBACK_TEST_CONFINED_WRITE"

// TestChildCannotWriteFiles: the render child's confinement leaves it no
// file to write (RLIMIT_FSIZE 0), so even a kustomize path that reached the
// disk past the in-memory filesystem could not leave a byte there. The test
// binary confines itself as the child does and tries.
func TestChildCannotWriteFiles(t *testing.T) {
	if path := os.Getenv(confinedWriteEnv); path != "" {
		if err := confine(); err != nil {
			t.Fatalf("confine: %v", err)
		}
		if err := os.WriteFile(path, []byte("written by a confined child\n"), 0o600); err == nil {
			t.Fatal("the confined child wrote a file")
		} else {
			t.Logf("refused: %v", err)
		}
		return
	}
	path := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildCannotWriteFiles$", "-test.v")
	cmd.Env = append(os.Environ(), confinedWriteEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the confined child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "refused:") || !strings.Contains(string(out), "file too large") {
		t.Errorf("the child's write was not refused by the file-size limit:\n%s", out)
	}
	if info, err := os.Stat(path); err == nil && info.Size() > 0 {
		t.Errorf("the confined child left %d bytes in %s", info.Size(), path)
	}
}
