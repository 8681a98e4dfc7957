package livestate

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// apiserverObject is a Deployment as a GET returns it: every kind of JSON
// value, managedFields with nested field sets, a status, and the
// client-side-apply copy.
const apiserverObject = `{
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {
    "name": "web", "namespace": "shop", "uid": "6f1c3a9e-0d43-4c1e-9a57-3b1d0c2e8f10",
    "resourceVersion": "48213", "generation": 7,
    "creationTimestamp": "2026-11-30T08:15:00Z", "deletionTimestamp": "2026-12-01T09:00:00Z",
    "deletionGracePeriodSeconds": 30, "finalizers": ["example.com/keep"],
    "labels": {"app": "web", "tier": "frontend"},
    "annotations": {"deployment.kubernetes.io/revision": "3", "driftback.io/intent": "a ünïcode reason",
      "kubectl.kubernetes.io/last-applied-configuration": "{\"big\":true}"},
    "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Shop", "name": "shop", "uid": "0b6e2f7c-1111-2222-3333-444455556666", "controller": true, "blockOwnerDeletion": true}],
    "managedFields": [
      {"manager": "kustomize-controller", "operation": "Apply", "apiVersion": "apps/v1", "time": "2026-11-30T08:15:00Z",
       "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}}}}}}}},
      {"manager": "kubectl-scale", "operation": "Update", "apiVersion": "apps/v1", "time": "2026-12-01T08:00:00Z", "subresource": "scale",
       "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
      {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1", "time": "2026-12-01T08:00:01Z", "subresource": "status",
       "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:replicas": {}}}}
    ]
  },
  "spec": {
    "replicas": 5, "paused": false, "progressDeadlineSeconds": 600, "minReadySeconds": 0,
    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
    "selector": {"matchLabels": {"app": "web"}},
    "template": {
      "metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
      "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "args": ["--ratio", "0.75"],
        "resources": {"limits": {"cpu": "500m"}}, "env": [{"name": "WEIGHT", "value": "1.5"}]}],
        "terminationGracePeriodSeconds": 30}
    }
  },
  "status": {"replicas": 5, "conditions": [{"type": "Available", "status": "True"}]}
}`

func decode(t testing.TB, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(s)); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestCachedObjectsReadBackAsTheyCame: what a full watch keeps is the object
// as the apiserver sent it, less its status and client-side-apply copy, and
// every read is a copy of its own; a metadata-only watch keeps who wrote an
// object and when, without the field sets.
func TestCachedObjectsReadBackAsTheyCame(t *testing.T) {
	want := decode(t, apiserverObject)
	unstructured.RemoveNestedField(want.Object, "status")
	a := want.GetAnnotations()
	delete(a, lastApplied)
	want.SetAnnotations(a)

	c := mustCache(t, decode(t, apiserverObject))
	if again, err := cacheObject(c); err != nil || again != any(c) {
		t.Fatalf("the transform is not idempotent: %v, %v", again, err)
	}
	got, err := c.object()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want.Object, got.Object); d != "" {
		t.Errorf("read back (-want +got):\n%s", d)
	}
	unstructured.SetNestedField(got.Object, int64(9), "spec", "replicas")
	again, err := c.object()
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(again.Object, "spec", "replicas"); n != 5 {
		t.Errorf("a change to one read reached the cache: replicas %d", n)
	}

	wantMeta := want.DeepCopy()
	mf := wantMeta.GetManagedFields()
	for i := range mf {
		mf[i].FieldsV1 = nil
	}
	wantMeta.SetManagedFields(mf)
	wantMeta.SetFinalizers(nil)
	wantMeta.SetDeletionGracePeriodSeconds(nil)
	wm := metav1.ObjectMeta{
		Name: wantMeta.GetName(), Namespace: wantMeta.GetNamespace(), UID: wantMeta.GetUID(), ResourceVersion: wantMeta.GetResourceVersion(),
		Generation: wantMeta.GetGeneration(), CreationTimestamp: wantMeta.GetCreationTimestamp(), DeletionTimestamp: wantMeta.GetDeletionTimestamp(),
		Labels: wantMeta.GetLabels(), Annotations: wantMeta.GetAnnotations(), OwnerReferences: wantMeta.GetOwnerReferences(), ManagedFields: mf,
	}
	timeEqual := cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) })
	if d := cmp.Diff(wm, c.meta.objectMeta(), timeEqual); d != "" {
		t.Errorf("the metadata of a full watch (-want +got):\n%s", d)
	}

	pm := &metav1.PartialObjectMetadata{}
	full := decode(t, apiserverObject)
	pm.ObjectMeta = metav1.ObjectMeta{
		Name: full.GetName(), Namespace: full.GetNamespace(), UID: full.GetUID(), ResourceVersion: full.GetResourceVersion(),
		Generation: full.GetGeneration(), CreationTimestamp: full.GetCreationTimestamp(), DeletionTimestamp: full.GetDeletionTimestamp(),
		Labels: full.GetLabels(), Annotations: full.GetAnnotations(), OwnerReferences: full.GetOwnerReferences(),
		ManagedFields: full.GetManagedFields(), Finalizers: full.GetFinalizers(),
	}
	m := mustCacheMetadata(t, pm)
	if d := cmp.Diff(wm, m.meta.objectMeta(), timeEqual); d != "" {
		t.Errorf("the metadata of a metadata-only watch (-want +got):\n%s", d)
	}
	if _, err := m.object(); err == nil {
		t.Error("a metadata-only entry decoded as a whole object")
	}
}

// watchedConfigMap is one of the watch benchmark's ConfigMaps as the
// apiserver returns it after `kubectl apply`.
func watchedConfigMap(i int) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%05d","namespace":"shop-%d",
  "uid":"5f6e1c2a-%04x-4c1e-9a57-3b1d0c2e%04x","resourceVersion":"%d","creationTimestamp":"2026-12-01T08:00:00Z",
  "labels":{"app":"shop","tier":"web"},
  "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"%0300d"},
  "managedFields":[{"manager":"kubectl-client-side-apply","operation":"Update","apiVersion":"v1","time":"2026-12-01T08:00:00Z",
    "fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:ENDPOINT":{},"f:FEATURE":{},"f:LOG_LEVEL":{}},
    "f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:app":{},"f:tier":{}}}}}]},
 "data":{"ENDPOINT":"https://api.example.com/v1/%d","FEATURE":"on","LOG_LEVEL":"info"}}`, i, i%4, i, i, 1000+i, 0, i)
}

// TestWatchCachesStayWithinTheirBudget: an informer's store of the watch
// benchmark's ConfigMaps, keyed and indexed as the Watcher's are, holds at
// most 2 KB an object watched in full and 1 KB an object watched for its
// metadata. BenchmarkWatchCache measures the same on the real apiserver.
func TestWatchCachesStayWithinTheirBudget(t *testing.T) {
	const n = 5000
	for _, c := range []struct {
		name      string
		transform func(*unstructured.Unstructured) any
		budget    float64
	}{
		{"full", func(u *unstructured.Unstructured) any { return mustCache(t, u) }, 2048},
		{"metadata only", func(u *unstructured.Unstructured) any {
			return mustCacheMetadata(t, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
				ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(),
					CreationTimestamp: u.GetCreationTimestamp(), Labels: u.GetLabels(), Annotations: u.GetAnnotations(), ManagedFields: u.GetManagedFields()}})
		}, 1024},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := liveHeap()
			store := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: namespaceIndex})
			for i := range n {
				// Decoded one at a time and let go of, as an informer does.
				if err := store.Add(c.transform(decode(t, watchedConfigMap(i)))); err != nil {
					t.Fatal(err)
				}
			}
			per := (liveHeap() - before) / n
			runtime.KeepAlive(store)
			t.Logf("%.0f bytes an object", per)
			if per > c.budget {
				t.Errorf("%.0f bytes an object, over the budget of %.0f", per, c.budget)
			}
			if len(store.List()) != n {
				t.Errorf("the store holds %d objects, want %d", len(store.List()), n)
			}
		})
	}
}

func liveHeap() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc)
}
