package prgen_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/internal/testfs"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/reconcile/prepare"
	"github.com/driftback/driftback/render"
)

// TestAPlainDirectoryIsWrittenInItsManifest: a Flux Kustomization on a
// plain directory of manifests (Flux generates the kustomization, as for
// every `flux bootstrap` cluster directory). A scale is written into the
// manifest file that holds the Deployment, its comment kept; the generated
// kustomization is in no plan, and the new value verifies through Flux's
// own generator.
func TestAPlainDirectoryIsWrittenInItsManifest(t *testing.T) {
	const web = `# The web tier.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 2 # two for the PDB
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: registry.example.com/web:1.0.0
`
	repo := testfs.Tree(t, map[string]string{
		"clusters/prod/web.yaml":       web,
		"clusters/prod/config/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: flags, namespace: shop}\ndata:\n  checkout: v1 # the old flow\n",
		"clusters/prod/legacy.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: legacy, namespace: shop}\ndata: {mode: a}\n",
		"clusters/staging/other.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: shop}\n",
	})
	ks := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": "apps", "namespace": "flux-system"},
		"spec":     map[string]any{"path": "./clusters/prod", "prune": true},
	}}
	tree, err := prepare.FluxTree(repo, "clusters/prod", ks)
	if err != nil {
		t.Fatal(err)
	}
	// The cluster as Flux applied the directory, then scaled and edited by
	// hand.
	r := render.New(render.Options{Origins: true})
	res, err := r.Render(context.Background(), tree, []string{"clusters/prod"})
	if err != nil {
		t.Fatal(err)
	}
	desired, err := res.Overlays[0].Objects()
	if err != nil || len(desired) != 3 {
		t.Fatalf("the directory renders %d objects (%v), want 3", len(desired), err)
	}
	var live []*unstructured.Unstructured
	for _, o := range desired {
		l := o.DeepCopy()
		switch l.GetKind() {
		case "Deployment":
			_ = unstructured.SetNestedField(l.Object, int64(5), "spec", "replicas")
		case "ConfigMap":
			if l.GetName() == "legacy" {
				_ = unstructured.SetNestedField(l.Object, "b", "data", "mode")
			} else {
				_ = unstructured.SetNestedField(l.Object, "v2", "data", "checkout")
			}
		}
		live = append(live, l)
	}
	target, err := drift.Compare(context.Background(), livestate.NewObjectReader(live), drift.Input{Path: "clusters/prod", Head: desired}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var changes []drift.Change
	for _, ch := range target.Drift {
		if ch.Action != drift.ActionUpdate {
			continue
		}
		for i := range ch.Fields {
			ch.Fields[i].Manager = "kubectl-edit" // a dump records no managers
		}
		changes = append(changes, ch)
	}
	plan, err := prgen.Make(context.Background(), prgen.Input{
		Tree: tree, Overlay: "clusters/prod", Renderer: r,
		Drift: changes, Generated: "clusters/prod/kustomization.yaml",
	})
	if err != nil {
		t.Fatal(err)
	}
	// Each edit lands in the manifest that holds the object, a flow-style
	// map's too, its braces kept.
	if len(plan.Codified) != 3 || len(plan.Manual) != 0 {
		t.Fatalf("codified %+v, manual %+v; want the three changes written", plan.Codified, plan.Manual)
	}
	if got := plan.Paths(); strings.Join(got, ",") != "clusters/prod/config/cm.yaml,clusters/prod/legacy.yaml,clusters/prod/web.yaml" {
		t.Fatalf("the plan writes %v, want the three manifests", got)
	}
	if got := string(plan.Files["clusters/prod/legacy.yaml"]); !strings.Contains(got, "data: {mode: b}\n") {
		t.Errorf("the flow-style map is not written in place:\n%s", got)
	}
	if w := string(plan.Files["clusters/prod/web.yaml"]); !strings.Contains(w, "replicas: 5 # two for the PDB") || !strings.HasPrefix(w, "# The web tier.\n") {
		t.Errorf("the manifest lost its comments or its value:\n%s", w)
	}
	if !strings.Contains(string(plan.Files["clusters/prod/config/cm.yaml"]), "checkout: v2 # the old flow") {
		t.Errorf("the ConfigMap is not written:\n%s", plan.Files["clusters/prod/config/cm.yaml"])
	}
}

// TestAnObjectDeepInAStreamIsEditedOnItsOwnLine: the object is the third
// document of its file, after a document of comments only and a separator
// with a comment. The value is written on the object's own line, every
// other byte of the file kept: documents are numbered from the top of the
// stream, not each from its own start.
func TestAnObjectDeepInAStreamIsEditedOnItsOwnLine(t *testing.T) {
	const stream = `apiVersion: v1
kind: ConfigMap
metadata: {name: first, namespace: shop}
data:
  mode: a # first's
---
# nothing but a note
--- # the flags
apiVersion: v1
kind: ConfigMap
metadata: {name: flags, namespace: shop}
data:
  mode: a # the flags'
`
	tree := testfs.Tree(t, map[string]string{"shop/kustomization.yaml": "resources: [all.yaml]\n", "shop/all.yaml": stream})
	r := render.New(render.Options{Origins: true})
	res, err := r.Render(context.Background(), tree, []string{"shop"})
	if err != nil {
		t.Fatal(err)
	}
	desired, err := res.Overlays[0].Objects()
	if err != nil {
		t.Fatal(err)
	}
	var live []*unstructured.Unstructured
	for _, o := range desired {
		l := o.DeepCopy()
		if l.GetName() == "flags" {
			_ = unstructured.SetNestedField(l.Object, "b", "data", "mode")
		}
		live = append(live, l)
	}
	target, err := drift.Compare(context.Background(), livestate.NewObjectReader(live), drift.Input{Path: "shop", Head: desired}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var changes []drift.Change
	for _, ch := range target.Drift {
		if ch.Action == drift.ActionUpdate {
			ch.Fields[0].Manager = "kubectl-edit" // a dump records no managers
			changes = append(changes, ch)
		}
	}
	plan, err := prgen.Make(context.Background(), prgen.Input{Tree: tree, Overlay: "shop", Renderer: r, Drift: changes})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(stream, "mode: a # the flags'", "mode: b # the flags'", 1)
	if len(plan.Codified) != 1 || string(plan.Files["shop/all.yaml"]) != want {
		t.Fatalf("codified %+v, manual %+v; the file is\n%s", plan.Codified, plan.Manual, plan.Files["shop/all.yaml"])
	}
}
