package object_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/kubetest"
)

// TestPlaceAsTheApiserverStores: a namespaced object without a namespace
// lands in the reconciler's (Argo CD's destination) or "default"; a
// cluster-scoped one has none, whatever Git wrote; a kind no one knows keeps
// what Git wrote without a cluster, and counts as namespaced when the cluster
// was asked and does not serve it (as Argo CD counts it).
func TestPlaceAsTheApiserverStores(t *testing.T) {
	env := kubetest.New(t)
	kubetest.InstallCRDs(t, env, kubetest.ReconcilerCRDs(t)...)
	reader, err := livestate.NewClusterReader(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	o := func(apiVersion, kind, name, ns string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetName(name)
		u.SetNamespace(ns)
		return u
	}
	objs := []*unstructured.Unstructured{
		o("v1", "ConfigMap", "settings", ""),
		o("v1", "ConfigMap", "elsewhere", "other"),
		o("rbac.authorization.k8s.io/v1", "ClusterRole", "reader", "oops"),
		o("cert-manager.io/v1", "ClusterIssuer", "letsencrypt", ""),
		o("argoproj.io/v1alpha1", "AppProject", "team", ""),
	}
	for _, c := range []struct {
		name string
		live object.LiveReader
		want []string
	}{
		{"without a cluster", nil, []string{"shop", "other", "", "", ""}},
		{"with the cluster's kinds", reader, []string{"shop", "other", "", "shop", "shop"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			placed, err := object.Place(context.Background(), c.live, objs, "shop")
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range placed {
				if p.GetNamespace() != c.want[i] {
					t.Errorf("%s/%s: namespace %q, want %q", p.GetKind(), p.GetName(), p.GetNamespace(), c.want[i])
				}
			}
			if objs[0].GetNamespace() != "" || objs[2].GetNamespace() != "oops" {
				t.Error("the caller's objects were changed")
			}
		})
	}
	if placed, err := object.Place(context.Background(), nil, nil, "shop"); err != nil || placed != nil {
		t.Errorf("nil: %v %v", placed, err)
	}
}
