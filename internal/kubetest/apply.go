package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
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
	a, err := NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := a.Apply(manager, o); err != nil {
			t.Fatal(err)
		}
	}
}

// Applier applies objects one at a time, for a test that goes on when one
// fails (a kind the cluster does not serve).
type Applier struct {
	mapper *restmapper.DeferredDiscoveryRESTMapper
	dyn    *dynamic.DynamicClient
}

// NewApplier returns an Applier on cfg, with the test clients' limits.
func NewApplier(cfg *rest.Config) (*Applier, error) {
	cfg = Fast(cfg)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), dyn: dyn}, nil
}

// Apply server-side applies o as manager, forcing conflicts.
func (a *Applier) Apply(manager string, o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("apply %s/%s: %w", o.GetKind(), o.GetName(), err)
	}
	var res dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == "namespace" {
		ns := o.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		res = a.dyn.Resource(m.Resource).Namespace(ns)
	}
	b, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	force := true
	if _, err := res.Patch(context.Background(), o.GetName(), types.ApplyPatchType, b,
		metav1.PatchOptions{FieldManager: manager, Force: &force}); err != nil {
		return fmt.Errorf("apply %s/%s as %s: %w", o.GetKind(), o.GetName(), manager, err)
	}
	return nil
}
