package drift

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestOnlyWritersWakeTheLoop: the status controllers rewrite all the time
// must not wake the drift loop; a change to what a person or Git writes must.
func TestOnlyWritersWakeTheLoop(t *testing.T) {
	base := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "shop", "resourceVersion": "1", "generation": int64(1)},
			"spec":     map[string]any{"replicas": int64(2)},
		}}
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kustomize-controller", Operation: "Apply"}})
		return u
	}
	now := metav1.NewTime(time.Unix(1_800_000_000, 0))
	cases := []struct {
		name   string
		change func(*unstructured.Unstructured)
		wakes  bool
	}{
		{"a new resourceVersion alone", func(u *unstructured.Unstructured) { u.SetResourceVersion("2") }, false},
		{"a status write by a controller", func(u *unstructured.Unstructured) {
			u.SetResourceVersion("2")
			u.SetManagedFields(append(u.GetManagedFields(), metav1.ManagedFieldsEntry{Manager: "kube-controller-manager", Operation: "Update", Subresource: "status", Time: &now}))
		}, false},
		{"a scale by a person", func(u *unstructured.Unstructured) {
			u.Object["spec"].(map[string]any)["replicas"] = int64(5)
			u.SetGeneration(2)
		}, true},
		{"a ConfigMap-like edit without a generation", func(u *unstructured.Unstructured) { u.Object["data"] = map[string]any{"k": "v"} }, true},
		{"an annotation", func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"driftback.io/intent": "why"}) }, true},
		{"a new writer", func(u *unstructured.Unstructured) {
			u.SetManagedFields(append(u.GetManagedFields(), metav1.ManagedFieldsEntry{Manager: "kubectl-edit", Operation: "Update", Time: &now}))
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old, cur := base(), base()
			c.change(cur)
			if got := changedByWriter(old, cur); got != c.wakes {
				t.Errorf("changedByWriter = %v, want %v", got, c.wakes)
			}
			// Metadata-only objects are judged on their metadata.
			pm := func(u *unstructured.Unstructured) *metav1.PartialObjectMetadata {
				return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Generation: u.GetGeneration(), Labels: u.GetLabels(),
					Annotations: u.GetAnnotations(), ManagedFields: u.GetManagedFields(), ResourceVersion: u.GetResourceVersion()}}
			}
			if c.name != "a ConfigMap-like edit without a generation" {
				if got := changedByWriter(pm(old), pm(cur)); got != c.wakes {
					t.Errorf("metadata only: changedByWriter = %v, want %v", got, c.wakes)
				}
			}
		})
	}
}
