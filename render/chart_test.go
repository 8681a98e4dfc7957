package render_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/internal/testfs"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/render/helm"
)

// shopChart reads the shop chart of render/helm's testdata.
func shopChart(t *testing.T) map[string][]byte {
	return testfs.Read(t, filepath.Join("helm", "testdata", "shop"))
}

// TestAChartRendersInTheChild: a chart renders in the sandboxed child as
// helm template renders it, its values over the chart's defaults, with
// hooks and CRDs apart from its objects.
func TestAChartRendersInTheChild(t *testing.T) {
	r := render.New(render.Options{})
	out, err := r.RenderChart(context.Background(), render.Chart{Name: "shop", Files: shopChart(t), Values: []byte("replicaCount: 4\n"),
		Release: helm.Options{ReleaseName: "shop", Namespace: "prod", KubeVersion: "1.31.4"}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Problem != nil {
		t.Fatal(out.Problem)
	}
	var kinds []string
	for _, o := range out.Objects {
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
		if o.GetKind() == "Deployment" {
			if n, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas"); fmt.Sprint(n) != "4" {
				t.Errorf("replicas %v, want the values' 4", n)
			}
		}
	}
	if got := strings.Join(kinds, " "); got != "ConfigMap/shop-cache PersistentVolumeClaim/shop-data Service/shop Deployment/shop" {
		t.Errorf("objects %s", got)
	}
	if len(out.CRDs) != 1 || out.CRDs[0].GetName() != "orders.shop.example.com" || len(out.Hooks) != 1 {
		t.Errorf("CRDs %v, hooks %+v", out.CRDs, out.Hooks)
	}
}

// TestAChartRenderIsCached: the same chart and values render once; what
// the cache gives is a copy, and other values render again.
func TestAChartRenderIsCached(t *testing.T) {
	r := render.New(render.Options{})
	c := render.Chart{Name: "shop", Files: shopChart(t), Values: []byte("replicaCount: 4\n"),
		Release: helm.Options{ReleaseName: "shop", Namespace: "prod", KubeVersion: "1.31.4"}}
	first, err := r.RenderChart(context.Background(), c)
	if err != nil || first.Problem != nil {
		t.Fatal(err, first.Problem)
	}
	first.Objects[0].SetName("changed-by-the-caller")
	again, err := r.RenderChart(context.Background(), c)
	if err != nil || again.Problem != nil {
		t.Fatal(err, again.Problem)
	}
	if r.CachedCharts() != 1 || again.Objects[0].GetName() != "shop-cache" {
		t.Errorf("cache hits %d, first object %s", r.CachedCharts(), again.Objects[0].GetName())
	}
	c.Values = []byte("replicaCount: 5\n")
	if _, err := r.RenderChart(context.Background(), c); err != nil || r.CachedCharts() != 1 {
		t.Errorf("other values: %v, hits %d", err, r.CachedCharts())
	}
}

// TestAHostileChartIsContained: a chart whose template doubles a string
// until it needs terabytes, one that loops for ever, and one larger than
// an overlay may read are each refused with the limit they hit; the
// renderer goes on rendering the next chart.
func TestAHostileChartIsContained(t *testing.T) {
	r := render.New(render.Options{Limits: render.Limits{Memory: 512 << 20, CPU: 3 * time.Second, Timeout: 20 * time.Second, MaxFile: 1 << 20}})
	chart := func(template string) map[string][]byte {
		return map[string][]byte{"Chart.yaml": []byte("apiVersion: v2\nname: bomb\nversion: 0.1.0\n"), "templates/x.yaml": []byte(template)}
	}
	for name, c := range map[string]map[string][]byte{
		"memory": chart(`{{ $s := "xxxxxxxxxxxxxxxx" }}{{ range until 40 }}{{ $s = printf "%s%s" $s $s }}{{ end }}data: {{ $s }}`),
		"cpu":    chart(`{{ range until 2000000000 }}{{ end }}`),
		"size":   map[string][]byte{"Chart.yaml": []byte("apiVersion: v2\nname: big\nversion: 0.1.0\n"), "templates/x.yaml": make([]byte, 2<<20)},
	} {
		out, err := r.RenderChart(context.Background(), render.Chart{Name: name, Files: c,
			Release: helm.Options{ReleaseName: "x", Namespace: "x", KubeVersion: "1.31.4"}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Problem == nil || out.Problem.Reason != render.ReasonLimit {
			t.Errorf("%s: problem %v, want a limit", name, out.Problem)
		}
	}
	out, err := r.RenderChart(context.Background(), render.Chart{Name: "shop", Files: shopChart(t),
		Release: helm.Options{ReleaseName: "shop", Namespace: "prod", KubeVersion: "1.31.4"}})
	if err != nil || out.Problem != nil || len(out.Objects) != 4 {
		t.Errorf("the next chart: %v, %v, %d objects", err, out.Problem, len(out.Objects))
	}
}
