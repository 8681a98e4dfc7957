package report_test

import (
	"strings"
	"testing"
	"time"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/report"
)

// TestADriftPullRequestNamesWhoMadeTheChange: a change the audit log
// attributes names the person and their client, and mentions their GitHub
// login (the only mention written, and only of a name that is a login);
// one it does not is the field manager's, unattributed; a hostile user
// name is text.
func TestADriftPullRequestNamesWhoMadeTheChange(t *testing.T) {
	at := time.Date(2026, 12, 5, 9, 12, 30, 0, time.UTC)
	plan := &prgen.Plan{Overlay: "deploy/prod", Audited: true, Files: map[string][]byte{"deploy/prod/kustomization.yaml": []byte("replicas: []\n")}, Codified: []prgen.Codified{
		{Object: "Deployment/shop/web", Path: ".spec.replicas", Value: 5, Was: 2, Manager: "kubectl-scale", Time: &at, File: "deploy/prod/kustomization.yaml", Strategy: prgen.StrategyReplicas,
			By: &object.Person{User: "alice@example.com", Client: "kubectl", Verb: "patch", Time: at, Login: "alice-gh"}},
		{Object: "Deployment/shop/api", Path: ".spec.replicas", Value: 3, Was: 2, Manager: "kubectl-scale", Time: &at, File: "deploy/prod/kustomization.yaml", Strategy: prgen.StrategyReplicas},
		{Object: "Deployment/shop/worker", Path: ".spec.replicas", Value: 4, Was: 2, Manager: "kubectl-scale", Time: &at, File: "deploy/prod/kustomization.yaml", Strategy: prgen.StrategyReplicas,
			By: &object.Person{User: "@org/admins <img src=x> | x", Client: "kubectl", Verb: "patch", Time: at, Login: "not a login"}},
	}}
	body := report.DriftPullRequest(plan)
	for _, want := range []string{"alice@‍example.com with kubectl, 2026-12-05 09:12 UTC (@alice-gh)", "kubectl-scale at 2026-12-05 09:12 UTC (unattributed)"} {
		if !strings.Contains(body, want) {
			t.Errorf("the body does not say %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "@org") || strings.Contains(strings.ReplaceAll(body, `\<`, ""), "<img") || strings.Count(body, "@alice-gh") != 1 {
		t.Errorf("a hostile name mentions or renders:\n%s", body)
	}
	plan.Audited = false
	if body := report.DriftPullRequest(plan); strings.Contains(body, "unattributed") {
		t.Errorf("without the audit log, nothing is unattributed:\n%s", body)
	}
}
