package drift_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
)

// TestReconcilerOptionsChangeTheLiveImpact: a reconciler that does not
// prune leaves what leaves Git in place, and objects without a namespace go
// to the destination namespace, as Argo CD puts them.
func TestReconcilerOptionsChangeTheLiveImpact(t *testing.T) {
	c := newCluster(t)
	ns := c.env.Namespace
	kept := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: old, namespace: "+ns+"}\ndata: {a: b}\n")
	c.apply(kept, "argocd-controller")
	c.apply(obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: "+ns+"}\ndata: {mode: normal}\n"), "argocd-controller")
	// The render names no namespace: Argo CD's destination gives it.
	settings := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: normal}\n")
	oldNoNS := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: old}\ndata: {a: b}\n")
	reader, err := livestate.NewClusterReader(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	opts := drift.DefaultOptions()
	opts.DefaultNamespace = ns
	opts.NoPrune = "prune is off for Application argocd/shop: the reconciler leaves it in place"
	target, err := drift.Compare(context.Background(), reader, drift.Input{Path: "app", HasBase: true,
		Base: []*unstructured.Unstructured{settings, oldNoNS}, Head: []*unstructured.Unstructured{settings.DeepCopy()}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]drift.Change{}
	for _, ch := range target.Changes {
		got[ch.Namespace+"/"+ch.Name] = ch
	}
	if s, ok := got[ns+"/settings"]; !ok || s.Action != drift.ActionUnchanged {
		t.Errorf("the namespace-less object is compared in the destination namespace: %+v", target.Changes)
	}
	if o := got[ns+"/old"]; o.Action != drift.ActionKeep || o.KeptBy != opts.NoPrune || len(o.Danger) > 0 {
		t.Errorf("with prune off, what leaves Git is kept: %+v", o)
	}
}
