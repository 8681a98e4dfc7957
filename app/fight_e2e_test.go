package app

import (
	"strings"
	"testing"
	"time"
)

// TestWritersThatFightAreReportedNotProposed: a pipeline with its own field
// manager scales the Deployment and the applier takes it back, four times
// within a minute. That is a fight, not drift: no drift pull request for
// it, shown on the drift dashboard, the metric set. A person's change that stays is still
// proposed, with the fight named beside it. The loop's clock is the test's:
// the writers alternate within the quiet period however slowly the
// machine runs the loop.
func TestWritersThatFightAreReportedNotProposed(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 10*time.Second, nil)
	clock := d.stopClock()
	d.run()
	d.settle(1)
	for range 2 {
		d.scale(5, "deploy-pipeline")
		d.settle(2)
		d.applyOverlay(d.main, "deploy/prod") // the reconciler's next sync
		d.settle(2)
	}
	d.waitFor("the fight on the dashboard", func() bool {
		is := d.gh.Issues(fullName)
		return len(is) == 1 && strings.Contains(is[0].Body, "fought over")
	})
	if p := d.gh.Pulls(fullName); len(p) != 0 {
		t.Errorf("a fight became a drift pull request: %+v", p)
	}
	body := d.gh.Issues(fullName)[0].Body
	for _, s := range []string{"driftback: drift dashboard", "Deployment/" + d.env.Namespace + "/web", ".spec.replicas", "kustomize-controller and deploy-pipeline changed it"} {
		if !strings.Contains(d.gh.Issues(fullName)[0].Title+body, s) {
			t.Errorf("the dashboard does not say %q:\n%s", s, body)
		}
	}
	if got := gauge(t, d.srv.Metrics, "driftback_drift_fights", map[string]string{"repo": fullName, "target": "prod"}); got != 1 {
		t.Errorf("driftback_drift_fights = %v, want 1", got)
	}

	// The pipeline wins the last round and stays; a person changes the
	// image and leaves it.
	d.scale(5, "deploy-pipeline")
	d.patch("Deployment", "web", "kubectl-set", `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.example.com/web:1.3.0"}]}}}}`)
	d.settle(2) // seen
	if p := d.gh.Pulls(fullName); len(p) != 0 {
		t.Errorf("a change was proposed before its quiet period: %+v", p)
	}
	clock.Advance(11 * time.Second) // the image stayed
	d.loop.WakeAll()
	d.waitFor("a drift pull request for the image", func() bool { return len(d.openPulls()) == 1 })
	pr := d.openPulls()[0]
	if !strings.Contains(pr.Body, "registry.example.com/web:1.3.0") || !strings.Contains(pr.Body, "Two writers fight") {
		t.Errorf("the pull request proposes the image and names the fight:\n%s", pr.Body)
	}
	if got := replicasOf(d.renderedWeb(d.branch())); got == 5 {
		t.Error("the fought-over replicas were written to Git")
	}
	if is := d.gh.Issues(fullName); len(is) != 1 {
		t.Errorf("the fight is reported once, on the dashboard: %d issues", len(is))
	}
}
