package quick

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime/debug"
	"slices"
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
		{name: "the Action's own source, stamped", info: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, version: "devel-source.20261205T180000Z",
			wantV: "devel-source.20261205T180000Z", wantC: "not recorded (built from source without version control information)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := whichBuild(tc.info, tc.version, tc.commit)
			if b.version != tc.wantV || b.commit != tc.wantC || (b.hint != "") != tc.wantHint {
				t.Errorf("got version %q commit %q hint %q; want %q, %q, hint %v", b.version, b.commit, b.hint, tc.wantV, tc.wantC, tc.wantHint)
			}
		})
	}
}

// TestAStampedVersionIsPrinted: what the link stamps (-X, as the Makefile
// and the release build do) is what `driftback version` prints.
func TestAStampedVersionIsPrinted(t *testing.T) {
	version, commit = "v1.2.3", "0123456789abcdef"
	defer func() { version, commit = "", "" }()
	var out strings.Builder
	if code, ok := Answer([]string{"version"}, &out, io.Discard); code != 0 || !ok || !strings.HasPrefix(out.String(), "driftback v1.2.3\ncommit 0123456789abcdef\n") {
		t.Errorf("exit %d (answered: %v), output %q", code, ok, out.String())
	}
}

// TestTheBuildsStampThisPackage: the Makefile, the image and the release
// stamp the version and commit into this package's variables (the linker
// ignores an -X that names no variable, so a stale path would go unseen).
func TestTheBuildsStampThisPackage(t *testing.T) {
	pkg := reflect.TypeFor[Command]().PkgPath()
	stamp := regexp.MustCompile(`-X ([^ =]+)=`)
	for _, file := range []string{"Makefile", "Dockerfile", ".goreleaser.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", file))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(b), "$(QUICK)", pkg) // the Makefile's
		var stamped []string
		for _, m := range stamp.FindAllStringSubmatch(text, -1) {
			if !slices.Contains(stamped, m[1]) {
				stamped = append(stamped, m[1])
			}
		}
		if want := []string{pkg + ".version", pkg + ".commit"}; !slices.Equal(stamped, want) {
			t.Errorf("%s stamps %q, want %q", file, stamped, want)
		}
	}
}

// TestEveryBuildShipsTheRenderChild: each way driftback is built or
// installed builds driftback-render beside it, alike (without it every
// render is slower, and nothing else would say so).
func TestEveryBuildShipsTheRenderChild(t *testing.T) {
	for file, wants := range map[string][]string{
		"Makefile":                  {"-o bin/ ./cmd/driftback ./cmd/driftback-render"},
		"Dockerfile":                {"-o /out/ ./cmd/driftback ./cmd/driftback-render", "$TARGETPLATFORM/driftback-render /", "/out/driftback-render /"},
		".goreleaser.yaml":          {"main: ./cmd/driftback-render"},
		"hack/action/entrypoint.sh": {"cmd/...@", "./cmd/driftback ./cmd/driftback-render", "driftback-render 2>/dev/null"},
		"README.md":                 {"go install github.com/driftback/driftback/cmd/...@"},
	} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range wants {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s does not build or ship driftback-render (no %q)", file, want)
			}
		}
	}
}
