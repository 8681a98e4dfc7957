package main

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestWhichBuild proves `driftback version` says which build a binary is
// however it was built: stamped by the Makefile, installed from the module
// proxy, built in a git checkout (go build, go install, go run), and says how
// to get a version when the toolchain recorded none.
func TestWhichBuild(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "04f961010cb4ae7b01ec796fad0e81ab3d1eeab9"
	for _, tc := range []struct {
		name            string
		info            *debug.BuildInfo
		version, commit string
		wantV, wantC    string
		wantHint        bool
	}{
		{name: "stamped by make build", info: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, version: "v0.4.0", commit: rev,
			wantV: "v0.4.0", wantC: rev},
		{name: "go install @version", info: &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}},
			wantV: "v0.4.0", wantC: "not recorded (installed from the module proxy: the version names the commit)"},
		{name: "go install @commit", info: &debug.BuildInfo{Main: debug.Module{Version: "v0.4.1-0.20261202150106-04f961010cb4"}},
			wantV: "v0.4.1-0.20261202150106-04f961010cb4", wantC: "04f961010cb4"},
		{name: "go build in a checkout", info: &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}, Settings: vcs(rev, "false")},
			wantV: "v0.4.0", wantC: rev},
		{name: "go run with local changes", info: &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202150106-04f961010cb4+dirty"}, Settings: vcs(rev, "true")},
			wantV: "v0.0.0-20261202150106-04f961010cb4+dirty", wantC: rev + " (with uncommitted changes)"},
		{name: "-buildvcs=false", info: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			wantV: "(devel)", wantC: "not recorded", wantHint: true},
		{name: "no build information", wantV: "(devel)", wantC: "not recorded", wantHint: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := whichBuild(tc.info, tc.version, tc.commit)
			if b.version != tc.wantV || b.commit != tc.wantC || (b.hint != "") != tc.wantHint {
				t.Errorf("got version %q commit %q hint %q; want %q, %q, hint %v", b.version, b.commit, b.hint, tc.wantV, tc.wantC, tc.wantHint)
			}
		})
	}
}

// TestGoBuildKnowsItsCommit runs `driftback version` of a binary built as
// `go install ./cmd/driftback` builds it in a git checkout: the toolchain's
// record alone gives the commit, with no link-time stamp.
func TestGoBuildKnowsItsCommit(t *testing.T) {
	bin := driftbackBinary(t)
	head, err := exec.Command("git", "-C", filepath.Join("..", ".."), "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("driftback version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "commit "+strings.TrimSpace(string(head))) {
		t.Errorf("driftback version does not name the checkout's commit %s:\n%s", head, out)
	}
	if strings.Contains(string(out), "(devel)") {
		t.Errorf("driftback version says (devel) although the toolchain recorded the version:\n%s", out)
	}
}
