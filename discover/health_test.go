package discover_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/discover"
)

var healthNow = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) string { return healthNow.Add(-d).Format(time.RFC3339) }

func object(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestAWorkingReconcilerIsNotCalledStalled: what looks alarming but leaves
// Git applied (a health check that failed after the apply, a fetch that
// failed a minute ago, a controller restarting, a long sync, refresh turned
// off) is no stall: calling it one would hide real drift. Past its bound,
// each is.
func TestAWorkingReconcilerIsNotCalledStalled(t *testing.T) {
	ks := func(reason string) *unstructured.Unstructured {
		status := "True"
		if reason != "ReconciliationSucceeded" {
			status = "False"
		}
		return object(t, `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: flux-system, creationTimestamp: "`+ago(48*time.Hour)+`"}
spec: {interval: 10m}
status:
  lastAppliedRevision: main@sha1:bbb
  lastAttemptedRevision: main@sha1:bbb
  conditions: [{type: Ready, status: "`+status+`", reason: `+reason+`, message: "m", lastTransitionTime: "`+ago(time.Hour)+`"}]
  history: [{lastReconciled: "`+ago(time.Minute)+`"}]`)
	}
	src := func(ready string, since time.Duration) *unstructured.Unstructured {
		return object(t, `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: flux-system}
status:
  artifact: {revision: main@sha1:bbb, lastUpdateTime: "`+ago(2*time.Hour)+`"}
  conditions: [{type: Ready, status: "`+ready+`", reason: GitOperationFailed, message: "timeout", lastTransitionTime: "`+ago(since)+`"}]`)
	}
	app := func(status string) *unstructured.Unstructured {
		return object(t, `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop, namespace: argocd, creationTimestamp: "`+ago(48*time.Hour)+`"}
`+status)
	}
	down := func(d time.Duration) *discover.Controller {
		return &discover.Controller{Object: "Deployment flux-system/kustomize-controller", Wanted: 1, Since: healthNow.Add(-d)}
	}
	for _, c := range []struct {
		name string
		h    discover.Health
		want discover.HealthState
	}{
		{"applied", discover.FluxHealth(ks("ReconciliationSucceeded"), src("True", time.Hour), nil, healthNow), discover.HealthApplying},
		{"a health check failed after the apply", discover.FluxHealth(ks("HealthCheckFailed"), src("True", time.Hour), nil, healthNow), discover.HealthApplying},
		{"a prune failed after the apply", discover.FluxHealth(ks("PruneFailed"), src("True", time.Hour), nil, healthNow), discover.HealthApplying},
		{"the build failed", discover.FluxHealth(ks("BuildFailed"), src("True", time.Hour), nil, healthNow), discover.HealthFailing},
		{"a fetch failed a minute ago", discover.FluxHealth(ks("ReconciliationSucceeded"), src("False", time.Minute), nil, healthNow), discover.HealthApplying},
		{"fetches fail for an hour", discover.FluxHealth(ks("ReconciliationSucceeded"), src("False", time.Hour), nil, healthNow), discover.HealthFailing},
		{"the controller restarts", discover.FluxHealth(ks("ReconciliationSucceeded"), src("True", time.Hour), down(time.Minute), healthNow), discover.HealthApplying},
		{"the controller is down for an hour", discover.FluxHealth(ks("ReconciliationSucceeded"), src("True", time.Hour), down(time.Hour), healthNow), discover.HealthStalled},
		{"the controller is running", discover.FluxHealth(ks("ReconciliationSucceeded"), src("True", time.Hour), &discover.Controller{Ready: 1, Wanted: 1}, healthNow), discover.HealthApplying},
		{"no status, just created", discover.FluxHealth(object(t, "metadata: {name: a, creationTimestamp: \""+ago(time.Minute)+"\"}\nspec: {interval: 10m}"), nil, nil, healthNow), discover.HealthUnknown},
		{"no status a day after", discover.FluxHealth(object(t, "metadata: {name: a, creationTimestamp: \""+ago(24*time.Hour)+"\"}\nspec: {interval: 10m}"), nil, nil, healthNow), discover.HealthStalled},
		{"argo: reconciled a minute ago", discover.ArgoCDHealth(app("status: {reconciledAt: \""+ago(time.Minute)+"\"}"), nil, 0, healthNow), discover.HealthApplying},
		{"argo: refresh off, reconciled yesterday", discover.ArgoCDHealth(app("status: {reconciledAt: \""+ago(24*time.Hour)+"\"}"), nil, -1, healthNow), discover.HealthApplying},
		{"argo: not reconciled for an hour", discover.ArgoCDHealth(app("status: {reconciledAt: \""+ago(time.Hour)+"\"}"), nil, 0, healthNow), discover.HealthStalled},
		{"argo: a sync with hooks running for 30m", discover.ArgoCDHealth(app("status: {reconciledAt: \""+ago(time.Minute)+"\", operationState: {phase: Running, startedAt: \""+ago(30*time.Minute)+"\"}}"), nil, 0, healthNow), discover.HealthApplying},
		{"argo: a sync running for 3h", discover.ArgoCDHealth(app("status: {reconciledAt: \""+ago(time.Minute)+"\", operationState: {phase: Running, startedAt: \""+ago(3*time.Hour)+"\"}}"), nil, 0, healthNow), discover.HealthStalled},
		{"argo: a warning condition", discover.ArgoCDHealth(app("status: {reconciledAt: \""+ago(time.Minute)+"\", conditions: [{type: OrphanedResourceWarning, message: m}]}"), nil, 0, healthNow), discover.HealthApplying},
	} {
		if c.h.State != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, c.h.State, c.h.Why, c.want)
		}
		if c.h.Blocks() != (c.want == discover.HealthFailing || c.want == discover.HealthStalled) {
			t.Errorf("%s: blocks %v", c.name, c.h.Blocks())
		}
	}
}
