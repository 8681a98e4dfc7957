package drift_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
)

const webDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: NS
  labels:
    app: web
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: nginx:1.27
        env:
        - name: MODE
          value: normal
        resources:
          requests:
            cpu: "0.5"
            memory: 128Mi
`

func inNS(y, ns string) string { return strings.ReplaceAll(y, "namespace: NS", "namespace: "+ns) }

// TestLiveImpactOfAScale proves the read-only diff sees a `kubectl scale` on the
// real apiserver: the field, the values, the manager that made the change, and
// that the pull request (which keeps replicas at 3) overwrites it.
func TestLiveImpactOfAScale(t *testing.T) {
	c := newCluster(t)
	desired := obj(t, inNS(webDeployment, c.env.Namespace))
	c.apply(desired, "kustomize-controller")
	c.scale(desired, "kubectl", 5)

	reader, err := livestate.NewClusterReader(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	target, err := drift.Compare(context.Background(), reader, drift.Input{
		Path: "app", Base: []*unstructured.Unstructured{desired}, Head: []*unstructured.Unstructured{desired},
	}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(target.Errors) > 0 {
		t.Fatalf("errors: %v", target.Errors)
	}
	if len(target.Changes) != 1 {
		t.Fatalf("changes: %+v", target.Changes)
	}
	ch := target.Changes[0]
	if ch.Action != drift.ActionUpdate || len(ch.Fields) != 1 {
		t.Fatalf("change: %+v", ch)
	}
	f := ch.Fields[0]
	if f.Path != ".spec.replicas" || f.Live != int64(5) || f.Desired != int64(3) || f.Manager != "kubectl" || f.Subresource != "scale" || f.Kind != object.FieldDrift {
		t.Errorf("field: %+v", f)
	}
	if len(target.Drift) != 1 || len(target.Drift[0].Fields) != 1 || target.Drift[0].Fields[0].Path != ".spec.replicas" {
		t.Errorf("drift: %+v", target.Drift)
	}
}
