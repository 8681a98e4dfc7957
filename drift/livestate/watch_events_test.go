package livestate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

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
		{"a forced apply taking over a field within the same second", func(u *unstructured.Unstructured) {
			u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kustomize-controller", Operation: "Apply",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}}})
		}, true},
		{"a new writer", func(u *unstructured.Unstructured) {
			u.SetManagedFields(append(u.GetManagedFields(), metav1.ManagedFieldsEntry{Manager: "kubectl-edit", Operation: "Update", Time: &now}))
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old, cur := base(), base()
			c.change(cur)
			// The transforms take their input over: judge copies.
			if got := changedByWriter(mustCache(t, old.DeepCopy()), mustCache(t, cur.DeepCopy())); got != c.wakes {
				t.Errorf("changedByWriter = %v, want %v", got, c.wakes)
			}
			// Metadata-only objects are judged on their metadata.
			pm := func(u *unstructured.Unstructured) *metav1.PartialObjectMetadata {
				return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Generation: u.GetGeneration(), Labels: u.GetLabels(),
					Annotations: u.GetAnnotations(), ManagedFields: u.GetManagedFields(), ResourceVersion: u.GetResourceVersion()}}
			}
			if c.name != "a ConfigMap-like edit without a generation" {
				if got := changedByWriter(mustCacheMetadata(t, pm(old)), mustCacheMetadata(t, pm(cur))); got != c.wakes {
					t.Errorf("metadata only: changedByWriter = %v, want %v", got, c.wakes)
				}
			}
		})
	}
}

func mustCache(t testing.TB, u *unstructured.Unstructured) *cached {
	t.Helper()
	c, err := cacheObject(u)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*cached)
}

func mustCacheMetadata(t testing.TB, m *metav1.PartialObjectMetadata) *cached {
	t.Helper()
	c, err := cacheMetadata(m)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*cached)
}

// TestWatchSyncErrorSaysWhy: a watch that did not fill says whether it was
// refused, throttled by the apiserver, failed otherwise, or was still
// filling at the client's own rate limits, which are the product's.
func TestWatchSyncErrorSaysWhy(t *testing.T) {
	w, err := NewWatcher(context.Background(), &rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if w.qps != DefaultQPS || w.burst != DefaultBurst {
		t.Fatalf("the watcher reports %g requests/s, burst %d; the product's limits are %g, %d", w.qps, w.burst, float32(DefaultQPS), DefaultBurst)
	}
	wt := &watched{gk: schema.GroupKind{Kind: "ConfigMap"}, namespace: "shop"}
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, c := range []struct {
		name  string
		cause error
		says  []string
	}{
		{"refused", apierrors.NewForbidden(gr, "", errors.New("no RBAC")), []string{"refused", "list and watch"}},
		{"throttled", apierrors.NewTooManyRequests("the server is busy", 1), []string{"throttling", "429", "API Priority and Fairness"}},
		{"another failure", errors.New("connection reset"), []string{"connection reset"}},
		{"still filling", nil, []string{"3 of 7 watches were still filling", fmt.Sprintf("rate limit of %g requests/s, burst %d", float32(DefaultQPS), DefaultBurst)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := w.syncError(wt, 3, 7, c.cause).Error()
			if !strings.HasPrefix(msg, "watch ConfigMap in shop: the first list did not complete in 1m0s") {
				t.Errorf("the message does not name the watch and its wait: %s", msg)
			}
			for _, s := range c.says {
				if !strings.Contains(msg, s) {
					t.Errorf("the message lacks %q: %s", s, msg)
				}
			}
		})
	}
}
