package prgen_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/render"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// fixture copies testdata/repo into a temporary folder with the test's
// namespace in place of NS.
func fixture(t *testing.T, ns string) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir("testdata/repo", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("testdata/repo", p)
		out := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, []byte(strings.ReplaceAll(string(b), "NS", ns)), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPlanCodifiesManualChanges applies the staging overlay to the real
// apiserver as Flux would, then changes the cluster as people do during an
// incident: a scale, an image set by hand, an env var edited on a Deployment
// from a base that production shares, a ConfigMap edited, a Secret edited.
// The plan must write each change where it belongs, keep every comment, never
// touch the shared base, and never write the Secret.
func TestPlanCodifiesManualChanges(t *testing.T) {
	env := kubetest.New(t)
	ns := env.Namespace
	dir := fixture(t, ns)
	tree, err := render.DirTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := render.New(render.Options{Origins: true})
	res, err := r.Render(context.Background(), tree, []string{"overlays/staging"})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := res.Overlays[0].Objects()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kubetest.Apply(t, env.Config, "kustomize-controller", objs...)
	dyn, err := dynamic.NewForConfig(env.Setup)
	if err != nil {
		t.Fatal(err)
	}
	deploy := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(ns)
	if _, err := deploy.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{FieldManager: "kubectl"}, "scale"); err != nil {
		t.Fatal(err)
	}
	edit := func(res dynamic.ResourceInterface, name, manager string, change func(*unstructured.Unstructured)) {
		t.Helper()
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(u)
		if _, err := res.Update(ctx, u, metav1.UpdateOptions{FieldManager: manager}); err != nil {
			t.Fatal(err)
		}
	}
	edit(deploy, "web", "kubectl-set", func(u *unstructured.Unstructured) {
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		cs[0].(map[string]any)["image"] = "registry.example.com/web:1.0.1"
		_ = unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers")
	})
	edit(deploy, "web", "kubectl-edit", func(u *unstructured.Unstructured) {
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		cs[0].(map[string]any)["env"] = []any{map[string]any{"name": "MODE", "value": "debug"}}
		_ = unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers")
	})
	edit(dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns), "settings", "kubectl-edit", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "red", "data", "color")
	})
	edit(dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace(ns), "token", "kubectl-edit", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "UFJHRU4tQ0FOQVJZLWxpdmU=", "data", "token")
	})

	reader, err := livestate.NewClusterReader(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	target, err := drift.Compare(ctx, reader, drift.Input{Path: "overlays/staging", Head: objs}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	plan, err := prgen.Make(ctx, prgen.Input{Tree: tree, Overlay: "overlays/staging", Renderer: r, Drift: target.Drift})
	if err != nil {
		t.Fatal(err)
	}

	wantFiles := []string{"overlays/staging/driftback-deployment-web.yaml", "overlays/staging/kustomization.yaml", "overlays/staging/settings.yaml"}
	if diff := cmp.Diff(wantFiles, plan.Paths()); diff != "" {
		t.Fatalf("changed files (-want +got):\n%s", diff)
	}
	for _, f := range plan.Paths() {
		got := strings.ReplaceAll(string(plan.Files[f]), ns, "NS")
		golden := filepath.Join("testdata/golden", strings.ReplaceAll(f, "/", "_"))
		if *update {
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", f, diff)
		}
		if strings.Contains(got, "PRGEN-CANARY") || strings.Contains(got, "UFJHRU4") {
			t.Errorf("%s holds a Secret value", f)
		}
	}
	strategies := map[string]prgen.Strategy{}
	for _, c := range plan.Codified {
		strategies[c.Path] = c.Strategy
	}
	wantStrategies := map[string]prgen.Strategy{
		".spec.replicas": prgen.StrategyReplicas,
		`.spec.template.spec.containers[name="web"].image`:                  prgen.StrategyImages,
		`.spec.template.spec.containers[name="web"].env[name="MODE"].value`: prgen.StrategyPatch,
		".data.color": prgen.StrategyResource,
	}
	if diff := cmp.Diff(wantStrategies, strategies); diff != "" {
		t.Errorf("strategies (-want +got):\n%s", diff)
	}
	if len(plan.Manual) != 0 {
		t.Errorf("fields left for a person: %+v", plan.Manual)
	}
	if len(plan.Secrets) != 1 || plan.Secrets[0].Object != "Secret/"+ns+"/token" || strings.Join(plan.Secrets[0].Keys, ",") != "token" {
		t.Errorf("secrets: %+v", plan.Secrets)
	}

	// The edited overlay renders to the live values: no drift is left.
	res, err = r.Render(ctx, tree.With(plan.Files), []string{"overlays/staging"})
	if err != nil {
		t.Fatal(err)
	}
	after, err := res.Overlays[0].Objects()
	if err != nil {
		t.Fatal(err)
	}
	left, err := drift.Compare(ctx, reader, drift.Input{Path: "overlays/staging", Head: after}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var remaining []string
	for _, ch := range left.Drift {
		for _, f := range ch.Fields {
			if ch.Kind != "Secret" {
				remaining = append(remaining, ch.Kind+" "+f.Path)
			}
		}
	}
	sort.Strings(remaining)
	if len(remaining) > 0 {
		t.Errorf("drift left after codifying: %v", remaining)
	}
}
