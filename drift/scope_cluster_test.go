package drift_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/scope"
	"github.com/driftback/driftback/report"
)

// TestScopeKeepsObjectsOutsideFromTheCluster: objects a render holds outside
// the scope are compared in Git only: never read, no live value, owner or
// danger; the rest is compared as ever.
func TestScopeKeepsObjectsOutsideFromTheCluster(t *testing.T) {
	c := newCluster(t)
	ns := c.env.Namespace
	mine := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mine\n  namespace: "+ns+"\ndata:\n  mode: normal\n")
	theirs := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: theirs-"+ns+"\n  namespace: kube-system\ndata:\n  token: live-secret-value\n")
	role := obj(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: scope-"+ns+"\nrules:\n- apiGroups: ['']\n  resources: [pods]\n  verbs: [get]\n")
	c.apply(mine, "kustomize-controller")
	c.apply(theirs, "someone-else")
	c.apply(role, "someone-else")
	t.Cleanup(func() { c.delete(theirs); c.delete(role) })

	var log requestLog
	reader, err := livestate.NewClusterReader(log.wrap(c.env.Config))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(u *unstructured.Unstructured, key, value string) *unstructured.Unstructured {
		u = u.DeepCopy()
		if err := unstructured.SetNestedField(u.Object, value, "data", key); err != nil {
			t.Fatal(err)
		}
		return u
	}
	base := []*unstructured.Unstructured{mine}
	head := []*unstructured.Unstructured{edit(mine, "mode", "fast"), edit(theirs, "token", "harmless"), role}
	scope, err := scope.Of(context.Background(), reader, base)
	if err != nil {
		t.Fatal(err)
	}
	opts := drift.DefaultOptions()
	opts.Scope = scope
	target, err := drift.Compare(context.Background(), reader, drift.Input{Path: "p", Base: base, Head: head, HasBase: true}, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := jsonOf(t, target)
	if strings.Contains(out, "live-secret-value") || strings.Contains(out, "someone-else") {
		t.Fatalf("the report shows what lies outside the scope:\n%s", out)
	}
	if n := log.count("/namespaces/kube-system/configmaps/theirs-"+ns) + log.count("/clusterroles/scope-"+ns) + log.count("/clusterroles") + log.count("/api/v1/configmaps"); n != 0 {
		t.Errorf("%d requests for objects outside the scope: %v", n, log.paths)
	}
	if len(target.OutOfScope) != 2 || target.OutOfScope[0].Kind != "ClusterRole" || target.OutOfScope[0].Action != drift.ActionCreate ||
		target.OutOfScope[1].Namespace != "kube-system" || target.OutOfScope[1].Note != drift.OutOfScopeNote {
		t.Errorf("out of scope: %s", jsonOf(t, target.OutOfScope))
	}
	if len(target.Changes) != 1 || target.Changes[0].Name != "mine" || len(target.Changes[0].Fields) != 1 || target.Changes[0].Fields[0].Live != "normal" {
		t.Errorf("what is in scope is not compared as ever: %s", jsonOf(t, target.Changes))
	}
	for _, ch := range target.PR {
		if ch.Name == "theirs-"+ns && ch.Action != drift.ActionCreate {
			t.Errorf("the Git comparison leaves out objects outside the scope: %s", jsonOf(t, target.PR))
		}
	}

	// Widened, both are compared: the live value is there to show.
	if err := scope.Widen([]string{"kube-system"}, []string{"ClusterRole.rbac.authorization.k8s.io"}); err != nil {
		t.Fatal(err)
	}
	target, err = drift.Compare(context.Background(), reader, drift.Input{Path: "p", Base: base, Head: head, HasBase: true}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(target.OutOfScope) != 0 || !strings.Contains(jsonOf(t, target), "someone-else") {
		t.Errorf("a widened scope still leaves objects out: %s", jsonOf(t, target))
	}
}

func TestParseKind(t *testing.T) {
	for in, want := range map[string]schema.GroupKind{
		"Namespace": {Kind: "Namespace"}, "ClusterRole.rbac.authorization.k8s.io": {Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"},
		"*": scope.AnyKind, " StorageClass.storage.k8s.io ": {Group: "storage.k8s.io", Kind: "StorageClass"},
	} {
		if got, err := scope.ParseKind(in); err != nil || got != want {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "rbac.authorization.k8s.io/ClusterRole", "Cluster Role"} {
		if _, err := scope.ParseKind(bad); err == nil {
			t.Errorf("ParseKind(%q) is no error", bad)
		}
	}
}

// TestClusterScopedObjectsAreInScopeByName: a target that renders one
// ClusterRole may read that ClusterRole, not every ClusterRole: a pull request
// that adds another (say a break-glass role someone made by hand) compares it
// in Git only. Counts that would mean reading outside the scope (what a
// namespace the target does not deploy to holds, how many custom resources
// a CRD has in other namespaces) say they are unknown, and no request for
// them reaches the cluster.
func TestClusterScopedObjectsAreInScopeByName(t *testing.T) {
	c := newCluster(t)
	ns := c.env.Namespace
	role := func(name string) *unstructured.Unstructured {
		return obj(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: "+name+"-"+ns+"\nrules:\n- apiGroups: ['']\n  resources: [pods]\n  verbs: [get]\n")
	}
	mine, breakGlass := role("reader"), role("break-glass")
	other := ns + "-other"
	namespace := obj(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+other+"\n")
	held := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: "+other+"\ndata: {a: b}\n")
	c.apply(mine, "kustomize-controller")
	c.apply(breakGlass, "kubectl-edit")
	c.apply(namespace, "kustomize-controller")
	c.apply(held, "someone-else")
	t.Cleanup(func() { c.delete(mine); c.delete(breakGlass); c.delete(held); c.delete(namespace) })

	var log requestLog
	reader, err := livestate.NewClusterReader(log.wrap(c.env.Config))
	if err != nil {
		t.Fatal(err)
	}
	base := []*unstructured.Unstructured{mine, namespace}
	scope, err := scope.Of(context.Background(), reader, base)
	if err != nil {
		t.Fatal(err)
	}
	opts := drift.DefaultOptions()
	opts.Scope = scope
	// The head adds the break-glass role and drops the namespace.
	head := []*unstructured.Unstructured{mine, breakGlass}
	target, err := drift.Compare(context.Background(), reader, drift.Input{Path: "p", Base: base, Head: head, HasBase: true}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(target.OutOfScope) != 1 || target.OutOfScope[0].Name != breakGlass.GetName() || target.OutOfScope[0].Action != drift.ActionCreate {
		t.Errorf("out of scope: %s, want the break-glass role alone", jsonOf(t, target.OutOfScope))
	}
	out := jsonOf(t, target)
	if strings.Contains(out, "kubectl-edit") || strings.Contains(out, "someone-else") || strings.Contains(out, "ConfigMap") {
		t.Errorf("the report shows what lies outside the scope:\n%s", out)
	}
	// The namespace's removal says its count is unknown, and leaves no
	// count behind for a later restore to quote (a CRD's: in
	// TestAnUnknownCountIsNotRecorded).
	for _, kind := range []string{"Namespace"} {
		var removal *drift.Change
		for i, ch := range target.Changes {
			if ch.Kind == kind {
				removal = &target.Changes[i]
			}
		}
		if removal == nil || len(removal.Danger) != 1 || !strings.Contains(removal.Danger[0].Message, "unknown, outside this target's scope") ||
			!removal.Danger[0].CountUnknown {
			t.Errorf("the %s's removal: %s, want its count unknown", kind, jsonOf(t, removal))
			continue
		}
		if m := report.LostMarker(removal.Danger[0], *removal); m != "" {
			t.Errorf("the %s's removal records a count it does not know: %s", kind, m)
		}
	}
	if n := log.count("/clusterroles/"+breakGlass.GetName()) + log.count("/namespaces/"+other+"/") + log.count("/api/v1/configmaps"); n != 0 {
		t.Errorf("%d requests outside the scope: %v", n, log.paths)
	}
}

// TestReadsOutsideTheScopeAreRefused: what a comparison reads beyond the
// objects it plans (the objects a reconciler tracks, for prune) is read
// within the scope only: an object carrying the target's tracking label in
// a namespace the target does not deploy to (set there by hand, or by a
// tenant) is neither read nor listed as a prune.
func TestReadsOutsideTheScopeAreRefused(t *testing.T) {
	c := newCluster(t)
	ns := c.env.Namespace
	other := ns + "-elsewhere"
	labels := "  labels: {kustomize.toolkit.fluxcd.io/name: apps, kustomize.toolkit.fluxcd.io/namespace: flux-system}\n"
	mine := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mine\n  namespace: "+ns+"\n"+labels+"data: {a: b}\n")
	gone := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gone\n  namespace: "+ns+"\n"+labels+"data: {a: b}\n")
	namespace := obj(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+other+"\n")
	stray := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stray\n  namespace: "+other+"\n"+labels+"data: {token: elsewhere-value}\n")
	for _, o := range []*unstructured.Unstructured{mine, gone, namespace, stray} {
		c.apply(o, "kustomize-controller")
	}
	t.Cleanup(func() { c.delete(stray); c.delete(namespace) })
	var log requestLog
	reader, err := livestate.NewClusterReader(log.wrap(c.env.Config))
	if err != nil {
		t.Fatal(err)
	}
	base := []*unstructured.Unstructured{mine, gone}
	scope, err := scope.Of(context.Background(), reader, base)
	if err != nil {
		t.Fatal(err)
	}
	opts := drift.DefaultOptions()
	opts.Scope, opts.Tracking = scope, drift.Tracking{FluxName: "apps", FluxNamespace: "flux-system"}
	target, err := drift.Compare(context.Background(), reader, drift.Input{Path: "p", Base: base, Head: []*unstructured.Unstructured{mine}, HasBase: true}, opts)
	if err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, ch := range target.Changes {
		if ch.Action == drift.ActionDelete {
			deleted = append(deleted, ch.Namespace+"/"+ch.Name)
		}
	}
	if len(deleted) != 1 || deleted[0] != ns+"/gone" {
		t.Errorf("prunes %v, want %s/gone alone", deleted, ns)
	}
	if strings.Contains(jsonOf(t, target), "stray") {
		t.Errorf("the report names an object outside the scope:\n%s", jsonOf(t, target))
	}
	if n := log.count("/namespaces/"+other+"/") + log.count("/api/v1/configmaps"); n != 0 {
		t.Errorf("%d requests outside the scope: %v", n, log.paths)
	}
}
