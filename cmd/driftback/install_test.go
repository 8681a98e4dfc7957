package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// TestGoInstallFromAModuleProxy proves the README's
// `go install github.com/driftback/driftback/cmd/...@VERSION`: the
// checkout's HEAD is served as a module version from a proxy on disk (its
// dependencies from the module cache the build filled), installed outside
// any module as a user installs it, and asked its version, which names the
// render child installed beside it (driftback-render, of the same build)
// as the one it renders overlays with. Go refuses to
// install a module whose go.mod replaces or excludes modules; nothing but
// an install shows it.
func TestGoInstallFromAModuleProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the module")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI runs in a git checkout: %v", err)
		}
		t.Skipf("not a git checkout: %v", err)
	}
	cache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	modcache := strings.TrimSpace(string(cache))
	const path = "github.com/driftback/driftback"
	version := fmt.Sprintf("v0.0.0-installtest.%d", time.Now().UnixNano())
	proxy := t.TempDir()
	dir := filepath.Join(proxy, path, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	z, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	// What is committed, as a tag of it would publish.
	if err := zip.CreateFromVCS(z, module.Version{Path: path, Version: version}, root, "HEAD", ""); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := exec.Command("git", "-C", root, "show", "HEAD:go.mod").Output()
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		version + ".mod":  string(gomod),
		version + ".info": fmt.Sprintf(`{"Version":%q,"Time":%q}`, version, time.Now().UTC().Format(time.RFC3339)),
		"list":            version + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The version is unpacked into the module cache the build uses (so
	// the dependencies compiled for the tests are reused); it leaves again.
	t.Cleanup(func() {
		_ = os.RemoveAll(filepath.Join(modcache, path+"@"+version))
		matches, _ := filepath.Glob(filepath.Join(modcache, "cache", "download", path, "@v", version+".*"))
		for _, m := range matches {
			_ = os.Remove(m)
		}
	})
	bin := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	flags := "-modcacherw"
	if raceEnabled {
		flags += " -race" // the flags the tests' packages were compiled with
	}
	install := exec.CommandContext(ctx, "go", "install", path+"/cmd/...@"+version)
	install.Dir = t.TempDir() // outside any module, as a user is
	install.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS="+flags, "GOTOOLCHAIN=local", "GOSUMDB=off", "GOWORK=off",
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(modcache, "cache", "download")))
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install %s@%s: %v\n%s", path+"/cmd/...", version, err, out)
	}
	out, err := exec.Command(filepath.Join(bin, "driftback"), "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "driftback "+version) || !strings.Contains(string(out), "render child "+filepath.Join(bin, "driftback-render")+" ") {
		t.Errorf("the installed driftback version: %v\n%s", err, out)
	}
}
