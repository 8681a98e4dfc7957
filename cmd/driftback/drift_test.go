package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDriftCommand reports the demo's lasting manual scale in production,
// writes it back with --write, and then finds no drift: the edited overlay
// renders what the cluster runs.
func TestDriftCommand(t *testing.T) {
	repo := t.TempDir()
	if err := os.CopyFS(repo, os.DirFS(filepath.Join(demoDir, "base"))); err != nil {
		t.Fatal(err)
	}
	args := []string{"drift", "--repo", repo, "--path", "apps/shop/overlays/production", "--live", filepath.Join(demoDir, "live")}
	out, errOut, code := runCLI(t, append(args, "--format", "json")...)
	if code != exitChanges {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var plan struct {
		Codified []struct{ Object, Path, Manager, Strategy string }
		Files    []string
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.Codified) != 1 || plan.Codified[0].Path != ".spec.replicas" || plan.Codified[0].Manager != "kubectl" {
		t.Fatalf("codified: %+v", plan.Codified)
	}
	// In a terminal it says what it would propose and how to write it, not
	// how to merge a pull request the command line never opens.
	preview, _, _ := runCLI(t, append(args, "--format", "markdown")...)
	if !strings.Contains(preview, "driftback would propose these changes to Git as a pull request. `--write` writes them") ||
		!strings.Contains(preview, "| would be written to |") || strings.Contains(preview, "**Merge**") {
		t.Errorf("the command line's plan speaks of a pull request it does not open:\n%s", preview)
	}
	if _, _, code := runCLI(t, append(args, "--write")...); code != exitChanges {
		t.Fatalf("--write: exit %d", code)
	}
	kust, err := os.ReadFile(filepath.Join(repo, "apps/shop/overlays/production/kustomization.yaml"))
	if err != nil || !strings.Contains(string(kust), "driftback-deployment-web.yaml") {
		t.Fatalf("the kustomization does not list the patch: %s %v", kust, err)
	}
	if base, _ := os.ReadFile(filepath.Join(repo, "apps/shop/base/web.yaml")); !strings.Contains(string(base), "replicas: 3") {
		t.Errorf("the shared base was edited")
	}
	out, errOut, code = runCLI(t, args...)
	if code != exitOK || !strings.Contains(out, "nothing to codify") {
		t.Errorf("after --write: exit %d\n%s%s", code, out, errOut)
	}
}
