package prgen_test

import (
	"bytes"
	"context"
	"fmt"
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
)

// shapedRepo holds overlays shaped like public environment-promotion
// repositories: values set by strategic-merge patch files under the
// deprecated patchesStrategicMerge, a shared component and a namePrefix; a
// JSON 6902 patch in a file and another inline, an inline strategic-merge
// patch; a multi-line script in the
// overlay's own ConfigMap; and an overlay that sets no namespace over a base
// that does.
var shapedRepo = map[string]string{
	"base/web/kustomization.yaml": "resources:\n- deployment.yaml\n",
	"base/web/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: registry.example.com/app:3.0
        env:
        - name: MODE
          value: normal
`,
	"base/api/kustomization.yaml": "resources:\n- deployment.yaml\n",
	"base/api/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: NS
spec:
  replicas: 1
  selector:
    matchLabels: {app: api}
  template:
    metadata:
      labels: {app: api}
    spec:
      containers:
      - name: api
        image: registry.example.com/api:1.0
        env:
        - name: LEVEL
          value: info
`,
	"components/monitoring/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
commonAnnotations:
  prometheus.io/scrape: "true"
`,
	"envs/prod-eu/kustomization.yaml": `namespace: NS
namePrefix: prod-eu-
resources:
- ../../base/web
components:
- ../../components/monitoring
patchesStrategicMerge:
- replicas.yml
- version.yml
`,
	"envs/prod-eu/replicas.yml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 8 # peak season
`,
	"envs/prod-eu/version.yml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
      - name: app
        image: registry.example.com/app:3.0
`,
	"envs/json/kustomization.yaml": `namespace: NS
nameSuffix: -json
resources:
- ../../base/web
- script.yaml
patches:
- path: replicas.yaml
  target:
    kind: Deployment
    name: web
- patch: |
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: script
    data:
      mode: fast # the default
patchesJson6902:
- target:
    group: apps
    version: v1
    kind: Deployment
    name: web
  patch: |-
    - op: replace
      path: /spec/template/spec/containers/0/env
      value:
      - name: MODE
        value: batch
`,
	"envs/json/replicas.yaml": `- op: replace
  path: /spec/replicas
  value: 2
`,
	"envs/json/script.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: script
data:
  run.sh: |
    #!/bin/sh
    echo start
    exec /app
`,
	"envs/plain/kustomization.yaml": `resources:
  - ../../base/api
patchesStrategicMerge:
  - labels.yml
`,
	"envs/plain/labels.yml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: NS
  labels:
    tier: backend
`,
}

// TestWriteBackLandsWhereTheValueIsSet codifies, on the real apiserver, the
// changes people make during an incident in overlays shaped like real
// repositories, and requires each edit in the file that sets the value
// today, changing only the lines of that value: the strategic-merge patch
// files of a namePrefix overlay with a component, a JSON 6902 patch file and
// an inline one, a multi-line script kept as a block; and a new patch, listed
// the way the kustomization already lists its patches and naming the
// namespace its object has, where no file sets the value.
func TestWriteBackLandsWhereTheValueIsSet(t *testing.T) {
	env := kubetest.New(t)
	ns := env.Namespace
	ctx := context.Background()
	files := map[string]string{}
	for name, content := range shapedRepo {
		files[name] = strings.ReplaceAll(content, "NS", ns)
	}
	overlays := []string{"envs/json", "envs/plain", "envs/prod-eu"}
	tree, r, rendered := appliedTree(t, env, files, overlays...)

	dyn, err := dynamic.NewForConfig(env.Setup)
	if err != nil {
		t.Fatal(err)
	}
	deploys := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(ns)
	scale := func(name string, n int) {
		t.Helper()
		body := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
		if _, err := deploys.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "kubectl"}, "scale"); err != nil {
			t.Fatal(err)
		}
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
	container := func(field string, v any) func(*unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			cs[0].(map[string]any)[field] = v
			_ = unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers")
		}
	}
	scale("prod-eu-web", 12)
	edit(deploys, "prod-eu-web", "kubectl-set", container("image", "registry.example.com/app:3.1"))
	scale("web-json", 5)
	edit(deploys, "web-json", "kubectl-edit", container("env", []any{map[string]any{"name": "MODE", "value": "debug"}}))
	edit(dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns), "script-json", "kubectl-edit", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "#!/bin/sh\necho start\nulimit -n 65536\nexec /app\n", "data", "run.sh")
		_ = unstructured.SetNestedField(u.Object, "safe", "data", "mode")
	})
	edit(deploys, "api", "kubectl-edit", container("env", []any{map[string]any{"name": "LEVEL", "value": "debug"}}))

	reader, err := livestate.NewClusterReader(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	// want: for each overlay, the lines each file gains (the lines it loses
	// are the same lines' old values).
	want := map[string]map[string][]string{
		"envs/prod-eu": {
			"envs/prod-eu/replicas.yml": {"  replicas: 12 # peak season"},
			"envs/prod-eu/version.yml":  {"        image: registry.example.com/app:3.1"},
		},
		"envs/json": {
			"envs/json/replicas.yaml":      {"  value: 5"},
			"envs/json/kustomization.yaml": {"      mode: safe # the default", "        value: debug"},
			"envs/json/script.yaml":        {"    ulimit -n 65536"},
		},
		"envs/plain": {
			"envs/plain/kustomization.yaml": {"  - driftback-deployment-api.yaml"},
			"envs/plain/driftback-deployment-api.yaml": {"# Written by driftback: codifies a change made in the cluster outside Git.",
				"apiVersion: apps/v1", "kind: Deployment", "metadata:", "  name: api", "  namespace: NS", "spec:", "  template:", "    spec:", "      containers:",
				"      - name: api", "        env:", "        - name: LEVEL", "          value: debug"},
		},
	}
	for _, overlay := range overlays {
		t.Run(overlay, func(t *testing.T) {
			target, err := drift.Compare(ctx, reader, drift.Input{Path: overlay, Head: rendered[overlay]}, drift.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			plan, err := prgen.Make(ctx, prgen.Input{Tree: tree, Overlay: overlay, Renderer: r, Drift: target.Drift})
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Manual) > 0 {
				t.Errorf("left for a person: %+v", plan.Manual)
			}
			got := map[string][]string{}
			for _, f := range plan.Paths() {
				before, _ := tree.ReadFile(f) // absent for a new file
				added := addedLines(before, plan.Files[f])
				for i := range added {
					added[i] = strings.ReplaceAll(added[i], ns, "NS")
				}
				got[f] = added
			}
			if diff := cmp.Diff(want[overlay], got); diff != "" {
				t.Errorf("lines written (-want +got):\n%s", diff)
				for _, f := range plan.Paths() {
					t.Logf("%s:\n%s", f, plan.Files[f])
				}
			}
			// The edited overlay renders what the cluster runs.
			res, err := r.Render(ctx, tree.With(plan.Files), []string{overlay})
			if err != nil {
				t.Fatal(err)
			}
			after, err := res.Overlays[0].Objects()
			if err != nil {
				t.Fatal(err)
			}
			left, err := drift.Compare(ctx, reader, drift.Input{Path: overlay, Head: after}, drift.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			var remaining []string
			for _, ch := range left.Drift {
				for _, f := range ch.Fields {
					remaining = append(remaining, ch.Kind+"/"+ch.Name+" "+f.Path)
				}
			}
			sort.Strings(remaining)
			if len(remaining) > 0 {
				t.Errorf("drift left after codifying: %v", remaining)
			}
		})
	}
}

// addedLines are the lines of after that are not in before, by the longest
// common subsequence of their lines: what a line diff shows as added.
func addedLines(before, after []byte) []string {
	var b []string
	if len(bytes.TrimSpace(before)) > 0 {
		b = strings.Split(strings.TrimSuffix(string(before), "\n"), "\n")
	}
	a := strings.Split(strings.TrimSuffix(string(after), "\n"), "\n")
	// lcs[i][j] is the common length of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	for i, j := 0, 0; i < len(a); {
		switch {
		case j < len(b) && a[i] == b[j]:
			i, j = i+1, j+1
		case j < len(b) && lcs[i][j+1] >= lcs[i+1][j]:
			j++
		default:
			out = append(out, a[i])
			i++
		}
	}
	return out
}
