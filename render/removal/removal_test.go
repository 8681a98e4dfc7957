package removal_test

import (
	"testing"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/internal/testfs"
	"github.com/driftback/driftback/render/removal"
)

// TestAPruneNamesTheChangeOfGitThatRemovesIt: an object whose file is
// deleted, one removed from its file, one whose directory is dropped from
// the overlay's resources, and the objects of an overlay removed whole
// each say which change removes them; an object that moved keeps its
// reason, and one whose source is not found keeps the general one.
func TestAPruneNamesTheChangeOfGitThatRemovesIt(t *testing.T) {
	cm := func(name string) string { return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n" }
	base := testfs.Tree(t, map[string]string{
		"app/kustomization.yaml":       "resources: [a.yaml, b.yaml, extra]\n",
		"app/a.yaml":                   cm("one") + "---\n" + cm("two"),
		"app/b.yaml":                   "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n",
		"app/extra/kustomization.yaml": "resources: [x.yaml]\n",
		"app/extra/x.yaml":             cm("x"),
		"old/kustomization.yaml":       "resources: [o.yaml]\n",
		"old/o.yaml":                   cm("o"),
	})
	head := testfs.Tree(t, map[string]string{
		"app/kustomization.yaml":       "resources: [a.yaml]\n",
		"app/a.yaml":                   cm("one"),
		"app/extra/kustomization.yaml": "resources: [x.yaml]\n",
		"app/extra/x.yaml":             cm("x"),
	})
	del := func(kind, ns, name, why string) drift.Change {
		return drift.Change{APIVersion: "v1", Kind: kind, Namespace: ns, Name: name, Action: drift.ActionDelete, Why: why}
	}
	target := &drift.Target{Path: "app", Changes: []drift.Change{
		del("ConfigMap", "shop", "two", drift.WhyNotRendered),
		del("Service", "shop", "web", drift.WhyNotRendered),
		del("ConfigMap", "shop", "x", drift.WhyNotRendered),
		del("Service", "other", "web", drift.WhyNotRendered), // b.yaml names namespace shop: not this one
		del("Deployment", "shop", "api", "moves to namespace shop-v2: the object there is new, and this one is pruned"),
	}, PR: []drift.Change{del("ConfigMap", "shop", "two", drift.WhyNotRendered)}}
	removal.Explain(base, head, "app", target)
	want := []string{
		"removed from a.yaml at head",
		"its file b.yaml is deleted at head",
		"extra/x.yaml is no longer in the overlay (the resources of kustomization.yaml changed)",
		drift.WhyNotRendered,
		"moves to namespace shop-v2: the object there is new, and this one is pruned",
	}
	for i, c := range target.Changes {
		if c.Why != want[i] {
			t.Errorf("%s/%s/%s: why %q, want %q", c.Kind, c.Namespace, c.Name, c.Why, want[i])
		}
	}
	if target.PR[0].Why != want[0] {
		t.Errorf("the Git change's prune: why %q", target.PR[0].Why)
	}
	// The overlay's kustomization removed, its directory kept: a
	// generated object (in no file) says so.
	kept := testfs.Tree(t, map[string]string{"app/a.yaml": cm("one")})
	gen := &drift.Target{Path: "app", Changes: []drift.Change{del("ConfigMap", "shop", "settings-5m9f8ttmdb", drift.WhyNothingRendered)}}
	removal.Explain(base, kept, "app", gen)
	if got := gen.Changes[0].Why; got != "kustomization.yaml is removed from the overlay at head" {
		t.Errorf("a generated object of an overlay whose kustomization is removed: why %q", got)
	}
	gone := &drift.Target{Path: "old", Changes: []drift.Change{del("ConfigMap", "shop", "o", drift.WhyNothingRendered)}}
	removal.Explain(base, head, "old", gone)
	if got := gone.Changes[0].Why; got != "its overlay old is removed at head" {
		t.Errorf("an overlay removed whole: why %q", got)
	}
}
