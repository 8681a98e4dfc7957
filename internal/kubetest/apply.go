package kubetest

import (
	"context"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Apply server-side applies objects as manager, forcing conflicts, as a GitOps
// reconciler does: each object's resource is found through discovery, and a
// namespaced object without a namespace goes to "default".
func Apply(t testing.TB, cfg *rest.Config, manager string, objs ...*unstructured.Unstructured) {
	t.Helper()
	cfg = Fast(cfg)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	force := true
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("apply %s/%s: %v", o.GetKind(), o.GetName(), err)
		}
		var res dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			ns := o.GetNamespace()
			if ns == "" {
				ns = "default"
			}
			res = dyn.Resource(m.Resource).Namespace(ns)
		}
		b, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.Patch(context.Background(), o.GetName(), types.ApplyPatchType, b,
			metav1.PatchOptions{FieldManager: manager, Force: &force}); err != nil {
			t.Fatalf("apply %s/%s as %s: %v", o.GetKind(), o.GetName(), manager, err)
		}
	}
}
