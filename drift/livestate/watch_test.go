package livestate_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/kubetest"
)

// TestWatcherServesFromItsCaches: once a kind is watched, Get and List
// answer from the informer caches without status or the client-side-apply
// copy; other kinds in the namespace are seen through metadata only; a
// change wakes Changed.
func TestWatcherServesFromItsCaches(t *testing.T) {
	env := kubetest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{big}"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}},
	}
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "by-hand"}},
		metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		t.Fatal(err)
	}
	w, err := livestate.NewWatcher(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Watch(ctx, []schema.GroupKind{{Group: "apps", Kind: "Deployment"}}, []string{ns}); err != nil {
		t.Fatal(err)
	}
	if err := w.WatchMetadata(ctx, []string{ns}); err != nil {
		t.Fatal(err)
	}
	ref := object.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "web"}
	got, err := w.Get(ctx, []object.Ref{ref})
	if err != nil {
		t.Fatal(err)
	}
	obj := got[ref.Key()]
	if obj == nil {
		t.Fatal("the watched Deployment is not in the cache")
	}
	if _, ok := obj.Object["status"]; ok {
		t.Error("the cache keeps status")
	}
	if _, ok := obj.GetAnnotations()["kubectl.kubernetes.io/last-applied-configuration"]; ok {
		t.Error("the cache keeps the last-applied copy")
	}
	if len(obj.GetManagedFields()) == 0 {
		t.Error("the cache lost managedFields, which drift attribution needs")
	}
	list, err := w.List(ctx, schema.GroupKind{Group: "apps", Kind: "Deployment"}, ns, nil)
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %d objects, %v", len(list), err)
	}
	seen := map[string]bool{}
	for _, p := range w.InNamespaces([]string{ns}) {
		seen[p.Ref().String()] = true
		if p.Ref().Kind == "ConfigMap" && len(p.Metadata.ManagedFields) > 0 && p.Metadata.ManagedFields[0].FieldsV1 != nil {
			t.Error("metadata-only caches keep field sets")
		}
	}
	if !seen["ConfigMap/"+ns+"/by-hand"] || !seen["Deployment/"+ns+"/web"] {
		t.Errorf("InNamespaces saw %v", seen)
	}
	full, meta := w.Watches()
	if full != 1 || meta == 0 {
		t.Errorf("watches: %d full, %d metadata", full, meta)
	}
	for len(w.Changed()) > 0 {
		<-w.Changed()
	}
	if _, err := env.Client.AppsV1().Deployments(ns).Patch(ctx, "web", "application/strategic-merge-patch+json",
		[]byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Changed():
	case <-time.After(30 * time.Second):
		t.Fatal("no change signalled")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _ := w.Get(ctx, []object.Ref{ref})
		if n, _, _ := unstructured.NestedInt64(got[ref.Key()].Object, "spec", "replicas"); n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache did not follow the change")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWatcherFindsClusterScopedObjectsWhateverTheirNamespace: kustomize's
// namespace transformer gives unknown cluster-scoped kinds a namespace; the
// cache holds them by name alone and must still find them.
func TestWatcherFindsClusterScopedObjectsWhateverTheirNamespace(t *testing.T) {
	env := kubetest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	name := env.Namespace + "-reader"
	if _, err := env.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	}) // best effort
	w, err := livestate.NewWatcher(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	gk := schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}
	if err := w.Watch(ctx, []schema.GroupKind{gk}, []string{env.Namespace}); err != nil {
		t.Fatal(err)
	}
	ref := object.Ref{Group: gk.Group, Version: "v1", Kind: gk.Kind, Namespace: env.Namespace, Name: name}
	got, err := w.Get(ctx, []object.Ref{ref})
	if err != nil {
		t.Fatal(err)
	}
	if got[ref.Key()] == nil {
		t.Fatal("a cluster-scoped object asked for with a namespace is reported missing")
	}
}
