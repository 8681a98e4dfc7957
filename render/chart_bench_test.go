package render_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/render/helm"
)

// BenchmarkChart renders the shape of a large public chart (largeChart:
// 100 templates, about 10,000 lines of output) for one release: cold (the
// values change each time, so nothing is cached: a render child starts and
// Helm renders), cached (the same chart and values again), and, as the
// baseline, helm template of the same Helm version (from DRIFTBACK_HELM,
// which make bench builds; without it the baseline is skipped).
func BenchmarkChart(b *testing.B) {
	files := largeChart(100)
	opts := helm.Options{ReleaseName: "big", Namespace: "apps", KubeVersion: "1.33.0"}
	r := render.New(render.Options{})
	render1 := func(b *testing.B, values string) {
		out, err := r.RenderChart(context.Background(), render.Chart{Name: "large", Files: files, Values: []byte(values), Release: opts})
		if err != nil || out.Problem != nil {
			b.Fatal(err, out.Problem)
		}
		if len(out.Objects) != 200 {
			b.Fatalf("%d objects, want 200", len(out.Objects))
		}
	}
	b.Run("driftback-cold", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			render1(b, fmt.Sprintf("replicaCount: %d\n", 1000+i))
		}
	})
	b.Run("driftback-cached", func(b *testing.B) {
		render1(b, "replicaCount: 3\n")
		for b.Loop() {
			render1(b, "replicaCount: 3\n")
		}
	})
	b.Run("helm-template", func(b *testing.B) {
		dir := os.Getenv("DRIFTBACK_HELM")
		if dir == "" {
			b.Skip("DRIFTBACK_HELM is not set (make bench builds helm): the helm template baseline is not measured")
		}
		tmp := b.TempDir()
		for name, content := range files {
			p := filepath.Join(tmp, "chart", filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(p, content, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		i := 0
		for b.Loop() {
			i++
			cmd := exec.Command(filepath.Join(dir, "helm"), "template", filepath.Join(tmp, "chart"), "--name-template", "big",
				"--namespace", "apps", "--kube-version", "1.33.0", "--set", fmt.Sprintf("replicaCount=%d", 1000+i))
			cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+tmp, "HELM_CONFIG_HOME="+tmp, "HELM_DATA_HOME="+tmp)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("helm template: %v\n%s", err, out)
			}
		}
	})
}
