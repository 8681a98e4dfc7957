package app

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestWritersThatFightAreReportedNotProposed: a pipeline with its own field
// manager scales the Deployment and the applier takes it back, four times
// within a minute. That is a fight, not drift: no drift pull request for
// it, one report, the metric set. A person's change that stays is still
// proposed, with the fight named beside it.
func TestWritersThatFightAreReportedNotProposed(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 10*time.Second, nil)
	d.run()
	d.settle(1)
	for range 2 {
		d.scale(5, "deploy-pipeline")
		d.settle(2)
		d.applyOverlay(d.main, "deploy/prod") // the reconciler's next sync
		d.settle(2)
	}
	d.waitFor("the fight reported", func() bool {
		is := d.gh.Issues(fullName)
		return len(is) == 1 && strings.Contains(is[0].Body, "Two writers fight")
	})
	if p := d.gh.Pulls(fullName); len(p) != 0 {
		t.Errorf("a fight became a drift pull request: %+v", p)
	}
	body := d.gh.Issues(fullName)[0].Body
	for _, s := range []string{"Deployment/" + d.env.Namespace + "/web", ".spec.replicas", "kustomize-controller and deploy-pipeline",
		"**Git owns it**", "**The other writer owns it**"} {
		if !strings.Contains(body, s) {
			t.Errorf("the fight report does not say %q:\n%s", s, body)
		}
	}
	if got := testutil.ToFloat64(d.srv.Metrics.fights.WithLabelValues(fullName, "prod")); got != 1 {
		t.Errorf("driftback_drift_fights = %v, want 1", got)
	}

	// The pipeline wins the last round and stays; a person changes the
	// image and leaves it.
	d.scale(5, "deploy-pipeline")
	d.patch("Deployment", "web", "kubectl-set", `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.example.com/web:1.3.0"}]}}}}`)
	d.waitFor("a drift pull request for the image", func() bool { return len(d.openPulls()) == 1 })
	pr := d.openPulls()[0]
	if !strings.Contains(pr.Body, "registry.example.com/web:1.3.0") || !strings.Contains(pr.Body, "Two writers fight") {
		t.Errorf("the pull request proposes the image and names the fight:\n%s", pr.Body)
	}
	if got := replicasOf(d.renderedWeb(d.branch())); got == 5 {
		t.Error("the fought-over replicas were written to Git")
	}
	if is := d.gh.Issues(fullName); len(is) != 1 {
		t.Errorf("the fight is reported once: %d issues", len(is))
	}
}

func TestAFightIsThreeChangesOfHandsBetweenTwoWriters(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		managers []string
		gap      time.Duration
		fight    bool
	}{
		{"back and forth twice", []string{"pipeline", "kustomize-controller", "pipeline", "kustomize-controller"}, time.Minute, true},
		{"one change, then the reconciler", []string{"kubectl", "kustomize-controller"}, time.Minute, false},
		{"three writers", []string{"a", "kustomize-controller", "b", "kustomize-controller"}, time.Minute, false},
		{"spread over more than the window", []string{"pipeline", "kustomize-controller", "pipeline", "kustomize-controller"}, 40 * time.Minute, false},
	} {
		fw := &fieldWatch{}
		for i, m := range tc.managers {
			fw.observe(m, i%2, at.Add(time.Duration(i)*tc.gap), time.Hour)
		}
		f, ok := fw.fight(time.Hour)
		if ok != tc.fight {
			t.Errorf("%s: fight %v, want %v (%+v)", tc.name, ok, tc.fight, fw.hands)
		}
		if ok && f.Managers != [2]string{"kustomize-controller", "pipeline"} {
			t.Errorf("%s: managers %v, the reconciler first", tc.name, f.Managers)
		}
	}
}
