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
		{"flux health check after the apply", flux, "status: {lastAppliedRevision: main@sha1:old, lastAttemptedRevision: main@sha1:abc, conditions: [{type: Ready, status: 'False', reason: HealthCheckFailed, message: timeout}]}", Done, ""},
		{"flux failed a later commit that holds it", flux, "status: {lastAppliedRevision: main@sha1:old, lastAttemptedRevision: main@sha1:later, conditions: [{type: Ready, status: 'False', reason: BuildFailed, message: boom}]}", Failed, "BuildFailed: boom"},
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

// TestArgoCDHealthCountsOnlyOnceComparedWithTheMerge: an Application's
// health right after its sync is of the commit before: it counts once the
// controller compared the cluster with the merge commit after the sync.
func TestArgoCDHealthCountsOnlyOnceComparedWithTheMerge(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	app := func(revision, reconciled, health string) *unstructured.Unstructured {
		return obj(t, `status:
  reconciledAt: "`+reconciled+`"
  sync: {status: Synced, revision: `+revision+`}
  health: {status: `+health+`}
  operationState: {phase: Succeeded, finishedAt: "2026-12-05T11:59:00Z", syncResult: {revision: abc}}
  resources: [{kind: Deployment, namespace: shop, name: web, health: {status: Degraded, message: "Deployment exceeded its progress deadline"}}]`)
	}
	m := Merge{SHA: "abc"}
	tg := Target{Name: "shop", Cluster: "prod", Found: &discover.Found{Reconciler: discover.ReconcilerArgoCD}}
	for _, c := range []struct {
		name        string
		app         *unstructured.Unstructured
		state, says string
	}{
		{"healthy before it compared", app("abc", "2026-12-05T11:58:00Z", "Healthy"), "in_progress", ""},
		{"healthy, compared with another commit", app("old", "2026-12-05T11:59:30Z", "Healthy"), "in_progress", ""},
		{"healthy once compared", app("abc", "2026-12-05T11:59:30Z", "Healthy"), "success", "Live on prod at 12:00 UTC: Healthy"},
		{"degraded once compared", app("abc", "2026-12-05T11:59:30Z", "Degraded"), "failure", "Degraded: Deployment/shop/web Degraded Deployment exceeded its progress deadline"},
	} {
		fl := New(Deps{Object: func(*discover.Found) *unstructured.Unstructured { return c.app }})
		state, says := fl.rollout(t.Context(), m, tg, nil, now.Add(-time.Minute), now)
		if state != c.state || says != c.says {
			t.Errorf("%s: %s %q, want %s %q", c.name, state, says, c.state, c.says)
		}
	}
}
