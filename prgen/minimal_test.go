package prgen_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/internal/testfs"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/render"
)

// autoscaling is a file of an overlay as people write it: a comment above
// each metric, one after a value, keys in their own order, and a Deployment
// in the same file that the drift does not touch.
const autoscaling = `# Scaling of the web tier.
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: web
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 10
  metrics:
    # CPU first: it moves first.
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: 70 # scale before it hurts
    # Memory as a backstop.
    - type: Resource
      resource:
        name: memory
        target:
          type: Utilization
          averageUtilization: 85
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: "nginx:1.27"
          args: ["--port", "8080"]
`

// TestWriteBackInsideAnAtomicListTouchesOneLine: drift on one metric of an
// HPA (metrics is a list Kubernetes replaces whole, so the drift is the
// whole list) is written back as that one value: every other byte of the
// file stays, its comments, key order and the untouched Deployment
// included; the same from a live cluster and from a dump of it.
func TestWriteBackInsideAnAtomicListTouchesOneLine(t *testing.T) {
	env := kubetest.New(t)
	ctx := context.Background()
	tree, r, rendered := appliedTree(t, env, map[string]string{
		"app/kustomization.yaml": "namespace: " + env.Namespace + "\nresources: [autoscaling.yaml]\n",
		"app/autoscaling.yaml":   autoscaling,
	}, "app")
	objs := rendered["app"]
	dyn, err := dynamic.NewForConfig(env.Setup)
	if err != nil {
		t.Fatal(err)
	}
	hpas := dyn.Resource(schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}).Namespace(env.Namespace)
	hpa, err := hpas.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	metrics, _, _ := unstructured.NestedSlice(hpa.Object, "spec", "metrics")
	_ = unstructured.SetNestedField(metrics[0].(map[string]any), int64(80), "resource", "target", "averageUtilization")
	_ = unstructured.SetNestedSlice(hpa.Object, metrics, "spec", "metrics")
	if _, err := hpas.Update(ctx, hpa, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	cluster, err := livestate.NewClusterReader(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dump := t.TempDir()
	if _, err := livestate.WriteDump(ctx, cluster, objs, dump); err != nil {
		t.Fatal(err)
	}
	dumped, err := livestate.ReadDir(dump)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(autoscaling, "averageUtilization: 70 # scale before it hurts", "averageUtilization: 80 # scale before it hurts", 1)
	for name, live := range map[string]object.LiveReader{"cluster": cluster, "dump": dumped} {
		t.Run(name, func(t *testing.T) {
			target, err := drift.Compare(ctx, live, drift.Input{Path: "app", Head: objs}, drift.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, ch := range target.Drift {
				for _, f := range ch.Fields {
					paths = append(paths, ch.Kind+" "+f.Path)
				}
			}
			if strings.Join(paths, ",") != "HorizontalPodAutoscaler .spec.metrics" {
				t.Fatalf("drift %v, want the HPA's metrics (an atomic list)", paths)
			}
			plan, err := prgen.Make(ctx, prgen.Input{Tree: tree, Overlay: "app", Renderer: r, Drift: target.Drift})
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Manual) > 0 || len(plan.Codified) != 1 {
				t.Fatalf("codified %+v, manual %+v", plan.Codified, plan.Manual)
			}
			if got := string(plan.Files["app/autoscaling.yaml"]); got != want {
				t.Errorf("the file is not Git's with one value changed:\n%s", got)
			}
		})
	}
}

// appliedTree writes files into a repository, renders the overlays as
// write-back does (origins recorded) and applies them to the test cluster
// as kustomize-controller.
func appliedTree(t *testing.T, env *kubetest.Env, files map[string]string, overlays ...string) (*render.Tree, *render.Renderer, map[string][]*unstructured.Unstructured) {
	t.Helper()
	tree := testfs.Tree(t, files)
	r := render.New(render.Options{Origins: true})
	res, err := r.Render(context.Background(), tree, overlays)
	if err != nil {
		t.Fatal(err)
	}
	rendered := map[string][]*unstructured.Unstructured{}
	for i, o := range overlays {
		objs, err := res.Overlays[i].Objects()
		if err != nil {
			t.Fatal(err)
		}
		rendered[o] = objs
		kubetest.Apply(t, env.Config, "kustomize-controller", objs...)
	}
	return tree, r, rendered
}
