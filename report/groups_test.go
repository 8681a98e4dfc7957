package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

// tenants is n targets that each change the same Deployment in their own
// namespace, with a PVC removal that fails their checks.
func tenants(n int) (*drift.Report, []Failing) {
	rep := &drift.Report{}
	var failing []Failing
	for i := range n {
		ns := fmt.Sprintf("tenant-%03d", i)
		web := drift.Change{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web", Action: drift.ActionUpdate,
			Fields: []object.Field{{Path: ".spec.template.spec.containers[name=\"web\"].image", Kind: object.FieldPR, Base: "web:1.4.0", Desired: "web:1.5.0", Live: "web:1.4.0"}}}
		pvc := drift.Change{APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: ns, Name: "cache", Action: drift.ActionDelete,
			Manifest: "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: cache\n  namespace: " + ns + "\n",
			Danger:   []drift.Danger{{Reason: drift.DangerPVCRemoval, Count: 1, Message: "its data is deleted"}}}
		path := "tenants/" + ns
		rep.Targets = append(rep.Targets, drift.Target{Path: path, Changes: []drift.Change{web, pvc}})
		failing = append(failing, Failing{Target: path, Reasons: []string{"pvc-removal (1)"}, On: []drift.DangerReason{drift.DangerPVCRemoval}, AckLabel: "driftback/accept"})
	}
	return rep, failing
}

// TestTargetsWithTheSameChangesAreToldOnce: 300 targets that each make the
// same two changes in their own namespace read as one row, one danger and
// one section listing the 300, in one comment; a target whose changes
// differ is told on its own.
func TestTargetsWithTheSameChangesAreToldOnce(t *testing.T) {
	rep, failing := tenants(300)
	// One tenant's image differs: not the same changes.
	odd := &rep.Targets[150].Changes[0].Fields[0]
	odd.Desired = "web:1.6.0"
	parts := Comment(rep, CommentOptions{Failing: failing, Checked: true})
	if len(parts) != 1 {
		t.Fatalf("the comment takes %d parts, want one", len(parts))
	}
	out := parts[0]
	for _, want := range []string{
		"❌ **The check fails** on pvc-removal (1) in `tenants/tenant-000`, `tenants/tenant-001`, `tenants/tenant-002` and 297 more targets.",
		"| `tenants/tenant-000` and 298 more targets with the same changes | 0 | 1 | 1 | 0 | **1** | 0 |",
		"| `tenants/tenant-150` | 0 | 1 | 1 | 0 | **1** | 0 |",
		"### ⚠️ Dangers this pull request brings (2)",
		"1. data lost · **pvc-removal** `PersistentVolumeClaim/tenant-000/cache` in `tenants/tenant-000` and 298 more targets with the same changes (delete) ❌ **fails the check**",
		"### `tenants/tenant-000` and 298 more targets with the same changes\n\n<details><summary>The 299 targets</summary>\n\n- `tenants/tenant-000`\n- `tenants/tenant-001`\n",
		"> Shown as in `tenants/tenant-000`; each of the others has the same changes in its own namespace.",
		"- The checks of `tenants/tenant-000`, `tenants/tenant-001`, `tenants/tenant-002` and 297 more targets fail on pvc-removal (1).",
		"### `tenants/tenant-150`\n\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the comment does not say %q", want)
		}
	}
	if n := strings.Count(out, "Deployment/tenant-"); n != 2 {
		t.Errorf("the Deployment is told %d times, want twice (the group's and the odd tenant's)", n)
	}
	if len(out) > 40_000 {
		t.Errorf("the comment is %d characters", len(out))
	}
	if t.Failed() {
		t.Log(out)
	}
}

// TestTargetsThatDifferOnlyInContentAreNotGrouped: two tenants that each
// create a ClusterRoleBinding to cluster-admin, one for its own team's
// account and one for an account in kube-system, are told apart: a
// namespace inside an object is content, not the target's own.
func TestTargetsThatDifferOnlyInContentAreNotGrouped(t *testing.T) {
	crb := func(tenant, subjectNS string) drift.Target {
		binding := drift.Change{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding", Name: "ops", Action: drift.ActionCreate,
			Manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: ops\nroleRef:\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: ServiceAccount\n  name: ops\n  namespace: " + subjectNS + "\n"}
		sa := drift.Change{APIVersion: "v1", Kind: "ServiceAccount", Namespace: tenant, Name: "ops", Action: drift.ActionCreate,
			Manifest: "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: ops\n  namespace: " + tenant + "\n"}
		return drift.Target{Path: "tenants/" + tenant, Changes: []drift.Change{binding, sa}}
	}
	rep := &drift.Report{Targets: []drift.Target{crb("tenant-a", "tenant-a"), crb("tenant-b", "kube-system"), crb("tenant-c", "tenant-c")}}
	out := strings.Join(Comment(rep, CommentOptions{}), "")
	if !strings.Contains(out, "namespace: kube-system") || !strings.Contains(out, "### `tenants/tenant-b`\n") {
		t.Errorf("the tenant binding kube-system's account is not told on its own:\n%s", out)
	}
	if !strings.Contains(out, "### `tenants/tenant-a` and 1 more target with the same changes") {
		t.Errorf("the tenants binding their own account are not grouped:\n%s", out)
	}
	// The binding alone (no object in the tenant's namespace): the
	// subjects' namespaces are content, and they differ.
	for i := range rep.Targets {
		rep.Targets[i].Changes = rep.Targets[i].Changes[:1]
	}
	rep.Targets = rep.Targets[:2]
	if out := strings.Join(Comment(rep, CommentOptions{}), ""); !strings.Contains(out, "namespace: kube-system") || strings.Contains(out, "with the same changes") {
		t.Errorf("bindings of different namespaces' accounts are grouped:\n%s", out)
	}
}

// TestAGroupsDangerFailsWhenAnyOfItsTargetsFails: the danger of a group is
// marked as failing the check when a check of any target of the group
// fails on it, not only the first's.
func TestAGroupsDangerFailsWhenAnyOfItsTargetsFails(t *testing.T) {
	rep, failing := tenants(3)
	out := strings.Join(Comment(rep, CommentOptions{Failing: failing[2:], Checked: true}), "")
	if !strings.Contains(out, "and 2 more targets with the same changes (delete) ❌ **fails the check**") {
		t.Errorf("the group's danger is not marked as failing:\n%s", out)
	}
}

// TestTargetsWithNothingToTellAreOneRow: targets that change nothing are
// one row, said as such.
func TestTargetsWithNothingToTellAreOneRow(t *testing.T) {
	rep := &drift.Report{Targets: []drift.Target{{Path: "clusters/prod"}, {Path: "clusters/staging"}}}
	out := strings.Join(Comment(rep, CommentOptions{}), "")
	if !strings.Contains(out, "| `clusters/prod` and 1 more target, none changed | 0 | 0 | 0 | 0 | 0 | 0 |") {
		t.Errorf("the unchanged targets:\n%s", out)
	}
}
