package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// curlEnv turns the test binary into the one curl call the Action's entry
// point makes (curl -fsSL --retry 3 -o FILE URL): a runner has curl, a
// test machine need not.
const curlEnv = "DRIFTBACK_TEST_CURL"

// serveCurl is curl when the test binary runs as it, and never returns
// then.
func serveCurl() {
	if os.Getenv(curlEnv) != "1" {
		return
	}
	args := os.Args[1:]
	var out, url string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-o" && i+1 < len(args):
			out = args[i+1]
			i++
		case a == "--retry":
			i++
		case !strings.HasPrefix(a, "-"):
			url = a
		}
	}
	resp, err := http.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "curl:", err)
		os.Exit(6)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		fmt.Fprintln(os.Stderr, "curl: (22) The requested URL returned error:", resp.StatusCode)
		os.Exit(22)
	}
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "curl:", err)
		os.Exit(23)
	}
	os.Exit(0)
}

// releaseArchive is a release archive whose driftback says what it was
// asked, as say.
func releaseArchive(t *testing.T, say string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	script := "#!/bin/sh\necho \"" + say + " $*\"\n"
	if err := tw.WriteHeader(&tar.Header{Name: "driftback", Mode: 0o755, Size: int64(len(script))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(script)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestTheActionInstallsOnlyAVerifiedRelease: the Action's entry point
// installs a release only when its archive has the digest the Action's own
// tree pins for that tag, or, for a tag pinned nowhere, when gh verifies
// the provenance driftback's release workflow signed; never on the word of
// the checksums the release serves. A replaced archive (its release's own
// checksums.txt replaced with it) is refused, and so is an unpinned one
// whose provenance does not verify, or that cannot be verified (no gh),
// then before anything is downloaded.
func TestTheActionInstallsOnlyAVerifiedRelease(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("the Action's runners are linux and macOS")
	}
	name := fmt.Sprintf("driftback_%s_%s.tar.gz", runtime.GOOS, runtime.GOARCH)
	genuine, replaced := releaseArchive(t, "genuine driftback"), releaseArchive(t, "replaced driftback")
	var serving atomic.Pointer[[]byte]
	serving.Store(&genuine)
	var requests atomic.Int64
	releases := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch r.URL.Path {
		case "/v9.9.9/" + name, "/v9.9.8/" + name:
			_, _ = w.Write(*serving.Load())
		case "/v9.9.9/checksums.txt", "/v9.9.8/checksums.txt":
			fmt.Fprintf(w, "%x  %s\n", sha256.Sum256(*serving.Load()), name)
		default:
			http.NotFound(w, r)
		}
	}))
	defer releases.Close()

	actionPath := t.TempDir()
	if err := os.MkdirAll(filepath.Join(actionPath, "hack", "action"), 0o755); err != nil {
		t.Fatal(err)
	}
	pins := fmt.Sprintf("# pinned\n%x  v9.9.9/%s\n", sha256.Sum256(genuine), name)
	if err := os.WriteFile(filepath.Join(actionPath, "hack", "action", "checksums.txt"), []byte(pins), 0o644); err != nil {
		t.Fatal(err)
	}
	// curl is the test binary; gh says what it was asked and answers as
	// the test says.
	tools, noGH := t.TempDir(), t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{tools, noGH} {
		if err := os.Symlink(self, filepath.Join(dir, "curl")); err != nil {
			t.Fatal(err)
		}
	}
	asked := filepath.Join(t.TempDir(), "gh-args")
	gh := "#!/bin/sh\necho \"$*\" >> " + asked + "\nexit \"$FAKE_GH_EXIT\"\n"
	if err := os.WriteFile(filepath.Join(tools, "gh"), []byte(gh), 0o755); err != nil {
		t.Fatal(err)
	}
	workspace := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", workspace).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	action := func(version, path, ghExit string) (string, int) {
		t.Helper()
		cmd := exec.Command("bash", filepath.Join(root, "hack", "action", "entrypoint.sh"))
		cmd.Env = append(os.Environ(), "PATH="+path+string(os.PathListSeparator)+os.Getenv("PATH"), curlEnv+"=1", "FAKE_GH_EXIT="+ghExit,
			"GITHUB_ACTION_PATH="+actionPath, "DRIFTBACK_RELEASES_URL="+releases.URL, "INPUT_VERSION="+version,
			"GITHUB_WORKSPACE="+workspace, "RUNNER_TEMP="+t.TempDir(), "DRIFTBACK_BIN=",
			"INPUT_FAIL_ON=", "INPUT_PATHS=", "INPUT_KUBECONFIG=", "INPUT_ARGS=", "INPUT_ACK_LABEL=")
		out, err := cmd.CombinedOutput()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}

	if out, code := action("v9.9.9", tools, "1"); code != 0 || !strings.Contains(out, "genuine driftback diff --repo .") {
		t.Errorf("the pinned release: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(asked); len(b) != 0 {
		t.Errorf("a pinned release asked gh %q", b)
	}
	serving.Store(&replaced)
	if out, code := action("v9.9.9", tools, "0"); code != 2 || !strings.Contains(out, "not the") || strings.Contains(out, "replaced driftback diff") {
		t.Errorf("a replaced archive with its own checksums: exit %d\n%s", code, out)
	}
	if out, code := action("v9.9.8", tools, "1"); code != 2 || !strings.Contains(out, "no provenance signed by driftback's release workflow") || strings.Contains(out, "replaced driftback diff") {
		t.Errorf("an unpinned release whose provenance does not verify: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(asked); !strings.Contains(string(b), "attestation verify ") || !strings.Contains(string(b), "--signer-workflow driftback/driftback/.github/workflows/release.yml") {
		t.Errorf("gh was asked %q, want the release workflow's provenance verified", b)
	}
	serving.Store(&genuine)
	if out, code := action("v9.9.8", tools, "0"); code != 0 || !strings.Contains(out, "genuine driftback diff --repo .") {
		t.Errorf("an unpinned release whose provenance verifies: exit %d\n%s", code, out)
	}
	if _, err := exec.LookPath("gh"); err == nil {
		return // this machine has gh: the case without it cannot be made here
	}
	before := requests.Load()
	if out, code := action("v9.9.8", noGH, "0"); code != 2 || !strings.Contains(out, "gh, which verifies a release's signed provenance, is not on the runner") {
		t.Errorf("an unpinned release without gh: exit %d\n%s", code, out)
	}
	if n := requests.Load() - before; n != 0 {
		t.Errorf("a release that cannot be verified was downloaded (%d requests)", n)
	}
}
