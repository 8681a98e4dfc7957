package helm

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// chartFiles reads a chart directory of testdata as Template takes it.
func chartFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	root := filepath.Join("testdata", dir)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestTemplateRendersAsHelmTemplate: the chart's objects come in install
// order with the user's values over the defaults, a vendored subchart's
// objects among them; hooks are listed, not rendered as objects; the
// chart's crds/ come apart; .Capabilities answers with the cluster's
// version and API versions; NOTES.txt is left out.
func TestTemplateRendersAsHelmTemplate(t *testing.T) {
	r, err := Template(context.Background(), chartFiles(t, "shop"), map[string]any{"replicaCount": 3, "cache": map[string]any{"memory": "128Mi"}},
		Options{ReleaseName: "prod-shop", Namespace: "prod", KubeVersion: "1.31.4", APIVersions: []string{"policy/v1/PodDisruptionBudget"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"kind: PersistentVolumeClaim", "name: prod-shop-data", "replicas: 3", "image: \"registry.example.com/shop:1.2.0\"",
		"name: prod-shop-cache", `memory: "128Mi"`, `kubeVersion: "v1.31.4"`, "kind: PodDisruptionBudget",
	} {
		if !strings.Contains(r.Manifest, want) {
			t.Errorf("the manifest lacks %q:\n%s", want, r.Manifest)
		}
	}
	// Install order: the ConfigMap and the PVC before the Service, the
	// Service before the Deployment.
	order := []string{"kind: ConfigMap", "kind: PersistentVolumeClaim", "kind: Service", "kind: Deployment"}
	for i := 1; i < len(order); i++ {
		if strings.Index(r.Manifest, order[i-1]) > strings.Index(r.Manifest, order[i]) {
			t.Errorf("%s comes after %s", order[i-1], order[i])
		}
	}
	for _, not := range []string{"kind: Job", "CustomResourceDefinition", "The shop runs"} {
		if strings.Contains(r.Manifest, not) {
			t.Errorf("the manifest holds %q", not)
		}
	}
	if len(r.Hooks) != 1 || r.Hooks[0].Kind != "Job" || r.Hooks[0].Name != "prod-shop-migrate" || strings.Join(r.Hooks[0].Events, ",") != "pre-install,pre-upgrade" {
		t.Errorf("hooks %+v, want the migrate Job on pre-install and pre-upgrade", r.Hooks)
	}
	if !strings.Contains(r.CRDs, "name: orders.shop.example.com") {
		t.Errorf("the chart's CRDs: %q", r.CRDs)
	}

	// Without the PDB's API, the chart leaves it out; the subchart's
	// condition turns it off.
	r, err = Template(context.Background(), chartFiles(t, "shop"), map[string]any{"cache": map[string]any{"enabled": false}, "migrate": false},
		Options{ReleaseName: "shop", Namespace: "prod", KubeVersion: "1.31.4"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(r.Manifest, "PodDisruptionBudget") || strings.Contains(r.Manifest, "-cache") || len(r.Hooks) != 0 {
		t.Errorf("the PDB, the cache or the hook rendered when turned off:\n%s\nhooks %+v", r.Manifest, r.Hooks)
	}
	if !strings.Contains(r.Manifest, "name: shop\n") || !strings.Contains(r.Manifest, "replicas: 2") {
		t.Errorf("a release named as the chart, with the default replicas:\n%s", r.Manifest)
	}
}

// TestTemplateRefusesWhatHelmRefuses: a release name Helm refuses, a
// missing subchart, and no Kubernetes version are errors, not output.
func TestTemplateRefusesWhatHelmRefuses(t *testing.T) {
	files := chartFiles(t, "shop")
	ctx := context.Background()
	if _, err := Template(ctx, files, nil, Options{ReleaseName: strings.Repeat("a", 54), Namespace: "prod", KubeVersion: "1.31.4"}); err == nil {
		t.Error("a 54-character release name rendered")
	}
	if _, err := Template(ctx, files, nil, Options{ReleaseName: "shop", Namespace: "prod"}); err == nil {
		t.Error("rendered with no Kubernetes version")
	}
	for name := range files {
		if strings.HasPrefix(name, "charts/") {
			delete(files, name)
		}
	}
	if _, err := Template(ctx, files, nil, Options{ReleaseName: "shop", Namespace: "prod", KubeVersion: "1.31.4"}); err == nil || !strings.Contains(err.Error(), "cache") {
		t.Errorf("a missing subchart: err %v, want it named", err)
	}
}
