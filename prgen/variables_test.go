package prgen_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/internal/testfs"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/reconcile/prepare"
	"github.com/driftback/driftback/render"
)

// variablesRepo is a Flux repository that shares one directory across
// clusters with postBuild variables: the Kustomization sets REPLICAS
// inline, reads REGISTRY from a ConfigMap in Git and TOKEN from a Secret.
var variablesRepo = map[string]string{
	"apps/api/api.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: shop
spec:
  replicas: ${REPLICAS} # per cluster
  selector:
    matchLabels: {app: api}
  template:
    metadata:
      labels: {app: api}
    spec:
      containers:
      - name: api
        image: ${REGISTRY}/api:2.0.0
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: client
  namespace: shop
data:
  token: ${TOKEN}
  region: ${REGION:=eu-1}
  level: ${LEVEL}
  zone: ${ZONE}
  host: ${ENV}.example.com
  mode: ${MODE}
`,
	"clusters/prod/apps.yaml": `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  path: ./apps/api
  prune: true
  postBuild:
    substitute:
      REPLICAS: "2" # the production floor
      ZONE: ${CLUSTER_ZONE}
      ENV: eu
    substituteFrom:
    - kind: ConfigMap
      name: cluster-vars
    - kind: Secret
      name: tokens
`,
	"clusters/prod/vars.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: cluster-vars
  namespace: flux-system
data:
  REGISTRY: registry.example.com # the mirror
  LEVEL: info
  MODE: slow
`,
	// Another cluster's variables, of the same name: not the values in force.
	"clusters/staging/vars.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: cluster-vars
  namespace: flux-system
data:
  REGISTRY: staging.example.com
  LEVEL: warn
`,
}

// TestAVariableIsWrittenWhereItIsSet: live changes to fields a Flux
// Kustomization substitutes. The replicas, which are ${REPLICAS} alone, are
// written into the Kustomization's postBuild.substitute in its manifest; the
// image, ${REGISTRY} and text, keeps the reference and changes the text;
// the level, ${LEVEL} from the substituteFrom ConfigMap, is written into
// that ConfigMap's manifest, the one of its name whose values are in force.
// Left for a person: a variable Git sets from
// another variable, one Git's ConfigMap does not hold in force, text whose
// variable would move, and a
// field from the Secret's TOKEN is never written; nothing is written over
// a reference, and each write verifies by substituting as Flux does.
func TestAVariableIsWrittenWhereItIsSet(t *testing.T) {
	repo := testfs.Tree(t, variablesRepo)
	ks := &unstructured.Unstructured{}
	if err := sigsyaml.Unmarshal([]byte(variablesRepo["clusters/prod/apps.yaml"]), &ks.Object); err != nil {
		t.Fatal(err)
	}
	tree, err := prepare.FluxTree(repo, "apps/api", ks)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "tok-live-1"
	// ZONE is substituted by a parent Kustomization; MODE is overridden by a
	// ConfigMap that is not in Git.
	values := map[string]string{"REPLICAS": "2", "REGISTRY": "registry.example.com", "TOKEN": secret, "LEVEL": "info", "ZONE": "eu-z", "ENV": "eu", "MODE": "fast"}
	substitute := func(objs []*unstructured.Unstructured, values map[string]string) ([]*unstructured.Unstructured, error) {
		return prepare.FluxFinish(objs, ks, prepare.FluxVariables{Values: values})
	}
	r := render.New(render.Options{Origins: true})
	res, err := r.Render(context.Background(), tree, []string{"apps/api"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := res.Overlays[0].Objects()
	if err != nil {
		t.Fatal(err)
	}
	desired, err := substitute(raw, values)
	if err != nil {
		t.Fatal(err)
	}
	var live []*unstructured.Unstructured
	for _, o := range desired {
		l := o.DeepCopy()
		if l.GetKind() == "Deployment" {
			_ = unstructured.SetNestedField(l.Object, int64(4), "spec", "replicas")
			c, _, _ := unstructured.NestedSlice(l.Object, "spec", "template", "spec", "containers")
			c[0].(map[string]any)["image"] = "registry.example.com/api:2.1.0"
			_ = unstructured.SetNestedSlice(l.Object, c, "spec", "template", "spec", "containers")
		} else {
			_ = unstructured.SetNestedField(l.Object, "tok-rotated", "data", "token")
			_ = unstructured.SetNestedField(l.Object, "us-2", "data", "region")
			_ = unstructured.SetNestedField(l.Object, "debug", "data", "level")
			_ = unstructured.SetNestedField(l.Object, "us-z", "data", "zone")
			_ = unstructured.SetNestedField(l.Object, "neu.example.org", "data", "host")
			_ = unstructured.SetNestedField(l.Object, "faster", "data", "mode")
		}
		live = append(live, l)
	}
	target, err := drift.Compare(context.Background(), livestate.NewObjectReader(live), drift.Input{Path: "apps/api", Head: desired}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var changes []drift.Change
	for _, ch := range target.Drift {
		for i := range ch.Fields {
			ch.Fields[i].Manager = "kubectl-edit"
		}
		changes = append(changes, ch)
	}
	plan, err := prgen.Make(context.Background(), prgen.Input{
		Tree: tree, Overlay: "apps/api", Renderer: r, Drift: changes, Generated: "apps/api/kustomization.yaml",
		Variables: &prgen.Variables{Values: values, Secret: map[string]bool{"TOKEN": true}, Substitute: substitute,
			Kustomization: "flux-system/apps", Inline: map[string]bool{"REPLICAS": true, "ZONE": true, "ENV": true}, ConfigMaps: []string{"flux-system/cluster-vars"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]prgen.Codified{}
	for _, c := range plan.Codified {
		byPath[c.Path] = c
	}
	if c := byPath[".spec.replicas"]; c.File != "clusters/prod/apps.yaml" || c.Strategy != prgen.StrategyVariable {
		t.Errorf("replicas written to %q by %q, want the Kustomization's substitute", c.File, c.Strategy)
	}
	if c := byPath[`.spec.template.spec.containers[name="api"].image`]; c.File != "apps/api/api.yaml" {
		t.Errorf("the image written to %q, want the manifest with the reference kept", c.File)
	}
	manual := map[string]string{}
	for _, m := range plan.Manual {
		manual[m.Path] = m.Reason
	}
	if !strings.Contains(manual[".data.token"], "Secret's") {
		t.Errorf("the Secret variable's field: %q, want it left for a person", manual[".data.token"])
	}
	for field, why := range map[string]string{
		".data.zone": "from another variable",  // never written over ${CLUSTER_ZONE}
		".data.host": "does not keep",          // the variable's value moved in the text
		".data.mode": "not the value in force", // Git's ConfigMap is overridden
	} {
		if !strings.Contains(manual[field], why) {
			t.Errorf("%s: %q, want it left for a person (%s)", field, manual[field], why)
		}
	}
	if !strings.Contains(manual[".data.region"], "set in no ConfigMap") {
		t.Errorf("a variable set nowhere in Git: %q, want it left for a person", manual[".data.region"])
	}
	paths := plan.Paths()
	sort.Strings(paths)
	if c := byPath[".data.level"]; c.File != "clusters/prod/vars.yaml" || c.Strategy != prgen.StrategyVariable {
		t.Errorf("the level written to %q by %q, want the substituteFrom ConfigMap in Git", c.File, c.Strategy)
	}
	if !strings.Contains(string(plan.Files["clusters/prod/vars.yaml"]), "LEVEL: debug") {
		t.Errorf("the ConfigMap's variable is not written:\n%s", plan.Files["clusters/prod/vars.yaml"])
	}
	if strings.Join(paths, ",") != "apps/api/api.yaml,clusters/prod/apps.yaml,clusters/prod/vars.yaml" {
		t.Fatalf("the plan writes %v", paths)
	}
	ksFile, api := string(plan.Files["clusters/prod/apps.yaml"]), string(plan.Files["apps/api/api.yaml"])
	if !strings.Contains(ksFile, `REPLICAS: "4" # the production floor`) {
		t.Errorf("the Kustomization's substitute is not written, quoted, with its comment:\n%s", ksFile)
	}
	if !strings.Contains(api, "image: ${REGISTRY}/api:2.1.0") || !strings.Contains(api, "replicas: ${REPLICAS} # per cluster") || !strings.Contains(api, "token: ${TOKEN}") {
		t.Errorf("a reference was written over:\n%s", api)
	}
	for f, b := range plan.Files {
		if strings.Contains(string(b), secret) || strings.Contains(string(b), "tok-rotated") {
			t.Errorf("%s holds a Secret's value", f)
		}
	}
}
