package render_test

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/internal/testfs"
	"github.com/driftback/driftback/render"
)

// TestHelmChartsRenderAsKustomizeDoes: an overlay whose bases inflate Helm
// charts (helmCharts: a local chart with valuesInline merged over its
// values.yaml, CRDs and hooks; another with valuesFile, valuesMerge merge,
// additionalValuesFiles and skipHooks; namespaces set by the kustomization
// and inherited from the overlay) renders in driftback's child, with the
// Helm SDK, object for object as kustomize build --enable-helm renders it
// with the helm program of the same version.
func TestHelmChartsRenderAsKustomizeDoes(t *testing.T) {
	helmBin := helmBinary(t)
	dir := t.TempDir()
	chart := testfs.Read(t, filepath.Join("helm", "testdata", "shop"))
	files := map[string]string{
		"overlay/kustomization.yaml": "namespace: shop\nresources: [../web, ../worker, ../legacy, cm.yaml]\ncommonLabels: {team: shop}\n",
		"overlay/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: fast}\n",
		"web/kustomization.yaml": "helmCharts:\n- name: shop\n  releaseName: web\n  includeCRDs: true\n  valuesInline:\n    replicaCount: 3\n" +
			"    image: {tag: \"2.0\"}\n    storage: {size: 5Gi}\n",
		"worker/kustomization.yaml": "namespace: jobs\nhelmGlobals: {chartHome: vendor}\nhelmCharts:\n- name: shop\n  releaseName: worker\n  skipHooks: true\n" +
			"  valuesFile: values/base.yaml\n  valuesMerge: merge\n  valuesInline: {replicaCount: 9, migrate: false}\n  additionalValuesFiles: [values/extra.yaml]\n",
		"worker/values/base.yaml":  "replicaCount: 1\nimage: {repository: registry.example.com/worker, tag: \"1.1\"}\nstorage: {size: 2Gi}\nmigrate: true\ncache: {enabled: false}\n",
		"worker/values/extra.yaml": "storage: {size: 8Gi}\n",
		// The legacy form, which kustomize turns into helmCharts.
		"legacy/kustomization.yaml": "helmChartInflationGenerator:\n- chartName: shop\n  releaseName: old\n  releaseNamespace: legacy\n" +
			"  valuesLocal: {replicaCount: 4, migrate: false}\n",
	}
	for name, b := range chart {
		files["web/charts/shop/"+name] = string(b)
		files["worker/vendor/shop/"+name] = string(b)
		files["legacy/charts/shop/"+name] = string(b)
	}
	testfs.Write(t, dir, files)

	// kustomize build --enable-helm, with the helm program.
	opts := krusty.MakeDefaultOptions()
	opts.PluginConfig = types.EnabledPluginConfig(types.BploUseStaticallyLinked)
	opts.PluginConfig.HelmConfig = types.HelmConfig{Enabled: true, Command: helmBin, KubeVersion: "1.31.0"}
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), filepath.Join(dir, "overlay"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*unstructured.Unstructured{}
	for _, res := range m.Resources() {
		y, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(y, &u.Object); err != nil {
			t.Fatal(err)
		}
		want[key(u)] = u
	}

	tree, err := render.DirTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := render.New(render.Options{}).RenderWith(context.Background(), tree, []string{"overlay"}, render.BuildOptions{EnableHelm: true, HelmKubeVersion: "1.31.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Overlays[0].Err(); err != nil {
		t.Fatal(err)
	}
	objs, err := res.Overlays[0].Objects()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		got[key(o)] = o
	}
	t.Logf("%d objects", len(want))
	legacy := 0
	for _, o := range got {
		if o.GetLabels()["app.kubernetes.io/instance"] == "old" || strings.HasPrefix(o.GetName(), "old-") {
			legacy++
		}
	}
	if legacy == 0 {
		t.Errorf("nothing of the legacy helmChartInflationGenerator is rendered")
	}
	if len(got) != len(want) || len(want) < 8 {
		t.Errorf("%d objects, kustomize build --enable-helm renders %d", len(got), len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s: kustomize renders it, driftback does not", k)
		case !reflect.DeepEqual(g.Object, w.Object):
			t.Errorf("%s differs:\ndriftback: %v\nkustomize: %v", k, g.Object, w.Object)
		}
	}
	for k := range got {
		if want[k] == nil {
			t.Errorf("%s: driftback renders it, kustomize does not", k)
		}
	}
	// Without --enable-helm it is refused, as kustomize refuses it.
	res, err = render.New(render.Options{}).Render(context.Background(), tree, []string{"overlay"})
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Overlays[0].Problems; len(p) == 0 || p[0].Reason != render.ReasonHelm {
		t.Errorf("without --enable-helm: %v", p)
	}
}
