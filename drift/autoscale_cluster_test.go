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

const liveHPA = `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: NS}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 10
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
`

const scaledObjectCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: scaledobjects.keda.sh}
spec:
  group: keda.sh
  names: {kind: ScaledObject, listKind: ScaledObjectList, plural: scaledobjects, singular: scaledobject}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

const workerDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: worker, namespace: NS}
spec:
  replicas: 1
  selector: {matchLabels: {app: worker}}
  template:
    metadata: {labels: {app: worker}}
    spec:
      containers: [{name: worker, image: "busybox:1.36"}]
`

const workerScaledObject = `apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: worker, namespace: NS}
spec:
  scaleTargetRef: {name: worker}
  maxReplicaCount: 20
  triggers: [{type: cron, metadata: {timezone: UTC, start: "0 8 * * *", end: "0 18 * * *", desiredReplicas: "5"}}]
`

// TestAutoscalersOwnReplicas: on the real apiserver, a `kubectl scale` of a
// Deployment that a live HorizontalPodAutoscaler targets is reported with the
// autoscaler and its bounds, and Git pinning replicas on it is warned about;
// a KEDA ScaledObject in the render is found the same way, with and without
// the cluster.
func TestAutoscalersOwnReplicas(t *testing.T) {
	c := newCluster(t)
	ns := c.env.Namespace
	web := obj(t, inNS(webDeployment, ns))
	c.apply(web, "kustomize-controller")
	c.apply(obj(t, inNS(liveHPA, ns)), "someone")
	c.scale(web, "kubectl", 7)
	c.apply(obj(t, scaledObjectCRD), "kustomize-controller")
	waitForKind(t, c, "keda.sh")
	worker := obj(t, inNS(workerDeployment, ns))
	so := obj(t, inNS(workerScaledObject, ns))
	c.apply(worker, "kustomize-controller")
	c.apply(so, "kustomize-controller")

	reader, err := livestate.NewClusterReader(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	head := []*unstructured.Unstructured{web, worker, so}
	target, err := drift.Compare(context.Background(), reader, drift.Input{Path: "app", Base: head, Head: head}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(target.Errors) > 0 {
		t.Fatalf("errors: %v", target.Errors)
	}
	var replicas *object.Field
	for _, ch := range target.Drift {
		for i, f := range ch.Fields {
			if ch.Name == "web" && f.Path == ".spec.replicas" {
				replicas = &ch.Fields[i]
			}
		}
	}
	if replicas == nil || replicas.Live != int64(7) || replicas.Autoscaler != "HorizontalPodAutoscaler/web (min 2, max 10 replicas)" {
		t.Fatalf("the scale's drift: %+v", replicas)
	}
	warned := func(changes []drift.Change) map[string]string {
		out := map[string]string{}
		for _, ch := range changes {
			for _, d := range ch.Danger {
				if d.Reason == drift.DangerAutoscaledReplicas {
					out[ch.Kind+"/"+ch.Name] = d.Message
				}
			}
		}
		return out
	}
	got := warned(target.Changes)
	if len(got) != 2 || !strings.Contains(got["Deployment/web"], "HorizontalPodAutoscaler/web") || !strings.Contains(got["Deployment/worker"], "ScaledObject/worker (min 0, max 20 replicas)") {
		t.Errorf("warnings with the cluster: %v", got)
	}
	// The base pins replicas as much as the head: the condition is not this
	// change's doing, and counts nowhere.
	if n := target.Dangers()[drift.DangerAutoscaledReplicas]; n != 0 {
		t.Errorf("%d autoscaled-replicas dangers counted where the base pins replicas too, want 0", n)
	}
	for _, ch := range target.Changes {
		for _, d := range ch.Danger {
			if d.Reason == drift.DangerAutoscaledReplicas && !d.Before {
				t.Errorf("%s/%s: the base pins replicas too, yet the danger is not marked as true before", ch.Kind, ch.Name)
			}
		}
	}
	// A change that starts pinning them is this change's danger.
	unpinned := web.DeepCopy()
	unstructured.RemoveNestedField(unpinned.Object, "spec", "replicas")
	pins, err := drift.Compare(context.Background(), reader, drift.Input{Path: "app", Base: []*unstructured.Unstructured{unpinned, worker, so}, Head: head, HasBase: true}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if n := pins.Dangers()[drift.DangerAutoscaledReplicas]; n != 1 {
		t.Errorf("%d autoscaled-replicas dangers counted for a change that pins web's replicas, want 1", n)
	}

	// Without the cluster, a pull request that adds the ScaledObject is
	// warned about from Git alone; the live-only HPA is unknown then.
	gitOnly, err := drift.Compare(context.Background(), nil, drift.Input{Path: "app", Base: []*unstructured.Unstructured{web, worker}, Head: head, HasBase: true}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if got := warned(gitOnly.Told()); len(got) != 1 || !strings.Contains(got["Deployment/worker"], "Git sets replicas (1)") {
		t.Errorf("warnings from Git: %v", got)
	}
}
