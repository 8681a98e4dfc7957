package aftermerge

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/discover"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestWhatAReconcilerDidWithACommit: applied (or a later commit that holds
// it), failed in its own words (a health check after the apply is not a
// failed apply), or not yet; for Flux and Argo CD.
func TestWhatAReconcilerDidWithACommit(t *testing.T) {
	flux := &discover.Found{Reconciler: discover.ReconcilerFlux}
	argo := &discover.Found{Reconciler: discover.ReconcilerArgoCD}
	later := func(rev string) bool { return rev == "later" }
	for _, c := range []struct {
		name string
		f    *discover.Found
		y    string
		want Applied
		why  string
	}{
		{"flux applied", flux, "status: {lastAppliedRevision: main@sha1:abc}", Done, ""},
		{"flux applied a later commit", flux, "status: {lastAppliedRevision: main@sha1:later}", Done, ""},
		{"flux applied an older commit", flux, "status: {lastAppliedRevision: main@sha1:old}", Waiting, ""},
		{"flux build failed", flux, "status: {lastAppliedRevision: main@sha1:old, lastAttemptedRevision: main@sha1:abc, conditions: [{type: Ready, status: 'False', reason: BuildFailed, message: boom}]}", Failed, "BuildFailed: boom"},
		{"flux failed an older commit", flux, "status: {lastAppliedRevision: main@sha1:old, lastAttemptedRevision: main@sha1:old, conditions: [{type: Ready, status: 'False', reason: BuildFailed, message: boom}]}", Waiting, ""},
		{"flux health check after the apply", flux, "status: {lastAppliedRevision: main@sha1:old, lastAttemptedRevision: main@sha1:abc, conditions: [{type: Ready, status: 'False', reason: HealthCheckFailed, message: timeout}]}", Waiting, ""},
		{"argo synced", argo, "status: {operationState: {phase: Succeeded, syncResult: {revision: abc}}}", Done, ""},
		{"argo sync failed", argo, "status: {operationState: {phase: Failed, message: 'one or more objects failed', syncResult: {revision: abc}}}", Failed, "its sync ended failed: one or more objects failed"},
		{"argo nothing to apply", argo, "status: {sync: {status: Synced, revision: abc}}", Done, ""},
		{"argo still on the old commit", argo, "status: {operationState: {phase: Succeeded, syncResult: {revision: old}}, sync: {status: OutOfSync, revision: abc}}", Waiting, ""},
	} {
		got, why := Progress(c.f, obj(t, c.y), "abc", later)
		if got != c.want || why != c.why {
			t.Errorf("%s: %v %q, want %v %q", c.name, got, why, c.want, c.why)
		}
	}
}

// TestOnlyWhatTheApplyChangedIsFollowed: a workload counts when the
// reconciler's field manager wrote it at or after the merge, or it is that
// new; a workload another writer touched since does not.
func TestOnlyWhatTheApplyChangedIsFollowed(t *testing.T) {
	merged := time.Date(2026, 12, 5, 12, 0, 0, 500, time.UTC)
	at := func(d time.Duration) *metav1.Time {
		x := metav1.NewTime(merged.Add(d).Truncate(time.Second))
		return &x
	}
	u := &unstructured.Unstructured{}
	u.SetCreationTimestamp(*at(-time.Hour))
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kustomize-controller", Time: at(-time.Hour)}, {Manager: "kubectl", Time: at(time.Minute)}})
	if ChangedSince(u, fluxManagers, merged) {
		t.Error("an object the reconciler last wrote an hour before the merge counts as changed by it")
	}
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kustomize-controller", Time: at(0)}})
	if !ChangedSince(u, fluxManagers, merged) {
		t.Error("an object the reconciler wrote in the merge's second does not count")
	}
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kustomize-controller", Time: at(time.Minute), Subresource: "status"}})
	if ChangedSince(u, fluxManagers, merged) {
		t.Error("a status write counts as the apply")
	}
	u.SetCreationTimestamp(*at(time.Minute))
	if !ChangedSince(u, fluxManagers, merged) {
		t.Error("an object created after the merge does not count")
	}
}
