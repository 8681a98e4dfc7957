package prgen_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/prgen"
)

// TestALabelSetByTheKustomizationIsWrittenThere: a label that the
// overlay's `labels:` sets on every object, and an annotation its
// commonAnnotations sets, changed live on every object, are written into
// those entries, the entry's comment kept; changed on one object of two,
// they are left for a person with why; a label commonLabels sets (selectors
// too) is never rewritten.
func TestALabelSetByTheKustomizationIsWrittenThere(t *testing.T) {
	env := kubetest.New(t)
	ctx := context.Background()
	cms := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata: {a: b}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: api\ndata: {a: b}\n"
	tree, r, rendered := appliedTree(t, env, map[string]string{
		"app/kustomization.yaml":    "namespace: " + env.Namespace + "\nlabels:\n- pairs:\n    team: checkout # who owns it\ncommonAnnotations:\n  owner: alice\nresources: [cms.yaml]\n",
		"app/cms.yaml":              cms,
		"common/kustomization.yaml": "namespace: " + env.Namespace + "\nnamePrefix: common-\ncommonLabels:\n  tier: web\nresources: [cms.yaml]\n",
		"common/cms.yaml":           cms,
	}, "app", "common")
	dyn, err := dynamic.NewForConfig(env.Setup)
	if err != nil {
		t.Fatal(err)
	}
	configMaps := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(env.Namespace)
	relabel := func(name, label, value string) {
		t.Helper()
		cm, err := configMaps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		labels := cm.GetLabels()
		labels[label] = value
		cm.SetLabels(labels)
		if label == "team" {
			cm.SetAnnotations(map[string]string{"owner": "bob"})
		}
		if _, err := configMaps.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatal(err)
		}
	}
	cluster, err := livestate.NewClusterReader(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	plan := func(overlay string) *prgen.Plan {
		t.Helper()
		target, err := drift.Compare(ctx, cluster, drift.Input{Path: overlay, Head: rendered[overlay]}, drift.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		p, err := prgen.Make(ctx, prgen.Input{Tree: tree, Overlay: overlay, Renderer: r, Drift: target.Drift})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	relabel("web", "team", "payments")
	p := plan("app")
	if len(p.Codified) != 0 || len(p.Manual) != 2 {
		t.Fatalf("one object of two changed: codified %+v, manual %+v", p.Codified, p.Manual)
	}
	for _, m := range p.Manual {
		if !strings.Contains(m.Reason, "for every object of the overlay, and 1 of them keep Git's value live: change it there to change them all") {
			t.Errorf("%s: %s", m.Path, m.Reason)
		}
	}

	relabel("api", "team", "payments")
	p = plan("app")
	if len(p.Manual) != 0 || len(p.Codified) != 4 {
		t.Fatalf("every object changed: codified %+v, manual %+v", p.Codified, p.Manual)
	}
	want := "namespace: " + env.Namespace + "\nlabels:\n- pairs:\n    team: payments # who owns it\ncommonAnnotations:\n  owner: bob\nresources: [cms.yaml]\n"
	if got := string(p.Files["app/kustomization.yaml"]); got != want || len(p.Files) != 1 {
		t.Errorf("written:\n%s\nwant:\n%s", got, want)
	}

	relabel("common-web", "tier", "api")
	relabel("common-api", "tier", "api")
	p = plan("common")
	if len(p.Codified) != 0 || len(p.Manual) != 2 || !strings.Contains(p.Manual[0].Reason, "`commonLabels:` in common/kustomization.yaml, which sets selectors too") {
		t.Errorf("commonLabels: codified %+v, manual %+v", p.Codified, p.Manual)
	}
}
