package prepare_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/internal/testfs"
	. "github.com/driftback/driftback/reconcile/prepare"
	"github.com/driftback/driftback/render"
)

// fluxRepo is a repository Flux Kustomizations point into: an overlay that
// loads a file from outside its directory (Flux allows it), a plain
// directory of manifests with a nested kustomization, and a component.
var fluxRepo = map[string]string{
	"base/deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.example.com/web:1.0.0
        env:
        - {name: CLUSTER, value: "${CLUSTER_NAME}"}
        - {name: REGION, value: "${REGION:=eu-west-1}"}
`,
	"shared/settings.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {cluster: "${CLUSTER_NAME}", token: "${API_TOKEN}"}
`,
	"apps/prod/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../../base/deploy.yaml
- ../../shared/settings.yaml
- literal.yaml
`,
	"apps/prod/literal.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: literal
  annotations: {kustomize.toolkit.fluxcd.io/substitute: disabled}
data: {text: "${NOT_A_VARIABLE}"}
`,
	"components/monitoring/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
patches:
- patch: |
    - op: add
      path: /metadata/annotations
      value: {prometheus.io/scrape: "true"}
  target: {kind: Deployment}
`,
	"plain/a.yaml": `apiVersion: v1
kind: ServiceAccount
metadata: {name: a}
`,
	"plain/more/b.yml": `apiVersion: v1
kind: ServiceAccount
metadata: {name: b}
`,
	"plain/nested/kustomization.yaml": `resources: [c.yaml]
namePrefix: nested-
`,
	"plain/nested/c.yaml": `apiVersion: v1
kind: ServiceAccount
metadata: {name: c}
`,
	"plain/nested/ignored.yaml": `apiVersion: v1
kind: ServiceAccount
metadata: {name: not-in-the-nested-kustomization}
`,
}

const fluxKS = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: flux-system}
spec:
  path: PATH
  targetNamespace: shop
  namePrefix: prod-
  components: [../../components/monitoring, ../../components/missing]
  ignoreMissingComponents: true
  images:
  - {name: registry.example.com/web, newTag: 2.0.0}
  patches:
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: web}
      spec: {replicas: 3}
    target: {kind: Deployment, name: web}
  commonMetadata:
    labels: {team: shop}
    annotations: {owner: platform}
  postBuild:
    substitute: {CLUSTER_NAME: prod-eu-1}
`

// TestFluxBuildIsKustomizeControllers renders Flux Kustomizations through
// the sandboxed child and compares every object with what
// kustomize-controller's own library produces from the same files on disk:
// its generator, its build, its substitution and its commonMetadata.
func TestFluxBuildIsKustomizeControllers(t *testing.T) {
	dir := t.TempDir()
	testfs.Write(t, dir, fluxRepo)
	tree, err := render.DirTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	vars := FluxVariables{Values: map[string]string{"CLUSTER_NAME": "prod-eu-1", "API_TOKEN": "s3cr3t-value"}, Hidden: []string{"s3cr3t-value"}}
	r := render.New(render.Options{Limits: render.DefaultLimits()})
	for _, path := range []string{"apps/prod", "plain"} {
		t.Run(path, func(t *testing.T) {
			ks := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(strings.ReplaceAll(fluxKS, "PATH", "./"+path)), &ks.Object); err != nil {
				t.Fatal(err)
			}
			ft, err := FluxTree(tree, path, ks)
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.RenderWith(context.Background(), ft, []string{path}, render.BuildOptions{LoadAnywhere: true})
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
			got, err := FluxFinish(objs, ks, vars)
			if err != nil {
				t.Fatal(err)
			}
			want := kustomizeController(t, fluxRepo, path, ks, vars.Values)
			if diff := cmp.Diff(byName(want), byName(got)); diff != "" {
				t.Errorf("driftback's build differs from kustomize-controller's (-want +got)\n%s", diff)
			}
			if len(got) == 0 {
				t.Fatal("nothing rendered")
			}
		})
	}
}

// kustomizeController builds as kustomize-controller does, on disk.
func kustomizeController(t *testing.T, files map[string]string, path string, ks *unstructured.Unstructured, vars map[string]string) []*unstructured.Unstructured {
	t.Helper()
	root := t.TempDir()
	testfs.Write(t, root, files)
	dir := filepath.Join(root, filepath.FromSlash(path))
	if _, err := fluxkustomize.NewGenerator(root, *ks).WriteFile(dir); err != nil {
		t.Fatal(err)
	}
	m, err := fluxkustomize.SecureBuild(root, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	inline := ks.DeepCopy()
	values := map[string]any{}
	for k, v := range vars {
		values[k] = v
	}
	if err := unstructured.SetNestedField(inline.Object, values, "spec", "postBuild", "substitute"); err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, res := range m.Resources() {
		done, err := fluxkustomize.SubstituteVariables(context.Background(), nil, *inline, res,
			fluxkustomize.SubstituteWithDryRun(true), fluxkustomize.SubstituteWithStrict(true))
		if err != nil {
			t.Fatal(err)
		}
		if done == nil {
			done = res
		}
		// kustomize-controller sends the object to the apiserver as JSON,
		// which reads kyaml's Go ints as JSON numbers.
		b, err := done.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := utiljson.Unmarshal(b, &obj); err != nil {
			t.Fatal(err)
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	labels, _, _ := unstructured.NestedStringMap(ks.Object, "spec", "commonMetadata", "labels")
	annotations, _, _ := unstructured.NestedStringMap(ks.Object, "spec", "commonMetadata", "annotations")
	ssautil.SetCommonMetadata(out, labels, annotations)
	ssautil.SetCommonMetadata(out, map[string]string{"kustomize.toolkit.fluxcd.io/name": ks.GetName(), "kustomize.toolkit.fluxcd.io/namespace": ks.GetNamespace()}, nil)
	return out
}

func byName(objs []*unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		out[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o.Object
	}
	return out
}

func TestFluxSubstitutionIsStrictAndHidesSecretValues(t *testing.T) {
	ks := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(fluxKS, "PATH", "./apps/prod")), &ks.Object); err != nil {
		t.Fatal(err)
	}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "x"}, "data": map[string]any{"a": "${MISSING}", "b": "s3cr3t-value"}}}
	_, err := FluxFinish([]*unstructured.Unstructured{cm}, ks, FluxVariables{Values: map[string]string{"CLUSTER_NAME": "c"}, Hidden: []string{"s3cr3t-value"}})
	if err == nil || !strings.Contains(err.Error(), "MISSING") {
		t.Fatalf("a variable without a value or default fails the build, as kustomize-controller's strict default does: %v", err)
	}
	bad := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "x"}, "data": map[string]any{"a": "${"}}}
	_, err = FluxFinish([]*unstructured.Unstructured{bad}, ks, FluxVariables{Values: map[string]string{"CLUSTER_NAME": "s3cr3t-value"}, Hidden: []string{"s3cr3t-value"}})
	if err != nil && strings.Contains(err.Error(), "s3cr3t-value") {
		t.Errorf("an error shows a Secret's value: %v", err)
	}
}

func TestArgoCDTreeEditsTheKustomizationAsKustomizeEditDoes(t *testing.T) {
	dir := t.TempDir()
	testfs.Write(t, dir, map[string]string{
		"app/kustomization.yaml": `resources: [deploy.yaml]
images:
- {name: registry.example.com/web, newTag: 1.0.0}
commonLabels: {app: web}
`,
		"app/deploy.yaml": fluxRepo["base/deploy.yaml"],
		"components/extra/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
resources: [sa.yaml]
`,
		"components/extra/sa.yaml": "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: extra}\n",
	})
	tree, err := render.DirTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := ArgoCDKustomize{
		NamePrefix: "prod-", Namespace: "shop",
		Images:       []string{"registry.example.com/web:2.0.0", "busybox=mirror.example.com/busybox:1.36"},
		CommonLabels: map[string]string{"team": "shop"}, CommonAnnotations: map[string]string{"owner": "platform"},
		Replicas:   map[string]int64{"web": 4},
		Patches:    []map[string]any{{"patch": "- op: add\n  path: /spec/template/spec/priorityClassName\n  value: high\n", "target": map[string]any{"kind": "Deployment"}}},
		Components: []string{"../components/extra"},
	}
	at, err := ArgoCDTree(tree, "app", opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := render.New(render.Options{}).Render(context.Background(), at, []string{"app"})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Overlays[0].Err(); err != nil {
		t.Fatal(err)
	}
	objs, _ := res.Overlays[0].Objects()
	var names []string
	for _, o := range objs {
		names = append(names, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
		if o.GetLabels()["team"] != "shop" || o.GetAnnotations()["owner"] != "platform" {
			t.Errorf("%s lacks the Application's common label and annotation: %v %v", o.GetName(), o.GetLabels(), o.GetAnnotations())
		}
		if o.GetKind() == "Deployment" {
			img, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if got := img[0].(map[string]any)["image"]; got != "registry.example.com/web:2.0.0" {
				t.Errorf("image = %v, want the Application's tag", got)
			}
			if r, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas"); fmt.Sprint(r) != "4" {
				t.Errorf("replicas = %#v, want the Application's 4", r)
			}
			if p, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "priorityClassName"); p != "high" {
				t.Errorf("the Application's patch is not applied: %q", p)
			}
		}
	}
	sort.Strings(names)
	if diff := cmp.Diff([]string{"Deployment/shop/prod-web", "ServiceAccount/shop/prod-extra"}, names); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	// An existing label is kept unless the Application forces it, as
	// `kustomize edit add label` refuses to overwrite one.
	if _, err := ArgoCDTree(tree, "app", ArgoCDKustomize{CommonLabels: map[string]string{"app": "other"}}); err == nil {
		t.Error("a conflicting common label without forceCommonLabels is accepted")
	}
	if _, err := ArgoCDTree(tree, "app", ArgoCDKustomize{CommonLabels: map[string]string{"app": "other"}, ForceCommonLabels: true}); err != nil {
		t.Errorf("forceCommonLabels: %v", err)
	}
}

// TestFluxSubstitutionGivesJSONTypes: after postBuild, an object holds what
// the apiserver's decoder gives (int64, float64, bool, []any), never kyaml's
// Go ints, whether its numbers came from a variable or were written as they
// are (a HelmRelease's install.remediation.retries: 3).
func TestFluxSubstitutionGivesJSONTypes(t *testing.T) {
	ks := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(fluxKS, "PATH", "./apps/prod")), &ks.Object); err != nil {
		t.Fatal(err)
	}
	objs, err := render.ParseObjects([]byte(`apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: podinfo, namespace: shop}
spec:
  interval: 5m
  install: {remediation: {retries: 3}}
  values:
    replicaCount: ${REPLICAS}
    ratio: 0.25
    enabled: ${ENABLED}
    hosts: [a, "${CLUSTER_NAME}"]
`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := FluxFinish(objs, ks, FluxVariables{Values: map[string]string{"CLUSTER_NAME": "c", "REPLICAS": "2", "ENABLED": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	spec := out[0].Object["spec"].(map[string]any)
	values := spec["values"].(map[string]any)
	for what, got := range map[string][2]any{
		"retries":      {spec["install"].(map[string]any)["remediation"].(map[string]any)["retries"], int64(3)},
		"replicaCount": {values["replicaCount"], int64(2)},
		"ratio":        {values["ratio"], 0.25},
		"enabled":      {values["enabled"], true},
	} {
		if got[0] != got[1] {
			t.Errorf("%s = %#v (%T), want %#v", what, got[0], got[0], got[1])
		}
	}
	if hosts, ok := values["hosts"].([]any); !ok || len(hosts) != 2 || hosts[1] != "c" {
		t.Errorf("hosts = %#v", values["hosts"])
	}
}
