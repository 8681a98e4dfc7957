package render_test

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftback/driftback/internal/testfs"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/render/childbin"
	"github.com/driftback/driftback/render/helm"
)

// TestTheKustomizeChildLinksNoHelm: driftback-render initialises kustomize
// and what it needs, none of Helm, client-go, the apiserver's libraries or
// the App (GODEBUG=inittrace=1 lists each package the process
// initialised); run by hand, it says what it is and renders nothing.
func TestTheKustomizeChildLinksNoHelm(t *testing.T) {
	cmd := exec.Command(render.KustomizeChild(t))
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), "driftback runs it") {
		t.Fatalf("run by hand: %v\n%s", err, stderr.String())
	}
	var kustomize bool
	for _, m := range regexp.MustCompile(`(?m)^init (\S+) @`).FindAllStringSubmatch(stderr.String(), -1) {
		for _, heavy := range []string{"helm.sh/", "k8s.io/client-go/", "k8s.io/api/", "k8s.io/apiserver/", "k8s.io/kubernetes/",
			"sigs.k8s.io/controller-runtime/", "github.com/santhosh-tekuri/", "github.com/driftback/driftback/app"} {
			if strings.HasPrefix(m[1], heavy) {
				t.Errorf("driftback-render initialises %s", m[1])
			}
		}
		kustomize = kustomize || strings.HasPrefix(m[1], "sigs.k8s.io/kustomize/")
	}
	if !kustomize {
		t.Errorf("no kustomize package initialised: the trace was not read\n%s", stderr.String())
	}
}

// TestTheKustomizeChildRendersAsDriftbackDoes: every fixture overlay, with
// and without origins, renders through driftback-render exactly as through
// driftback's own child, and what only Helm can do (a chart, an overlay
// inflating helmCharts) never goes to it.
func TestTheKustomizeChildRendersAsDriftbackDoes(t *testing.T) {
	bin := render.KustomizeChild(t)
	tree, err := render.DirTree(fixtureRepo)
	if err != nil {
		t.Fatal(err)
	}
	overlays := render.Discover(tree)
	for _, origins := range []bool{false, true} {
		want, err := render.New(render.Options{Origins: origins}).Render(context.Background(), tree, overlays)
		if err != nil {
			t.Fatal(err)
		}
		got, err := render.New(render.Options{Origins: origins, KustomizeExecutable: bin}).Render(context.Background(), tree, overlays)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range got.Overlays {
			if err := o.Err(); err != nil || len(o.YAML) == 0 {
				t.Fatalf("%s: %v", o.Path, err)
			}
			if diff := cmp.Diff(want.Overlays[i], o); diff != "" {
				t.Errorf("%s with origins %v: driftback-render (+) and driftback (-) differ:\n%s", o.Path, origins, diff)
			}
		}
	}

	// Where the child for overlays cannot even start, what needs Helm
	// still renders: it never went there.
	r := render.New(render.Options{KustomizeExecutable: filepath.Join(t.TempDir(), "missing")})
	if _, err := r.Render(context.Background(), tree, overlays[:1]); err == nil || !strings.Contains(err.Error(), "start the render child") {
		t.Errorf("an overlay went elsewhere than the child for overlays: %v", err)
	}
	dir := t.TempDir()
	files := map[string]string{"app/kustomization.yaml": "helmCharts:\n- name: shop\n  releaseName: web\n"}
	for name, b := range testfs.Read(t, filepath.Join("helm", "testdata", "shop")) {
		files["app/charts/shop/"+name] = string(b)
	}
	testfs.Write(t, dir, files)
	charts, err := render.DirTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.RenderWith(context.Background(), charts, []string{"app"}, render.BuildOptions{EnableHelm: true, HelmKubeVersion: "1.31.0"})
	if err != nil || res.Overlays[0].Err() != nil || !strings.Contains(string(res.Overlays[0].YAML), "kind: Deployment") {
		t.Errorf("an overlay inflating helmCharts: %v %v", err, res.Overlays[0].Err())
	}
	chartFiles := map[string][]byte{}
	for name, b := range testfs.Read(t, filepath.Join("helm", "testdata", "shop")) {
		chartFiles[name] = b
	}
	out, err := r.RenderChart(context.Background(), render.Chart{Name: "shop", Files: chartFiles, Release: helm.Options{ReleaseName: "shop", Namespace: "prod", KubeVersion: "1.31.4"}})
	if err != nil || out.Problem != nil || len(out.Objects) == 0 {
		t.Errorf("a chart: %v %+v", err, out)
	}
}

// TestTheKustomizeChildBesideIsOfTheSameBuild: driftback-render beside
// driftback is used only when it is the same build: not a copy left by
// another version, not one built with another Go or other modules, not a
// file that cannot run.
func TestTheKustomizeChildBesideIsOfTheSameBuild(t *testing.T) {
	bin := render.KustomizeChild(t)
	self, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if got := childbin.Beside(bin, self); got != bin {
		t.Fatalf("the same build is not used: %q", got)
	}
	changed := func(change func(*debug.BuildInfo)) *debug.BuildInfo {
		b, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		change(b)
		return b
	}
	for name, other := range map[string]*debug.BuildInfo{
		"another version": changed(func(b *debug.BuildInfo) { b.Main.Version = "v9.9.9" }),
		"another Go":      changed(func(b *debug.BuildInfo) { b.GoVersion = "go1.0" }),
		"another commit": changed(func(b *debug.BuildInfo) {
			b.Settings = append(b.Settings, debug.BuildSetting{Key: "vcs.revision", Value: "0123"})
		}),
		"another kustomize": changed(func(b *debug.BuildInfo) { b.Deps = otherVersion(b.Deps, "sigs.k8s.io/kustomize/api") }),
		"another program":   changed(func(b *debug.BuildInfo) { b.Main.Path = "example.com/other" }),
	} {
		if got := childbin.Beside(bin, other); got != "" {
			t.Errorf("%s: used %q", name, got)
		}
	}
	// A build of a changed tree: two such builds of one commit look alike.
	dirty := func(b *debug.BuildInfo) {
		b.Settings = append(b.Settings, debug.BuildSetting{Key: "vcs.revision", Value: "0123"}, debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	}
	if childbin.Same(changed(dirty), changed(dirty)) {
		t.Error("a build of a changed tree is taken for the same build")
	}
	if !childbin.Same(changed(func(*debug.BuildInfo) {}), self) {
		t.Error("the same build is not the same")
	}
	// A build outside version control that names nothing: two such builds
	// of different trees look alike.
	unnamed := func(b *debug.BuildInfo) {
		b.Main.Version = "(devel)"
		b.Settings = slices.DeleteFunc(b.Settings, func(s debug.BuildSetting) bool {
			return s.Key == "-ldflags" || strings.HasPrefix(s.Key, "vcs.")
		})
	}
	if childbin.Same(changed(unnamed), changed(unnamed)) {
		t.Error("a build that names no version, commit or link flags is taken for the same build")
	}
	// A link to it is followed; a file others may write is not used.
	link := filepath.Join(t.TempDir(), childbin.Name)
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	if got := childbin.Beside(link, self); got != bin {
		t.Errorf("a link to the child: %q, want %q", got, bin)
	}
	writable := filepath.Join(t.TempDir(), childbin.Name)
	if b, err := os.ReadFile(bin); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(writable, b, 0o777); err != nil || os.Chmod(writable, 0o777) != nil {
		t.Fatal(err)
	}
	if got := childbin.Beside(writable, self); got != "" {
		t.Errorf("a file anyone may write is used: %q", got)
	}
	noExec := filepath.Join(t.TempDir(), childbin.Name)
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(noExec, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := childbin.Beside(noExec, self); got != "" {
		t.Errorf("a file that cannot run is used: %q", got)
	}
	if got := childbin.Beside(t.TempDir(), self); got != "" {
		t.Errorf("a directory is used: %q", got)
	}
}

// otherVersion is deps with path at another version.
func otherVersion(deps []*debug.Module, path string) []*debug.Module {
	var out []*debug.Module
	for _, m := range deps {
		if m.Path == path {
			m = &debug.Module{Path: m.Path, Version: m.Version + "-other"}
		}
		out = append(out, m)
	}
	return out
}
