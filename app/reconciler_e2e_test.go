package app

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/discover"
)

// TestAFailingReconcilerHoldsItsTargetsDrift: the Flux Kustomization that
// applies the target says it fails (Ready False, BuildFailed, as
// kustomize-controller writes it). What differs on the cluster is then Git
// not applied, not drift: the dashboard says the reconciler fails, in its
// own words, offers no "propose now", the stalled metric is 1, and /readyz
// names it. Once it applies again, the target is compared as before.
func TestAFailingReconcilerHoldsItsTargetsDrift(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, time.Hour, nil)
	d.discoverFlux(nil)
	ns := d.env.Namespace
	d.apply(fluxKustomization(ns, "prod", "deploy/prod"))
	ready := func(status, reason, message string) {
		t.Helper()
		u := &unstructured.Unstructured{}
		at := time.Now().Add(-7 * 24 * time.Hour).UTC().Format(time.RFC3339)
		if err := yaml.Unmarshal([]byte(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: prod, namespace: `+ns+`}
status:
  observedGeneration: 1
  conditions: [{type: Ready, status: "`+status+`", reason: `+reason+`, message: "`+message+`", lastTransitionTime: "`+at+`"}]`), &u.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := dynamic.NewForConfigOrDie(d.env.Setup).Resource(discover.FluxKustomizations).Namespace(ns).ApplyStatus(context.Background(), "prod", u,
			metav1.ApplyOptions{FieldManager: "kustomize-controller", Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	ready("False", "BuildFailed", "kustomize build failed: map[string]interface {}(nil): yaml: unmarshal errors")
	d.discovered("deploy/prod")
	d.run()
	d.scale(5, "kubectl")
	body := d.dashboardSays("the failing reconciler", "Reconciler not applying Git", "its reconciler is **failing** since",
		"BuildFailed: kustomize build failed", "1 target's reconciler is not applying Git")
	if strings.Contains(body.Body, "propose now") {
		t.Errorf("the dashboard offers to propose what a failing reconciler left unapplied:\n%s", body.Body)
	}
	labels := map[string]string{"repo": fullName, "target": "prod", "cluster": "test"}
	if v := gauge(t, d.srv.Metrics, "driftback_reconciler_stalled", labels); v != 1 {
		t.Errorf("driftback_reconciler_stalled = %v, want 1", v)
	}
	if v := gauge(t, d.srv.Metrics, "driftback_drift_caches_synced", map[string]string{"cluster": "test"}); v != 1 {
		t.Errorf("driftback_drift_caches_synced = %v, want 1", v)
	}
	if last := gauge(t, d.srv.Metrics, "driftback_drift_last_check_timestamp_seconds", labels); time.Since(time.Unix(int64(last), 0)) > time.Minute {
		t.Errorf("the last check's time is %v, want now", time.Unix(int64(last), 0))
	}
	if s := strings.Join(d.srv.App.targets.Status(), "\n"); !strings.Contains(s, "Kustomization "+ns+"/prod is failing since") || !strings.Contains(s, "BuildFailed") {
		t.Errorf("/readyz's status does not name the failing reconciler:\n%s", s)
	}
	if p := d.openPulls(); len(p) != 0 {
		t.Errorf("drift pull requests for a failing reconciler's target: %+v", p)
	}

	// It applies again: the scale is drift, shown with its box.
	ready("True", "ReconciliationSucceeded", "Applied revision: main@sha1:0")
	d.dashboardSays("the drift once the reconciler applies, and what the reconciler does with it", "propose now",
		"kustomize-controller applies Git every 1s: its next apply, at most 1s after a change, reverts the fields Git sets")
	if v := gauge(t, d.srv.Metrics, "driftback_reconciler_stalled", labels); v != 0 {
		t.Errorf("driftback_reconciler_stalled = %v once it applies, want 0", v)
	}

	// Silent: its GitRepository fetched a commit two hours ago that it
	// has not applied (the bound is 5 minutes: its interval is 1s).
	dyn := dynamic.NewForConfigOrDie(d.env.Setup)
	src := &unstructured.Unstructured{}
	fetched := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	if err := yaml.Unmarshal([]byte(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: `+ns+`}
status:
  artifact: {revision: "main@sha1:`+strings.Repeat("c", 40)+`", lastUpdateTime: "`+fetched+`", path: p, url: u, digest: "sha256:0"}`), &src.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(discover.FluxGitRepositories).Namespace(ns).ApplyStatus(context.Background(), "fleet", src,
		metav1.ApplyOptions{FieldManager: "source-controller", Force: true}); err != nil {
		t.Fatal(err)
	}
	d.dashboardSays("the stalled reconciler", "its reconciler is **stalled** since", "it has not applied main@", strings.Repeat("c", 40)+", fetched 1")
	if v := gauge(t, d.srv.Metrics, "driftback_reconciler_behind_seconds", labels); v < 7000 {
		t.Errorf("driftback_reconciler_behind_seconds = %v, want about two hours", v)
	}

	// Suspended: said as such, not stalled.
	d.patchFlux(ns, "prod", `{"spec": {"suspend": true}}`)
	d.dashboardSays("the suspended Kustomization", "suspended: the Kustomization is suspended (spec.suspend)")
	if v := gauge(t, d.srv.Metrics, "driftback_reconciler_stalled", labels); v != 0 {
		t.Errorf("driftback_reconciler_stalled = %v once suspended, want 0: it is said as suspended", v)
	}
}

// patchFlux merge-patches a Flux Kustomization, as a person does.
func (d *driftWorld) patchFlux(ns, name, patch string) {
	d.t.Helper()
	if _, err := dynamic.NewForConfigOrDie(d.env.Setup).Resource(discover.FluxKustomizations).Namespace(ns).Patch(context.Background(), name,
		types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl"}); err != nil {
		d.t.Fatal(err)
	}
}
