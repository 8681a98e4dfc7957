package syncfail_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/drift/scope"
	"github.com/driftback/driftback/drift/syncfail"
	"github.com/driftback/driftback/internal/testfs"
)

// TestMarkFlagsOnlyWhatCannotBeApplied: of a head render, a kind the
// cluster does not serve and the head does not define, and an Application
// whose AppProject exists neither in Argo CD's namespace nor in the head
// (one in the Application's own namespace is not read), fail the sync; a served kind, a kind the head's CRD defines and
// an Application whose project is in Argo CD's namespace (the one given)
// do not. A dump says nothing of either.
func TestMarkFlagsOnlyWhatCannotBeApplied(t *testing.T) {
	live := livestate.NewObjectReader(testfs.Objects(t,
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: team}\n",
		"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec: {group: example.com, names: {kind: Widget}, scope: Namespaced}\n",
		"apiVersion: argoproj.io/v1alpha1\nkind: AppProject\nmetadata: {name: default, namespace: argocd}\nspec: {}\n",
		"apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: live, namespace: argocd}\nspec: {project: default}\n",
		// Argo CD reads no AppProject outside its own namespace.
		"apiVersion: argoproj.io/v1alpha1\nkind: AppProject\nmetadata: {name: local, namespace: team}\nspec: {}\n"))
	head := testfs.Objects(t,
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fine, namespace: team}\n",
		"apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: blue, namespace: team}\n",
		"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: sprockets.example.com}\nspec: {group: example.com, names: {kind: Sprocket}}\n",
		"apiVersion: example.com/v1\nkind: Sprocket\nmetadata: {name: red, namespace: team}\n",
		"apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: shop, namespace: team}\nspec: {project: default}\n",
		"apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: ghost, namespace: team}\nspec: {project: ghost}\n",
		"apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: near, namespace: team}\nspec: {project: local}\n")
	target := func() *drift.Target {
		tg := &drift.Target{}
		for _, o := range head {
			tg.Changes = append(tg.Changes, drift.Change{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), Action: drift.ActionCreate})
		}
		return tg
	}
	tg := target()
	if err := syncfail.Mark(context.Background(), live, head, "", "", tg); err != nil {
		t.Fatal(err)
	}
	failing := map[string]string{}
	for _, c := range tg.Changes {
		for _, d := range c.Danger {
			failing[c.Kind+"/"+c.Name] = d.Message
		}
	}
	if len(failing) != 3 || !strings.Contains(failing["Gadget/blue"], `no matches for kind "Gadget"`) || !strings.Contains(failing["Application/ghost"], "AppProject ghost does not exist") ||
		!strings.Contains(failing["Application/near"], "AppProject local does not exist in argocd") {
		t.Errorf("sync-fails on %v; want Gadget/blue, Application/ghost and Application/near only", failing)
	}
	// Argo CD installed elsewhere: the project in "argocd" is not its.
	tg = target()
	if err := syncfail.Mark(context.Background(), live, head, "", "gitops", tg); err != nil {
		t.Fatal(err)
	}
	for _, c := range tg.Changes {
		if c.Kind+"/"+c.Name == "Application/shop" && len(c.Danger) == 0 {
			t.Errorf("with Argo CD in gitops, Application/shop's project default (live in argocd only) was found")
		}
	}
	// Argo CD's namespace outside what may be read: said, never taken for
	// "the project exists".
	tg = target()
	team := scope.NewReader(live, &scope.Scope{Namespaces: map[string]bool{"team": true}, ClusterKinds: map[schema.GroupKind]bool{scope.AnyKind: true}})
	if err := syncfail.Mark(context.Background(), team, head, "", "", tg); err == nil || !strings.Contains(err.Error(), "whether the AppProject default of Application team/shop exists could not be read") {
		t.Errorf("an AppProject that may not be read: %v", err)
	}
	dump, err := livestate.ReadDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tg = target()
	if err := syncfail.Mark(context.Background(), dump, head, "", "", tg); err != nil {
		t.Fatal(err)
	}
	for _, c := range tg.Changes {
		if len(c.Danger) > 0 {
			t.Errorf("a dump says %s/%s fails: %v", c.Kind, c.Name, c.Danger)
		}
	}
}

// TestABuildThatFailsAppliesNothing: a target whose build fails tells only
// that: none of its live changes, nor the Git dangers of what the live
// state could not be compared on, is what a sync does; its Git change stays.
func TestABuildThatFailsAppliesNothing(t *testing.T) {
	pvc := drift.Change{APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: "shop", Name: "data", Action: drift.ActionDelete,
		Danger: []drift.Danger{{Reason: drift.DangerPVCRemoval, Count: 1}}}
	tg := &drift.Target{Changes: []drift.Change{{Kind: "ConfigMap", Name: "web", Action: drift.ActionUpdate}}, Unread: []drift.Change{pvc}, OutOfScope: []drift.Change{pvc}, PR: []drift.Change{pvc}}
	syncfail.Build(tg, object.Ref{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization", Namespace: "flux-system", Name: "apps"}, `configmaps "vars" not found`)
	told := tg.Told()
	if len(told) != 1 || told[0].Kind != "Kustomization" || len(told[0].Danger) != 1 || told[0].Danger[0].Reason != drift.DangerSyncFails {
		t.Errorf("a failed build tells %+v; want its sync-fails only", told)
	}
	if len(tg.PR) != 2 || tg.PR[0].Name != "data" {
		t.Errorf("the pull request's Git change is lost: %+v", tg.PR)
	}
}
