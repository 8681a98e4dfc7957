package drift_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftback/driftback/drift"
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
	reader, err := drift.NewClusterReader(log.wrap(c.env.Config))
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
	scope, err := drift.ScopeOf(context.Background(), reader, base)
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
		"*": drift.AnyKind, " StorageClass.storage.k8s.io ": {Group: "storage.k8s.io", Kind: "StorageClass"},
	} {
		if got, err := drift.ParseKind(in); err != nil || got != want {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "rbac.authorization.k8s.io/ClusterRole", "Cluster Role"} {
		if _, err := drift.ParseKind(bad); err == nil {
			t.Errorf("ParseKind(%q) is no error", bad)
		}
	}
}
