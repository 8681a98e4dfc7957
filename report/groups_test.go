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
