package livestate_test

import (
	"context"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/discovery"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/internal/kubetest"
)

// TestOnlyTheSchemasAKindReachesReadAsAllOfThem: the apply schema built
// from the schemas the compared kinds reach (all a comparison parses) reads
// objects exactly as one built from every schema of their documents: the
// same fields, the same list keys, down to a container's ports.
func TestOnlyTheSchemasAKindReachesReadAsAllOfThem(t *testing.T) {
	env := kubetest.New(t)
	objs := map[schema.GroupVersionKind]string{
		{Group: "apps", Version: "v1", Kind: "Deployment"}: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1}}
  template:
    metadata: {labels: {app: web}}
    spec:
      tolerations: [{key: a, operator: Exists}]
      volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
      containers:
      - name: web
        image: nginx
        ports: [{containerPort: 80, protocol: TCP}, {containerPort: 443}]
        env: [{name: A, valueFrom: {configMapKeyRef: {name: c, key: k}}}]
        volumeMounts: [{name: data, mountPath: /data}]
        resources: {limits: {cpu: "1"}}
`,
		{Version: "v1", Kind: "Service"}: `
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}, {name: https, port: 443}]
`,
		{Version: "v1", Kind: "ConfigMap"}: `
apiVersion: v1
kind: ConfigMap
metadata: {name: web}
data: {a: b}
`,
	}
	var gvks []schema.GroupVersionKind
	for gvk := range objs {
		gvks = append(gvks, gvk)
	}
	r, err := livestate.NewClusterReader(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	reached, err := r.TypeConverter(context.Background(), gvks)
	if err != nil {
		t.Fatal(err)
	}
	whole := wholeDocumentsConverter(t, env, "api/v1", "apis/apps/v1")
	for gvk, y := range objs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
			t.Fatal(err)
		}
		got, err := reached.ObjectToTyped(u)
		if err != nil {
			t.Fatalf("%s: %v", gvk.Kind, err)
		}
		want, err := whole.ObjectToTyped(u)
		if err != nil {
			t.Fatalf("%s: %v", gvk.Kind, err)
		}
		gotSet, err := got.ToFieldSet()
		if err != nil {
			t.Fatal(err)
		}
		wantSet, err := want.ToFieldSet()
		if err != nil {
			t.Fatal(err)
		}
		if !gotSet.Equals(wantSet) {
			t.Errorf("%s reads differently from the reached schemas:\n%s\nthan from all of them:\n%s", gvk.Kind, gotSet, wantSet)
		}
	}
}

// wholeDocumentsConverter is an apply schema of every schema of the given
// documents, as the reader built it before it parsed only what is reached.
func wholeDocumentsConverter(t *testing.T, env *kubetest.Env, docs ...string) managedfields.TypeConverter {
	t.Helper()
	paths, err := discovery.NewDiscoveryClientForConfigOrDie(env.Config).OpenAPIV3().Paths()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]*spec.Schema{}
	for _, p := range docs {
		b, err := paths[p].Schema("application/json")
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Components struct {
				Schemas map[string]*spec.Schema `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		for k, v := range doc.Components.Schemas {
			all[k] = v
		}
	}
	tc, err := managedfields.NewTypeConverter(all, false)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}
