package app

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/drift"
)

// TestWhatTheClusterRefusesFailsThePullRequest: through serve, a pull
// request is checked against the cluster's own admission rules. In a
// namespace enforcing Pod Security baseline, with a ValidatingAdmissionPolicy
// on Deployments whose message is hostile Markdown: a pull request making a
// Deployment privileged has its pods refused (pods-refused, failing the
// check as the target's failOn says); one raising replicas over the
// policy's bound fails the sync (admission-refused), its message escaped;
// one within both passes.
func TestWhatTheClusterRefusesFailsThePullRequest(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(c *config.Config) {
		for i := range c.Targets {
			c.Targets[i].Policy.FailOn = append(c.Targets[i].Policy.FailOn, drift.DangerPodsRefused, drift.DangerAdmissionRefused)
		}
	})
	ctx := context.Background()
	ns, err := w.env.Client.CoreV1().Namespaces().Get(ctx, w.env.Namespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	ns.Labels["admission-e2e"] = w.env.Namespace
	if _, err := w.env.Client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.apply(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replicas-NS}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - expression: "object.spec.replicas <= 5"
    message: "<img src=x onerror=alert(1)> at most **5** replicas, ask @platform"
`)
	w.apply(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replicas-NS}
spec:
  policyName: replicas-NS
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {admission-e2e: NS}}
`)
	w.liveProd()
	base := w.commit(plumbing.ZeroHash, baseFiles)

	privileged := map[string]any{"deploy/base/web.yaml": strings.Replace(baseFiles["deploy/base/web.yaml"].(string), "image: nginx:1.27\n", "image: nginx:1.27\n        securityContext: {privileged: true}\n", 1)}
	cases := []struct {
		number int
		files  map[string]any
		want   string // the danger, "" for none
	}{
		{21, privileged, "pods-refused"},
		{22, withReplicas(8), "admission-refused"},
		{23, withReplicas(4), ""},
	}
	for _, c := range cases {
		head := w.commit(base, c.files)
		w.openPR(c.number, base, head, nil)
		if code := w.deliver("pull_request", "d-admission-"+head.String()[:8], prPayload("opened", c.number, head.String())); code != http.StatusAccepted {
			t.Fatalf("opened: %d", code)
		}
		prod := findRun(t, w.waitChecks(head.String(), 3), "driftback / prod")
		body := w.gh.Comments(fullName, c.number)[0].Body
		if c.want == "" {
			if prod.Conclusion != "success" || strings.Contains(body, "refused") {
				t.Errorf("PR %d (within the rules): %s %q\n%s", c.number, prod.Conclusion, prod.Title, body)
			}
			continue
		}
		if prod.Conclusion != "failure" || !strings.Contains(prod.Title, c.want) || !strings.Contains(body, "**"+c.want+"**") {
			t.Errorf("PR %d: %s %q; want it to fail on %s:\n%s", c.number, prod.Conclusion, prod.Title, c.want, body)
		}
		switch c.want {
		case "pods-refused":
			if !strings.Contains(body, `violates PodSecurity \"baseline:latest\"`) && !strings.Contains(body, `violates PodSecurity "baseline:latest"`) {
				t.Errorf("PR %d: the comment does not give Pod Security's reason:\n%s", c.number, body)
			}
		case "admission-refused":
			if strings.Contains(strings.ReplaceAll(body, `\<`, ""), "<img") || strings.Contains(body, "**5**") || strings.Contains(body, " @platform") || !strings.Contains(body, "replicas-"+w.env.Namespace) {
				t.Errorf("PR %d: the policy's message is not escaped, or not there:\n%s", c.number, body)
			}
		}
	}
}
