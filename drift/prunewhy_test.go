package drift_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
)

// TestEveryPruneSaysWhy: each object a sync deletes says why it leaves, in
// one line: a generated ConfigMap's new name, a Deployment moved to another
// namespace, a Service no longer rendered, an object a sync applied before
// that neither side renders; in the live impact and in the Git change.
func TestEveryPruneSaysWhy(t *testing.T) {
	cm := func(name string) *unstructured.Unstructured {
		return obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+name+", namespace: shop, labels: {app.kubernetes.io/part-of: shop}}\ndata: {a: b}\n")
	}
	deploy := func(ns string) *unstructured.Unstructured {
		return obj(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: "+ns+", labels: {app.kubernetes.io/part-of: shop}}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: nginx}]}\n")
	}
	svc := obj(t, "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop, labels: {app.kubernetes.io/part-of: shop}}\nspec: {ports: [{port: 80}]}\n")
	old := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leftover, namespace: shop, labels: {app.kubernetes.io/part-of: shop}}\n")
	// A Role in two teams' namespaces, one removed: the other is no
	// successor, it was there before.
	role := func(ns string) *unstructured.Unstructured {
		return obj(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: read, namespace: "+ns+", labels: {app.kubernetes.io/part-of: shop}}\nrules: []\n")
	}
	base := []*unstructured.Unstructured{cm("settings-5m9f8ttmdb"), deploy("shop"), svc, role("team-a"), role("team-b")}
	head := []*unstructured.Unstructured{cm("settings-g7hk24bc9d"), deploy("shop-v2"), role("team-b")}
	live := livestate.NewObjectReader(append(append([]*unstructured.Unstructured{}, base...), old))
	opts := drift.DefaultOptions()
	opts.Tracking = drift.Tracking{Selector: "app.kubernetes.io/part-of=shop"}
	target, err := drift.Compare(context.Background(), live, drift.Input{Path: "shop", Base: base, Head: head, HasBase: true}, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ConfigMap/shop/settings-5m9f8ttmdb": "replaced by settings-g7hk24bc9d: a generated name changes with its content",
		"Deployment/shop/web":                "moves to namespace shop-v2: the object there is new, and this one is pruned",
		"Service/shop/web":                   "the head no longer renders it",
		"ConfigMap/shop/leftover":            "still live from an earlier sync, and in neither the base nor the head render",
		"Role/team-a/read":                   "the head no longer renders it",
	}
	why := func(what string, cs []drift.Change, want map[string]string) {
		t.Helper()
		seen := 0
		for _, c := range cs {
			if c.Action != drift.ActionDelete {
				continue
			}
			seen++
			ref := c.Kind + "/" + c.Namespace + "/" + c.Name
			if c.Why != want[ref] {
				t.Errorf("%s: %s: why %q, want %q", what, ref, c.Why, want[ref])
			}
		}
		if seen != len(want) {
			t.Errorf("%s: %d deletes, want %d", what, seen, len(want))
		}
	}
	why("live impact", target.Changes, want)
	delete(want, "ConfigMap/shop/leftover") // Git never held it
	why("Git change", target.PR, want)

	// An overlay that renders nothing at head.
	target, err = drift.Compare(context.Background(), live, drift.Input{Path: "shop", Base: base, HasBase: true}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range target.Changes {
		if c.Action == drift.ActionDelete && c.Why != "the overlay renders nothing at head" {
			t.Errorf("%s/%s: why %q", c.Kind, c.Name, c.Why)
		}
	}
}
