package drift_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/internal/kubetest"
)

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.GROUP
spec:
  group: GROUP
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string}
              tags:
                type: array
                items: {type: string}
`

// scenario applies desired as the GitOps applier, then changes the cluster as
// a person or controller would; want lists the changed fields a sync reports.
type scenario struct {
	name    string
	objects []string // applied by kustomize-controller; NS is the test namespace
	change  func(c *cluster, objs []*unstructured.Unstructured)
	desired func(objs []*unstructured.Unstructured) // edits Git after the change
	want    []string
}

func scenarios() []scenario {
	return []scenario{
		{name: "an Update like kubectl edit", objects: []string{webDeployment},
			change: func(c *cluster, o []*unstructured.Unstructured) {
				c.edit(o[0], "kubectl-edit", func(u *unstructured.Unstructured) {
					setContainer(u, 0, "image", "nginx:1.28-hotfix")
				})
			},
			want: []string{`Deployment .spec.template.spec.containers[name="web"].image`}},
		{name: "the scale subresource", objects: []string{webDeployment},
			change: func(c *cluster, o []*unstructured.Unstructured) { c.scale(o[0], "kubectl", 7) },
			want:   []string{"Deployment .spec.replicas"}},
		{name: "label and annotation edits", objects: []string{webDeployment},
			change: func(c *cluster, o []*unstructured.Unstructured) {
				c.edit(o[0], "kubectl-label", func(u *unstructured.Unstructured) {
					l := u.GetLabels()
					l["app"] = "web-debug"
					l["oncall"] = "me"
					u.SetLabels(l)
					u.SetAnnotations(map[string]string{"note": "added by hand"})
				})
			},
			// Fields only a person set are not Git's: a sync leaves them.
			want: []string{"Deployment .metadata.labels.app"}},
		{name: "a container added", objects: []string{webDeployment},
			change: func(c *cluster, o []*unstructured.Unstructured) {
				c.edit(o[0], "kubectl-edit", func(u *unstructured.Unstructured) {
					cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
					cs = append(cs, map[string]any{"name": "debug", "image": "busybox:1.36"})
					_ = unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers")
				})
			},
			want: nil},
		{name: "an env var changed", objects: []string{webDeployment},
			change: func(c *cluster, o []*unstructured.Unstructured) {
				c.edit(o[0], "kubectl-edit", func(u *unstructured.Unstructured) {
					cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
					c0 := cs[0].(map[string]any)
					c0["env"] = []any{map[string]any{"name": "MODE", "value": "debug"}}
					_ = unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers")
				})
			},
			want: []string{`Deployment .spec.template.spec.containers[name="web"].env[name="MODE"].value`}},
		{name: "a field removed from Git", objects: []string{webDeployment},
			desired: func(o []*unstructured.Unstructured) {
				cs, _, _ := unstructured.NestedSlice(o[0].Object, "spec", "template", "spec", "containers")
				delete(cs[0].(map[string]any), "env")
				_ = unstructured.SetNestedSlice(o[0].Object, cs, "spec", "template", "spec", "containers")
			},
			want: []string{`Deployment .spec.template.spec.containers[name="web"].env`}},
		{name: "quantities written differently", objects: []string{webDeployment},
			desired: func(o []*unstructured.Unstructured) {
				cs, _, _ := unstructured.NestedSlice(o[0].Object, "spec", "template", "spec", "containers")
				_ = unstructured.SetNestedField(cs[0].(map[string]any), "500m", "resources", "requests", "cpu")
				_ = unstructured.SetNestedSlice(o[0].Object, cs, "spec", "template", "spec", "containers")
			},
			want: nil},
		{name: "a ConfigMap key changed and one removed from Git",
			objects: []string{"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: NS\ndata:\n  a: \"1\"\n  b: \"2\"\n"},
			change: func(c *cluster, o []*unstructured.Unstructured) {
				c.edit(o[0], "kubectl-edit", func(u *unstructured.Unstructured) {
					_ = unstructured.SetNestedField(u.Object, "10", "data", "a")
				})
			},
			desired: func(o []*unstructured.Unstructured) { unstructured.RemoveNestedField(o[0].Object, "data", "b") },
			want:    []string{"ConfigMap .data.a", "ConfigMap .data.b"}},
		{name: "a custom resource changed", objects: []string{widgetCRD, "apiVersion: GROUP/v1\nkind: Widget\nmetadata:\n  name: blue\n  namespace: NS\nspec:\n  size: 3\n  color: blue\n  tags: [a, b]\n"},
			change: func(c *cluster, o []*unstructured.Unstructured) {
				c.edit(o[1], "kubectl-edit", func(u *unstructured.Unstructured) {
					_ = unstructured.SetNestedField(u.Object, int64(9), "spec", "size")
					_ = unstructured.SetNestedStringSlice(u.Object, []string{"a", "b", "c"}, "spec", "tags")
				})
			},
			want: []string{"Widget .spec.size", "Widget .spec.tags"}},
		// Objects whose atomic lists and list-map keys rely on what the
		// apiserver defaults: applied as Git has them, untouched since.
		{name: "NetworkPolicy ports without a protocol", objects: []string{networkPolicy}, want: nil},
		{name: "NetworkPolicy port added by hand", objects: []string{networkPolicy},
			change: func(c *cluster, o []*unstructured.Unstructured) {
				c.edit(o[0], "kubectl-edit", func(u *unstructured.Unstructured) {
					in, _, _ := unstructured.NestedSlice(u.Object, "spec", "ingress")
					rule := in[0].(map[string]any)
					rule["ports"] = append(rule["ports"].([]any), map[string]any{"port": int64(8443)})
					_ = unstructured.SetNestedSlice(u.Object, in, "spec", "ingress")
				})
			},
			want: []string{"NetworkPolicy .spec.ingress"}},
		{name: "Service ports without a protocol or target port", objects: []string{service}, want: nil},
		{name: "container ports, probes and volumes left to defaults", objects: []string{defaultedDeployment}, want: nil},
		{name: "Job and CronJob templates", objects: []string{job, cronJob}, want: nil},
		{name: "StatefulSet volume claim templates", objects: []string{statefulSet}, want: nil},
		{name: "a custom resource relying on schema defaults", objects: []string{gadgetCRD, gadget}, want: nil},
		{name: "a custom resource default changed by hand", objects: []string{gadgetCRD, gadget},
			change: func(c *cluster, o []*unstructured.Unstructured) {
				c.edit(o[1], "kubectl-edit", func(u *unstructured.Unstructured) {
					ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
					ports[0].(map[string]any)["protocol"] = "UDP"
					_ = unstructured.SetNestedSlice(u.Object, ports, "spec", "ports")
				})
			},
			want: []string{"Gadget .spec.ports"}},
	}
}

const networkPolicy = `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web, namespace: NS}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - ports: [{port: 80}, {port: 53, protocol: UDP}]
`

const service = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: NS}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80}, {name: https, port: 443, targetPort: https}]
`

const defaultedDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: NS}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - name: api
        image: nginx:1.27
        ports: [{containerPort: 8080}, {containerPort: 9090, name: metrics}]
        readinessProbe: {httpGet: {path: /, port: 8080}}
        env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
      volumes: [{name: cfg, configMap: {name: cfg}}, {name: scratch}]
`

const job = `apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: NS}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: migrate, image: busybox:1.36, ports: [{containerPort: 5432}]}]
`

const cronJob = `apiVersion: batch/v1
kind: CronJob
metadata: {name: tick, namespace: NS}
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: tick, image: busybox:1.36}]
`

const statefulSet = `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: NS}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: postgres:17}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
`

// gadgetCRD defaults fields at every level.
var gadgetCRD = kubetest.DefaultingCRD

const gadget = `apiVersion: GROUP/v1
kind: Gadget
metadata: {name: g, namespace: NS}
spec:
  ports: [{port: 80}, {port: 53, protocol: UDP}]
  opts: {a: {}, b: {level: 1}}
`

func setContainer(u *unstructured.Unstructured, i int, field string, v any) {
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	cs[i].(map[string]any)[field] = v
	_ = unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers")
}

// TestReadOnlyAgreesWithDryRun proves, scenario by scenario on the real
// apiserver, that the read-only prediction reports the same changed objects
// and fields as the apiserver's own server-side dry-run, and that both report
// what the scenario changed.
func TestReadOnlyAgreesWithDryRun(t *testing.T) {
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			c := newCluster(t)
			group := strings.ReplaceAll(c.env.Namespace, "-", "") + ".example.com"
			var objs []*unstructured.Unstructured
			for _, y := range sc.objects {
				y = strings.ReplaceAll(inNS(y, c.env.Namespace), "GROUP", group)
				o := obj(t, y)
				c.apply(o, "kustomize-controller")
				if o.GetKind() == "CustomResourceDefinition" {
					waitForKind(t, c, group)
				}
				objs = append(objs, o)
			}
			if sc.change != nil {
				sc.change(c, objs)
			}
			desired := make([]*unstructured.Unstructured, len(objs))
			for i, o := range objs {
				desired[i] = o.DeepCopy()
			}
			if sc.desired != nil {
				sc.desired(desired)
			}

			reader, err := livestate.NewClusterReader(c.env.Config)
			if err != nil {
				t.Fatal(err)
			}
			dry, err := livestate.NewServerDryRun(c.env.Config)
			if err != nil {
				t.Fatal(err)
			}
			results := map[drift.Mode][]string{}
			for _, mode := range []drift.Mode{drift.ModeReadOnly, drift.ModeDryRun} {
				opts := drift.DefaultOptions()
				opts.Mode = mode
				opts.DryRun = dry
				target, err := drift.Compare(context.Background(), reader, drift.Input{Path: "app", Head: desired}, opts)
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				if len(target.Errors) > 0 {
					t.Fatalf("%s: %v", mode, target.Errors)
				}
				results[mode] = changedFields(target.Changes)
			}
			if diff := cmp.Diff(results[drift.ModeDryRun], results[drift.ModeReadOnly]); diff != "" {
				t.Errorf("read-only disagrees with dry-run (-dry-run +read-only):\n%s", diff)
			}
			if diff := cmp.Diff(sc.want, results[drift.ModeReadOnly]); diff != "" {
				t.Errorf("changed fields (-want +got):\n%s", diff)
			}
		})
	}
}

func changedFields(changes []drift.Change) []string {
	var out []string
	for _, ch := range changes {
		if ch.Action == drift.ActionUnchanged {
			continue
		}
		if len(ch.Fields) == 0 {
			out = append(out, fmt.Sprintf("%s %s", ch.Kind, ch.Action))
		}
		for _, f := range ch.Fields {
			out = append(out, ch.Kind+" "+f.Path)
		}
	}
	sort.Strings(out)
	return out
}

// waitForKind waits until the apiserver serves the CRD's group in discovery
// and publishes its OpenAPI v3 document, which follows the CRD's
// establishment by a moment: polled, not slept for.
func waitForKind(t *testing.T, c *cluster, group string) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(c.env.Setup)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		paths, err := dc.OpenAPIV3().Paths()
		if err == nil {
			for p, gv := range paths {
				if !strings.HasPrefix(p, "apis/"+group+"/") {
					continue
				}
				if b, err := gv.Schema("application/json"); err == nil && len(b) > 0 {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("group %s never published its OpenAPI v3 document", group)
}
