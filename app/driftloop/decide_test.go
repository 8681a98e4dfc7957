package driftloop

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

func scaled(replicas int64) drift.Change {
	return drift.Change{Action: drift.ActionUpdate, APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web",
		Fields: []object.Field{{Path: ".spec.replicas", Live: replicas, Desired: int64(3)}}}
}

// TestAChangeIsProposedOnceItStays: what the loop proposes, decided without
// GitHub or a cluster. A live change waits out the target's quiet period
// from when it was first seen with its value; a new value starts the wait
// over; a change that went away and comes back starts over too.
func TestAChangeIsProposedOnceItStays(t *testing.T) {
	d := &DriftLoop{}
	tg := targets.Target{Target: config.Target{Name: "shop"}}
	tg.Policy.QuietPeriod = 10 * time.Minute
	st := &targetState{seen: map[string]time.Time{}, present: map[string]bool{}}
	start := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	check := func(at time.Duration, changes ...drift.Change) (ready, time.Duration) {
		return d.quiet(st, tg, liveChanges{changes: changes}, start.Add(at), nil)
	}

	if r, wait := check(0, scaled(5)); len(r.changes) != 0 || wait != 10*time.Minute {
		t.Fatalf("first seen: %d ready, wait %v; want none, 10m", len(r.changes), wait)
	}
	if r, wait := check(4*time.Minute, scaled(5)); len(r.changes) != 0 || wait != 6*time.Minute {
		t.Fatalf("4m later: %d ready, wait %v; want none, 6m", len(r.changes), wait)
	}
	r, wait := check(10*time.Minute, scaled(5))
	if len(r.changes) != 1 || wait != 0 || r.key == "" {
		t.Fatalf("after the quiet period: %d ready, wait %v, key %q; want the change", len(r.changes), wait, r.key)
	}
	proposed := r.key
	// Someone scales again: the new value waits its own quiet period.
	if r, wait := check(11*time.Minute, scaled(6)); len(r.changes) != 0 || wait != 10*time.Minute {
		t.Fatalf("a new value: %d ready, wait %v; want none, 10m", len(r.changes), wait)
	}
	r, _ = check(21*time.Minute, scaled(6))
	if len(r.changes) != 1 || r.key == proposed {
		t.Fatalf("the new value once it stayed: %d ready, key %q (was %q)", len(r.changes), r.key, proposed)
	}
	// The change goes away (the reconciler reverted it), then comes back.
	if r, _ := check(22 * time.Minute); len(r.changes) != 0 {
		t.Fatalf("no drift: %d ready", len(r.changes))
	}
	if r, wait := check(23*time.Minute, scaled(6)); len(r.changes) != 0 || wait != 10*time.Minute {
		t.Fatalf("back again: %d ready, wait %v; want the wait to start over", len(r.changes), wait)
	}
}

// TestAnObjectIsDeletedLiveOnlyOnceItWasSeen: an object Git has and the
// cluster lacks counts as deleted by a person only after the loop saw it
// live; one Git just added may not be applied yet.
func TestAnObjectIsDeletedLiveOnlyOnceItWasSeen(t *testing.T) {
	st := &targetState{present: map[string]bool{}}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "notes", "namespace": "shop"}}}
	missing := drift.Change{Action: drift.ActionCreate, APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "notes"}
	desired := []*unstructured.Unstructured{cm}

	if got := observedDeletions(st, desired, []drift.Change{missing}); len(got) != 0 {
		t.Fatalf("never seen live, then missing: %+v, want no deletion", got)
	}
	if got := observedDeletions(st, desired, nil); len(got) != 0 {
		t.Fatalf("seen live: %+v", got)
	}
	if got := observedDeletions(st, desired, []drift.Change{missing}); len(got) != 1 {
		t.Fatalf("seen live, then missing: %+v, want the deletion", got)
	}
	if got := observedDeletions(st, desired, []drift.Change{missing}); len(got) != 1 {
		t.Fatalf("still missing: %+v, want the deletion still", got)
	}
}
