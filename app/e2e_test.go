package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ghapp "github.com/driftback/driftback/app/github"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-github/v60/github"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/review"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/internal/githubfake"
	"github.com/driftback/driftback/internal/gittest"
	"github.com/driftback/driftback/internal/kubetest"
)

var baseFiles = map[string]any{
	"README.md":                      "# gitops\n",
	"deploy/base/kustomization.yaml": "resources:\n- web.yaml\n- config.yaml\n",
	"deploy/base/web.yaml":           "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n",
	"deploy/base/config.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: normal\n",
	"deploy/prod/kustomization.yaml": "namespace: NS\nresources:\n- ../base\n- data.yaml\n",
	// Bound to its volume: the claim holds data.
	"deploy/prod/data.yaml":             "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\nspec:\n  accessModes: [ReadWriteOnce]\n  volumeName: data-volume\n  resources:\n    requests: {storage: 1Gi}\n",
	"deploy/staging/kustomization.yaml": "namespace: NS\nnameSuffix: -staging\nresources:\n- ../base\n",
}

// liveProd puts the prod overlay's base render in the cluster, as Flux did.
func (w *world) liveProd() {
	for _, f := range []string{"deploy/base/web.yaml", "deploy/base/config.yaml", "deploy/prod/data.yaml"} {
		y := baseFiles[f].(string)
		y = strings.Replace(y, "metadata:\n", "metadata:\n  namespace: NS\n", 1)
		w.apply(y)
	}
}

func withReplicas(n int) map[string]any {
	return map[string]any{"deploy/base/web.yaml": strings.Replace(baseFiles["deploy/base/web.yaml"].(string), "replicas: 2", fmt.Sprintf("replicas: %d", n), 1)}
}

func conclusions(runs []githubfake.CheckRun) map[string]string {
	out := map[string]string{}
	for _, r := range runs {
		out[r.Name] = r.Conclusion
	}
	return out
}

// TestPullRequestGetsOneCommentAndChecks: opened, then synchronize, then a
// burst of five synchronize events; always exactly one comment, edited in
// place, and check runs per target on the reported SHA only.
func TestPullRequestGetsOneCommentAndChecks(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.liveProd()
	base := w.commit(plumbing.ZeroHash, baseFiles)
	head := w.commit(base, withReplicas(3))
	w.openPR(1, base, head, nil)

	if code := w.deliver("pull_request", "d-open", prPayload("opened", 1, head.String())); code != http.StatusAccepted {
		t.Fatalf("opened: %d", code)
	}
	runs := w.waitChecks(head.String(), 3)
	if got := conclusions(runs); got["driftback / prod"] != "success" || got["driftback / staging"] != "success" || got[review.AggregateCheckName] != "success" || len(runs) != 3 {
		t.Errorf("check runs on the head: %+v", runs)
	}
	comments := w.gh.Comments(fullName, 1)
	if len(comments) != 1 {
		t.Fatalf("%d comments, want 1", len(comments))
	}
	body := comments[0].Body
	for _, s := range []string{"<!-- driftback:comment part=1 of=1 -->", "## driftback", "### `prod` (`deploy/prod`) on cluster `test`", "### `staging` (`deploy/staging`) on cluster `test`",
		"✏️ update <code>Deployment/" + w.env.Namespace + "/web</code>", "changed by this PR `.spec.replicas`: Git `2` → `3`", "head " + head.String()[:12]} {
		if !strings.Contains(body, s) {
			t.Errorf("the comment does not say %q:\n%s", s, body)
		}
	}
	firstID := comments[0].ID

	// synchronize: the same comment is edited; the new SHA gets its checks.
	head2 := w.commit(base, withReplicas(4))
	w.openPR(1, base, head2, nil)
	if code := w.deliver("pull_request", "d-sync", prPayload("synchronize", 1, head2.String())); code != http.StatusAccepted {
		t.Fatalf("synchronize: %d", code)
	}
	w.waitChecks(head2.String(), 2)
	comments = w.gh.Comments(fullName, 1)
	if len(comments) != 1 || comments[0].ID != firstID || !strings.Contains(comments[0].Body, "changed by this PR `.spec.replicas`: Git `2` → `4`") {
		t.Errorf("after synchronize: %d comments (first %d, want %d)", len(comments), comments[0].ID, firstID)
	}

	// A burst of five pushes: only the last is reported.
	var burst []plumbing.Hash
	for i := range 5 {
		burst = append(burst, w.commit(base, withReplicas(10+i)))
	}
	last := burst[len(burst)-1]
	w.openPR(1, base, last, nil)
	for i, h := range burst {
		if code := w.deliver("pull_request", fmt.Sprintf("d-burst-%d", i), prPayload("synchronize", 1, h.String())); code != http.StatusAccepted {
			t.Fatalf("burst %d: %d", i, code)
		}
	}
	w.waitChecks(last.String(), 2)
	for _, h := range burst[:4] {
		if runs := w.gh.CheckRuns(fullName, h.String()); len(runs) != 0 {
			t.Errorf("an older SHA of the burst got check runs: %s", h)
		}
	}
	comments = w.gh.Comments(fullName, 1)
	if len(comments) != 1 || !strings.Contains(comments[0].Body, "changed by this PR `.spec.replicas`: Git `2` → `14`") || !strings.Contains(comments[0].Body, "head "+last.String()[:12]) {
		t.Errorf("after the burst: %d comments; body:\n%s", len(comments), comments[0].Body)
	}
}

// TestSignaturesAndDuplicates: a bad signature is 401 and posts nothing; the
// same delivery twice posts once.
func TestSignaturesAndDuplicates(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	base := w.commit(plumbing.ZeroHash, baseFiles)
	head := w.commit(base, withReplicas(3))
	w.openPR(2, base, head, nil)
	good := w.secret
	w.secret = "not-the-secret"
	if code := w.deliver("pull_request", "d-bad", prPayload("opened", 2, head.String())); code != http.StatusUnauthorized {
		t.Errorf("bad signature: %d, want 401", code)
	}
	w.secret = good
	for range 2 {
		if code := w.deliver("pull_request", "d-same", prPayload("opened", 2, head.String())); code != http.StatusAccepted {
			t.Errorf("delivery: %d", code)
		}
	}
	w.waitChecks(head.String(), 3)
	if n := len(w.gh.Comments(fullName, 2)); n != 1 {
		t.Errorf("%d comments after a duplicate delivery, want 1", n)
	}
	var creates int
	for _, c := range w.gh.Calls() {
		if c.Method == "POST" && strings.HasSuffix(c.Path, "/check-runs") {
			creates++
		}
	}
	if creates != 3 {
		t.Errorf("%d check runs created, want 3 (one per affected target and the aggregate, once)", creates)
	}
}

// TestCommentSplitsAndShrinks: a change too big for one comment is posted as
// three parts; when it shrinks, the surplus parts are deleted.
func TestCommentSplitsAndShrinks(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	base := w.commit(plumbing.ZeroHash, baseFiles)
	big := map[string]any{"deploy/prod/kustomization.yaml": "namespace: NS\nresources:\n- ../base\n- data.yaml\n- many.yaml\n"}
	// 40 ConfigMaps whose six long values differ from the live ones: each
	// shows both values in the comment (cut), about 150,000 characters in
	// all.
	var many strings.Builder
	for i := range 40 {
		fmt.Fprintf(&many, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bulk-%02d\ndata:\n", i)
		live := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bulk-%02d\n  namespace: NS\ndata:\n", i)
		for j := range 6 {
			fmt.Fprintf(&many, "  k%d: %q\n", j, strings.Repeat(fmt.Sprintf("v%02d-", i), 150))
			live += fmt.Sprintf("  k%d: %q\n", j, strings.Repeat("old-", 150))
		}
		w.apply(live)
	}
	big["deploy/prod/many.yaml"] = many.String()
	w.liveProd()
	head := w.commit(base, big)
	w.openPR(3, base, head, nil)
	w.deliver("pull_request", "d-big", prPayload("opened", 3, head.String()))
	w.waitChecks(head.String(), 2)
	comments := w.gh.Comments(fullName, 3)
	if len(comments) != 3 {
		t.Fatalf("%d comment parts, want 3", len(comments))
	}
	for i, c := range comments {
		if !strings.HasPrefix(c.Body, fmt.Sprintf("<!-- driftback:comment part=%d of=3 -->", i+1)) || len(c.Body) > githubfake.MaxCommentBody {
			t.Errorf("part %d: %d characters, starts %.60q", i+1, len(c.Body), c.Body)
		}
	}
	first := comments[0].ID

	small := w.commit(base, withReplicas(5))
	w.openPR(3, base, small, nil)
	w.deliver("pull_request", "d-small", prPayload("synchronize", 3, small.String()))
	w.waitChecks(small.String(), 2)
	comments = w.gh.Comments(fullName, 3)
	if len(comments) != 1 || comments[0].ID != first || !strings.Contains(comments[0].Body, "part=1 of=1") {
		t.Errorf("after shrinking: %d comments", len(comments))
	}
}

// TestSecondaryRateLimitMidPublish: GitHub answers a secondary rate limit in
// the middle of publishing; driftback waits Retry-After and completes, with no
// duplicate.
func TestSecondaryRateLimitMidPublish(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	base := w.commit(plumbing.ZeroHash, baseFiles)
	head := w.commit(base, withReplicas(3))
	w.openPR(4, base, head, nil)
	w.gh.FailNext("POST", "/repos/"+fullName+"/issues/4/comments", 1, 1)
	w.gh.FailNext("POST", "/repos/"+fullName+"/check-runs", 1, 1)
	w.deliver("pull_request", "d-limit", prPayload("opened", 4, head.String()))
	runs := w.waitChecks(head.String(), 3)
	if len(runs) != 3 {
		t.Errorf("%d check runs, want 3", len(runs))
	}
	if n := len(w.gh.Comments(fullName, 4)); n != 1 {
		t.Errorf("%d comments, want 1", n)
	}
	limited := 0
	for _, c := range w.gh.Calls() {
		if c.Status == http.StatusForbidden {
			limited++
		}
	}
	if limited != 2 {
		t.Errorf("%d rate-limited calls, want the 2 injected", limited)
	}
}

// TestRetryAfterLongerThanThePublishBound: with the production retry policy,
// GitHub asks driftback to wait longer than publishing's time bound in the
// middle of a comment of several parts. driftback waits the whole
// Retry-After (never retrying early, which would extend GitHub's window) and
// still writes every part: the bound is on its work, not on GitHub's waits.
// The bound is lowered to 2 s so the test waits 3 s rather than a minute.
func TestRetryAfterLongerThanThePublishBound(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.srv.App.PublishTimeout = 2 * time.Second
	base, head := w.threePartComment()
	w.openPR(6, base, head, nil)
	path := "/repos/" + fullName + "/issues/6/comments"
	w.gh.FailAfter("POST", path, 1, 1, 3) // the second part: wait 3 s
	w.deliver("pull_request", "d-retry-after", prPayload("opened", 6, head.String()))
	w.waitChecks(head.String(), 2)
	comments := w.gh.Comments(fullName, 6)
	if len(comments) < 2 {
		t.Fatalf("%d comment part(s) after a Retry-After longer than the bound, want all of them", len(comments))
	}
	checkParts(t, comments)
	if wait := limitedWriteWaited(t, w.gh.Calls(), path); wait < 3*time.Second {
		t.Errorf("retried %v after a Retry-After of 3 s: early", wait)
	}
}

// checkParts requires a comment's parts numbered in order, each knowing how
// many there are.
func checkParts(t *testing.T, comments []githubfake.Comment) {
	t.Helper()
	for i, c := range comments {
		if !strings.HasPrefix(c.Body, fmt.Sprintf("<!-- driftback:comment part=%d of=%d -->", i+1, len(comments))) {
			t.Errorf("part %d of %d starts %.50q", i+1, len(comments), c.Body)
		}
	}
}

// limitedWriteWaited returns how long after GitHub's rate limit on a POST to
// path the write went through.
func limitedWriteWaited(t *testing.T, calls []githubfake.Call, path string) time.Duration {
	t.Helper()
	var limited, written time.Time
	for _, c := range calls {
		if c.Method != "POST" || c.Path != path {
			continue
		}
		if c.Status == http.StatusForbidden {
			limited = c.At
		} else if !limited.IsZero() && written.IsZero() {
			written = c.At
		}
	}
	if limited.IsZero() || written.IsZero() {
		t.Fatalf("no rate-limited write followed by its retry: %v", lastCalls(calls, 10))
	}
	return written.Sub(limited)
}

// TestRestartKeepsOneComment: driftback restarted between two events still
// edits the one comment: GitHub is the state.
func TestRestartKeepsOneComment(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	base := w.commit(plumbing.ZeroHash, baseFiles)
	head := w.commit(base, withReplicas(3))
	w.openPR(5, base, head, nil)
	w.deliver("pull_request", "d-1", prPayload("opened", 5, head.String()))
	w.waitChecks(head.String(), 2)
	w.stop()
	w.start()
	head2 := w.commit(base, withReplicas(6))
	w.openPR(5, base, head2, nil)
	w.deliver("pull_request", "d-2", prPayload("synchronize", 5, head2.String()))
	w.waitChecks(head2.String(), 2)
	if c := w.gh.Comments(fullName, 5); len(c) != 1 || !strings.Contains(c[0].Body, "head "+head2.String()[:12]) {
		t.Errorf("after a restart: %d comments", len(c))
	}
}

// TestDangerFailsUntilAcknowledged: removing a PVC that prod's policy fails on
// fails the check; adding the acknowledge label re-runs and passes.
func TestDangerFailsUntilAcknowledged(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.liveProd()
	base := w.commit(plumbing.ZeroHash, baseFiles)
	head := w.commit(base, map[string]any{"deploy/prod/kustomization.yaml": "namespace: NS\nresources:\n- ../base\n", "deploy/prod/data.yaml": nil})
	w.openPR(6, base, head, nil)
	w.deliver("pull_request", "d-danger", prPayload("opened", 6, head.String()))
	runs := w.waitChecks(head.String(), 2)
	prod := findRun(t, runs, "driftback / prod")
	if prod.Conclusion != "failure" || !strings.Contains(prod.Title, "pvc-removal") {
		t.Fatalf("prod check: %+v", prod)
	}
	wantAggregate(t, runs, "failure")
	if c := w.gh.Comments(fullName, 6); len(c) != 1 || !strings.Contains(c[0].Body, "**pvc-removal**") ||
		!strings.Contains(c[0].Body, "The check of `prod` fails on pvc-removal (1). Once the dangers above are reviewed and wanted, add the label `"+config.DefaultAckLabel+"`") ||
		!strings.Contains(c[0].Body, "Every new push is evaluated again.") {
		t.Errorf("the comment does not show the danger and the next step:\n%s", c[0].Body)
	}

	// GitHub lets the triage role label: an acknowledgement from someone
	// who may not write is no acknowledgement.
	w.openPR(6, base, head, func(p *githubfake.Pull) {
		p.Labels, p.LabeledBy = []string{config.DefaultAckLabel}, map[string]string{config.DefaultAckLabel: "visitor"}
	})
	ev := prPayload("labeled", 6, head.String())
	ev.Label = &github.Label{Name: github.String(config.DefaultAckLabel)}
	if code := w.deliver("pull_request", "d-label-triage", ev); code != http.StatusAccepted {
		t.Fatalf("labeled: %d", code)
	}
	waitUntil(t, "the acknowledgement to be refused", func() bool { return w.logs.count("danger acknowledgement ignored") > 0 })
	w.waitIdle()
	if prod := findRun(t, w.gh.CheckRuns(fullName, head.String()), "driftback / prod"); prod.Conclusion != "failure" {
		t.Errorf("acknowledged by someone who may not write: %s %q, want failure", prod.Conclusion, prod.Title)
	}
	w.openPR(6, base, head, func(p *githubfake.Pull) {
		p.Labels, p.LabeledBy = []string{config.DefaultAckLabel}, map[string]string{config.DefaultAckLabel: "maintainer"}
	})
	if code := w.deliver("pull_request", "d-label", ev); code != http.StatusAccepted {
		t.Fatalf("labeled: %d", code)
	}
	waitUntil(t, "the check to pass", func() bool {
		return findRun(t, w.gh.CheckRuns(fullName, head.String()), "driftback / prod").Conclusion == "success"
	})
	prodRuns := 0
	for _, r := range w.gh.CheckRuns(fullName, head.String()) {
		if r.Name == "driftback / prod" {
			prodRuns++
		}
	}
	if prodRuns != 1 {
		t.Errorf("%d prod check runs on the head, want the one run updated", prodRuns)
	}
}

// wantAggregate checks the conclusion of the driftback check, the one the
// docs (github-app.md) say to require in branch protection: it must be as bad as the
// worst target's, or a pull request that fails a target merges green.
func wantAggregate(t *testing.T, runs []githubfake.CheckRun, want string) {
	t.Helper()
	if got := findRun(t, runs, review.AggregateCheckName); got.Conclusion != want {
		t.Errorf("the required %s check concludes %s, want %s (%q)", review.AggregateCheckName, got.Conclusion, want, got.Title)
	}
}

func findRun(t *testing.T, runs []githubfake.CheckRun, name string) githubfake.CheckRun {
	t.Helper()
	for _, r := range runs {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no check run %q among %+v", name, runs)
	return githubfake.CheckRun{}
}

// TestForkPullRequestNeedsAWriter: a fork's pull request gets the Git diff
// only; "/driftback diff" from a reader changes nothing; from a writer it
// brings the live data.
func TestForkPullRequestNeedsAWriter(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.srv.App.clients.Observe(w.srv.Metrics.GitHubCall) // the harness replaced the clients
	w.liveProd()
	clusterReads := w.countClusterReads()
	base := w.commit(plumbing.ZeroHash, baseFiles)
	head := w.commit(base, withReplicas(3))
	w.openPR(7, base, head, func(p *githubfake.Pull) { p.HeadRepo = "stranger/gitops" })
	w.deliver("pull_request", "d-fork", prPayload("opened", 7, head.String()))
	// A fork's pull request gets the required check alone: each push of
	// its author costs the installation one check-run write, not k+1.
	runs := w.waitChecks(head.String(), 1)
	if len(runs) != 1 {
		t.Errorf("fork check runs: %+v, want the aggregate alone", runs)
	}
	// And its writes take the pace's normal lane: however often its author
	// pushes, the repository's own reviewers' lane is not spent.
	waitUntil(t, "the fork's comment", func() bool { return len(w.gh.Comments(fullName, 7)) == 1 })
	if lanes := w.writesByLane(); lanes["urgent"] != 0 || lanes["normal"] < 2 {
		t.Errorf("the fork's writes by lane: %v, want its comment and check in the normal lane", lanes)
	}
	wantAggregate(t, runs, "neutral")
	body := w.gh.Comments(fullName, 7)[0].Body
	if !strings.Contains(body, "comes from a fork") || strings.Contains(body, "What a sync does after merging") {
		t.Fatalf("the fork's comment shows live data or no reason:\n%s", body)
	}
	if n := clusterReads.Load(); n != 0 {
		t.Fatalf("the fork's pull request made %d requests to the cluster, want none", n)
	}

	command := func(user, id, body string) {
		ev := &github.IssueCommentEvent{Action: github.String("created"), Repo: repoPayload(),
			Issue:        &github.Issue{Number: github.Int(7), PullRequestLinks: &github.PullRequestLinks{URL: github.String("x")}},
			Comment:      &github.IssueComment{Body: github.String(body), User: &github.User{Login: github.String(user)}},
			Installation: &github.Installation{ID: github.Int64(instID)}}
		if code := w.deliver("issue_comment", id, ev); code != http.StatusAccepted {
			t.Fatalf("issue_comment: %d", code)
		}
		w.waitIdle()
	}
	before := w.gh.Comments(fullName, 7)[0].Updated
	command("visitor", "d-reader", "/driftback diff "+head.String()[:12])
	if after := w.gh.Comments(fullName, 7); !after[0].Updated.Equal(before) || len(after) != 1 || strings.Contains(after[0].Body, "What a sync does after merging") {
		t.Errorf("a reader's command changed the comment or was answered")
	}
	// A writer's approval names the commit reviewed: the bare command only
	// says how, and a commit that is no longer the head is refused.
	command("maintainer", "d-bare", "/driftback diff")
	if c := w.gh.Comments(fullName, 7); len(c) != 2 || !strings.Contains(c[1].Body, "/driftback diff "+head.String()[:12]) || clusterReads.Load() != 0 {
		t.Fatalf("the bare command: comments %d, reads %d; want one reply naming the head and no cluster read", len(c), clusterReads.Load())
	}
	pushed := w.commit(head, withReplicas(4))
	w.openPR(7, base, pushed, func(p *githubfake.Pull) { p.HeadRepo = "stranger/gitops" }) // a push after the review
	command("maintainer", "d-stale", "/driftback diff "+head.String())
	if c := w.gh.Comments(fullName, 7); len(c) != 3 || !strings.Contains(c[2].Body, "not run") || !strings.Contains(c[2].Body, pushed.String()[:12]) || clusterReads.Load() != 0 {
		t.Fatalf("approval of a commit that is no longer the head: comments %d, reads %d; want a refusal naming the new head and no cluster read", len(c), clusterReads.Load())
	}
	w.openPR(7, base, head, func(p *githubfake.Pull) { p.HeadRepo = "stranger/gitops" }) // force-pushed back
	command("maintainer", "d-short", "/driftback diff "+head.String()[:12])
	if c := w.gh.Comments(fullName, 7); len(c) != 4 || !strings.Contains(c[3].Body, "in full") || clusterReads.Load() != 0 {
		t.Fatalf("approval by a short SHA: comments %d, reads %d; want a reply asking for the whole SHA and no cluster read", len(c), clusterReads.Load())
	}
	command("maintainer", "d-writer", "/driftback diff "+head.String())
	waitUntil(t, "live data after a writer's command", func() bool {
		return strings.Contains(w.gh.Comments(fullName, 7)[0].Body, "What a sync does after merging")
	})
	waitUntil(t, "the check to pass with live data", func() bool {
		return findRun(t, w.gh.CheckRuns(fullName, head.String()), review.AggregateCheckName).Conclusion == "success"
	})
	if clusterReads.Load() == 0 {
		t.Error("live data shown without a request to the cluster: the count is not counting")
	}
}

// TestPullRequestFromADeletedFork: a pull request whose head repository is
// gone (a deleted fork: GitHub sends no head repository) is treated as a
// fork, and the cluster is not read.
func TestPullRequestFromADeletedFork(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.liveProd()
	clusterReads := w.countClusterReads()
	base := w.commit(plumbing.ZeroHash, baseFiles)
	head := w.commit(base, withReplicas(3))
	w.openPR(8, base, head, func(p *githubfake.Pull) { p.HeadRepoGone = true })
	w.deliver("pull_request", "d-gone", prPayload("opened", 8, head.String()))
	w.waitChecks(head.String(), 1)
	if body := w.gh.Comments(fullName, 8)[0].Body; !strings.Contains(body, "comes from a fork") {
		t.Errorf("a pull request from a deleted fork is not treated as a fork:\n%s", body)
	}
	if n := clusterReads.Load(); n != 0 {
		t.Errorf("%d requests to the cluster for a pull request whose head repository is gone", n)
	}
}

// waitIdle waits until no job is queued or running.
func (w *world) waitIdle() {
	w.t.Helper()
	// Publishing at GitHub's pace (80 writes a minute) can take a while.
	eventually(w.t, w.queueIdle, "the queue to be idle")
}

// TestRenderErrorsReachThePullRequest: a head that does not render fails its
// target's check, and the comment names the file, line and reason.
func TestRenderErrorsReachThePullRequest(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	base := w.commit(plumbing.ZeroHash, baseFiles)
	head := w.commit(base, map[string]any{"deploy/prod/kustomization.yaml": "namespace: NS\nresources:\n- ../base\n- https://example.com/evil.yaml\n"})
	w.openPR(8, base, head, nil)
	w.deliver("pull_request", "d-broken", prPayload("opened", 8, head.String()))
	runs := w.waitChecks(head.String(), 2)
	prod := findRun(t, runs, "driftback / prod")
	if prod.Conclusion != "failure" || !strings.Contains(prod.Summary, "deploy/prod/kustomization.yaml:4") {
		t.Errorf("prod check: %+v", prod)
	}
	wantAggregate(t, runs, "failure")
	if body := w.gh.Comments(fullName, 8)[0].Body; !strings.Contains(body, "deploy/prod/kustomization.yaml:4: resources entry") || !strings.Contains(body, "remote resources are not rendered") {
		t.Errorf("the comment does not show the render error:\n%s", body)
	}
}

// TestRerequestedCheckRunsRunAgain: "Re-run" on a driftback check run reports
// again on the same commit, updating the runs rather than adding more.
func TestRerequestedCheckRunsRunAgain(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	base := w.commit(plumbing.ZeroHash, baseFiles)
	head := w.commit(base, withReplicas(3))
	w.openPR(9, base, head, nil)
	w.deliver("pull_request", "d-9", prPayload("opened", 9, head.String()))
	w.waitChecks(head.String(), 2)
	w.liveProd() // the cluster changed since: the re-run must see it
	ev := &github.CheckRunEvent{Action: github.String("rerequested"), Repo: repoPayload(),
		CheckRun: &github.CheckRun{Name: github.String("driftback / prod"), HeadSHA: github.String(head.String()),
			PullRequests: []*github.PullRequest{{Number: github.Int(9)}}},
		Installation: &github.Installation{ID: github.Int64(instID)}}
	if code := w.deliver("check_run", "d-rerun", ev); code != http.StatusAccepted {
		t.Fatalf("check_run: %d", code)
	}
	waitUntil(t, "the re-run to see the live Deployment", func() bool {
		return strings.Contains(w.gh.Comments(fullName, 9)[0].Body, "✏️ update <code>Deployment/"+w.env.Namespace+"/web</code>")
	})
	w.waitIdle()
	if n := len(w.gh.CheckRuns(fullName, head.String())); n != 3 {
		t.Errorf("%d check runs after a re-run, want the same 3", n)
	}
}

// TestPushRefreshesDesiredState: a push to the default branch fetches it into
// the repository cache, so the desired state is local before it is needed.
func TestPushRefreshesDesiredState(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	base := w.commit(plumbing.ZeroHash, baseFiles)
	w.push(map[string]plumbing.Hash{"refs/heads/main": base})
	ev := &github.PushEvent{Ref: github.String("refs/heads/main"), After: github.String(base.String()),
		Repo: &github.PushEventRepository{Name: github.String(repoName), FullName: github.String(fullName),
			DefaultBranch: github.String("main"), Owner: &github.User{Login: github.String(owner)}},
		Installation: &github.Installation{ID: github.Int64(instID)}}
	if code := w.deliver("push", "d-push", ev); code != http.StatusAccepted {
		t.Fatalf("push: %d", code)
	}
	w.waitIdle()
	if w.git.Uploads() != 1 {
		t.Errorf("%d fetches after a push, want 1", w.git.Uploads())
	}
	other := *ev
	other.Ref = github.String("refs/heads/feature")
	if code := w.deliver("push", "d-push-2", &other); code != http.StatusNoContent {
		t.Errorf("a push to another branch: %d, want 204", code)
	}
}

// TestDraftsWaitUntilReady: a draft gets nothing while no target asks for
// drafts; "ready for review" brings the report.
func TestDraftsWaitUntilReady(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	base := w.commit(plumbing.ZeroHash, baseFiles)
	head := w.commit(base, withReplicas(3))
	w.openPR(10, base, head, func(p *githubfake.Pull) { p.Draft = true })
	w.deliver("pull_request", "d-draft", prPayload("opened", 10, head.String()))
	w.waitIdle()
	if n, r := len(w.gh.Comments(fullName, 10)), len(w.gh.CheckRuns(fullName, head.String())); n != 0 || r != 0 {
		t.Fatalf("a draft got %d comments and %d check runs", n, r)
	}
	w.openPR(10, base, head, nil)
	w.deliver("pull_request", "d-ready", prPayload("ready_for_review", 10, head.String()))
	w.waitChecks(head.String(), 2)
	if n := len(w.gh.Comments(fullName, 10)); n != 1 {
		t.Errorf("%d comments after ready for review, want 1", n)
	}
}

// TestRepositoryConfigFromTheDefaultBranch: .github/driftback.yml on main
// renames prod's acknowledge label; the same file in the pull request's head,
// which would drop the failOn, is not read.
func TestRepositoryConfigFromTheDefaultBranch(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.liveProd()
	files := map[string]any{config.RepoConfigPath: "targets:\n- name: prod\n  policy:\n    ackLabel: ok-to-prune\n"}
	for k, v := range baseFiles {
		files[k] = v
	}
	base := w.commit(plumbing.ZeroHash, files)
	head := w.commit(base, map[string]any{
		"deploy/prod/kustomization.yaml": "namespace: NS\nresources:\n- ../base\n", "deploy/prod/data.yaml": nil,
		config.RepoConfigPath: "targets:\n- name: prod\n  policy:\n    failOn: []\n",
	})
	w.openPR(11, base, head, nil)
	w.deliver("pull_request", "d-config", prPayload("opened", 11, head.String()))
	runs := w.waitChecks(head.String(), 2)
	prod := findRun(t, runs, "driftback / prod")
	if prod.Conclusion != "failure" || !strings.Contains(prod.Summary, "`ok-to-prune`") {
		t.Errorf("prod check: %s: %s", prod.Conclusion, prod.Summary)
	}
	wantAggregate(t, runs, "failure")
}

// TestShutdownNeverHalfPublishes: shutdown comes while a three-part comment
// is being written (the second part waits out a rate limit); the queue's
// grace ends, yet the comment set is completed, not left with one part.
func TestShutdownNeverHalfPublishes(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	base, head := w.threePartComment()
	w.openPR(5, base, head, nil)
	w.gh.FailAfter("POST", "/repos/"+fullName+"/issues/5/comments", 1, 1, 2)
	w.deliver("pull_request", "d-shutdown", prPayload("opened", 5, head.String()))
	eventually(t, func() bool { return len(w.gh.Comments(fullName, 5)) > 0 }, "a comment part")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	w.srv.Queue.Close(ctx) // returns once the running job has
	comments := w.gh.Comments(fullName, 5)
	if len(comments) < 2 {
		t.Fatalf("shutdown left %d comment part(s): %.80q; calls %v", len(comments), comments[0].Body, lastCalls(w.gh.Calls(), 8))
	}
	for i, c := range comments {
		if !strings.HasPrefix(c.Body, fmt.Sprintf("<!-- driftback:comment part=%d of=%d -->", i+1, len(comments))) {
			t.Errorf("part %d of %d starts %.50q", i+1, len(comments), c.Body)
		}
	}
}

// TestMetricsCountWhatHappened: /metrics reports deliveries by event and
// outcome (a forged one under "other"), the job's duration, GitHub calls and
// the queue depth.
func TestMetricsCountWhatHappened(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.srv.App.clients.Observe(w.srv.Metrics.GitHubCall) // the harness replaced the clients
	w.liveProd()
	base := w.commit(plumbing.ZeroHash, baseFiles)
	head := w.commit(base, withReplicas(3))
	w.openPR(6, base, head, nil)
	w.deliver("pull_request", "m-open", prPayload("opened", 6, head.String()))
	w.waitChecks(head.String(), 2)
	req, _ := http.NewRequest(http.MethodPost, w.url+"/webhook", strings.NewReader("{}"))
	req.Header.Set("X-GitHub-Event", "made-up-event-name")
	req.Header.Set("X-GitHub-Delivery", "forged")
	req.Header.Set("X-Hub-Signature-256", "sha256=00")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	resp, err := http.Get(w.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	text := string(b)
	for _, want := range []string{
		`driftback_webhook_deliveries_total{event="pull_request",outcome="accepted"} 1`,
		`driftback_webhook_deliveries_total{event="other",outcome="bad_signature"} 1`,
		`driftback_job_duration_seconds_count{outcome="done"} 1`,
		`driftback_github_requests_total{code="201",kind="comment",method="POST"}`,
		`driftback_github_requests_total{code="201",kind="check-run",method="POST"}`,
		// The comment and the required check: a reviewer reads them first.
		`driftback_github_writes_total{lane="urgent"} 2`,
		`driftback_github_writes_total{lane="normal"}`, // the target's own check
		`driftback_render_duration_seconds_count`,
		`driftback_queue_depth 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, "made-up-event-name") {
		t.Error("an unverified event name became a label")
	}
}

// threePartComment commits a change to 40 ConfigMaps whose long values differ
// from the live ones, so the comment about it takes three parts, and returns
// the base and head commits.
func (w *world) threePartComment() (base, head plumbing.Hash) {
	w.t.Helper()
	base = w.commit(plumbing.ZeroHash, baseFiles)
	big := map[string]any{"deploy/prod/kustomization.yaml": "namespace: NS\nresources:\n- ../base\n- many.yaml\n"}
	var many strings.Builder
	for i := range 40 {
		fmt.Fprintf(&many, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bulk-%02d\ndata:\n", i)
		live := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bulk-%02d\n  namespace: NS\ndata:\n", i)
		// Long values are cut in a comment: the size comes from many keys.
		for j := range 6 {
			fmt.Fprintf(&many, "  k%d: %q\n", j, strings.Repeat(fmt.Sprintf("v%02d-", i), 150))
			live += fmt.Sprintf("  k%d: %q\n", j, strings.Repeat("old-", 150))
		}
		w.apply(live)
	}
	big["deploy/prod/many.yaml"] = many.String()
	return base, w.commit(base, big)
}

// TestPullRequestCannotReadBeyondItsTarget: a same-repository pull request
// that renders another namespace's object (an aws-auth ConfigMap in
// kube-system) gets it compared in Git only: the cluster is not asked for it
// and the comment shows none of its live values. app.yml's scope widens the
// target, and then it is compared.
func TestPullRequestCannotReadBeyondItsTarget(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.liveProd()
	name := w.awsAuth()
	var outside atomic.Int64
	watchPaths := func(app *App) {
		app.wrapKube = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				if strings.Contains(r.URL.Path, "/namespaces/kube-system/") || (strings.HasSuffix(r.URL.Path, "/configmaps") && !strings.Contains(r.URL.Path, "/namespaces/")) {
					outside.Add(1)
				}
				return rt.RoundTrip(r)
			})
		}
	}
	watchPaths(w.srv.App)

	base := w.commit(plumbing.ZeroHash, baseFiles)
	// The overlay's namespace moves into a nested kustomization, so the
	// object next to it keeps the namespace it names.
	head := w.commit(base, map[string]any{
		"deploy/prod/kustomization.yaml":       "resources:\n- app\n- steal\n",
		"deploy/prod/data.yaml":                nil,
		"deploy/prod/app/kustomization.yaml":   "namespace: NS\nresources:\n- ../../base\n- data.yaml\n",
		"deploy/prod/app/data.yaml":            baseFiles["deploy/prod/data.yaml"],
		"deploy/prod/steal/kustomization.yaml": "resources:\n- aws-auth.yaml\n",
		"deploy/prod/steal/aws-auth.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: kube-system\ndata:\n  mapRoles: harmless\n",
	})
	w.openPR(11, base, head, nil)
	w.deliver("pull_request", "d-scope", prPayload("opened", 11, head.String()))
	runs := w.waitChecks(head.String(), 2)
	body := w.gh.Comments(fullName, 11)[0].Body
	if strings.Contains(body, "node-admin") || strings.Contains(body, "eksctl") {
		t.Fatalf("the comment shows the live value or owner of an object outside the target:\n%s", body)
	}
	for _, s := range []string{"Outside the scope of `deploy/prod` (1)", "`ConfigMap/kube-system/" + name + "`: create in Git"} {
		if !strings.Contains(body, s) {
			t.Errorf("the comment does not say %q:\n%s", s, body)
		}
	}
	if n := outside.Load(); n != 0 {
		t.Errorf("%d requests for objects outside the target's scope", n)
	}
	if c := findRun(t, runs, "driftback / prod"); c.Conclusion != "neutral" || !strings.Contains(c.Title, "outside the target's scope") {
		t.Errorf("prod check with an object outside its scope: %s %q", c.Conclusion, c.Title)
	}
	wantAggregate(t, runs, "neutral")

	// The operator widens the scope: the object is compared with the cluster.
	w.stop()
	w.cfg.Targets[0].Scope.Namespaces = []string{"kube-system"}
	w.start()
	watchPaths(w.srv.App)
	w.deliver("pull_request", "d-scope-wide", prPayload("synchronize", 11, head.String()))
	waitUntil(t, "the widened comparison", func() bool {
		return strings.Contains(w.gh.Comments(fullName, 11)[0].Body, "node-admin")
	})
	if body := w.gh.Comments(fullName, 11)[0].Body; strings.Contains(body, "Outside the scope") {
		t.Errorf("a widened scope still leaves the object out:\n%s", body)
	}
	if outside.Load() == 0 {
		t.Error("the widened comparison shows kube-system's live value without reading it: the counter is not counting")
	}
}

// awsAuth makes a ConfigMap of this test's in kube-system, outside every
// target's scope, as eksctl writes aws-auth, and returns its name.
func (w *world) awsAuth() string {
	w.t.Helper()
	name := "aws-auth-" + w.env.Namespace
	awsAuth := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "kube-system"},
		"data":     map[string]any{"mapRoles": "arn:aws:iam::111122223333:role/node-admin"}}}
	kubetest.Apply(w.t, w.env.Config, "eksctl", awsAuth)
	w.t.Cleanup(func() {
		_ = w.env.Client.CoreV1().ConfigMaps("kube-system").Delete(context.Background(), name, metav1.DeleteOptions{}) // best effort at teardown
	})
	return name
}

// TestAPullRequestIntoASideBranchReadsNothing: a writer pushes a branch
// whose prod overlay also renders kube-system's aws-auth, and opens a pull
// request into that branch. prod follows the default branch, so the pull
// request changes nothing its reconciler applies: no target is affected,
// nothing of the cluster is read, no comment is written, and the required
// check says so. The branch a pull request merges into never decides what
// is read from the cluster.
func TestAPullRequestIntoASideBranchReadsNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.liveProd()
	name := w.awsAuth()
	clusterReads := w.countClusterReads()
	base := w.commit(plumbing.ZeroHash, baseFiles)
	side := w.commit(base, map[string]any{
		"deploy/prod/kustomization.yaml":       "resources:\n- app\n- steal\n",
		"deploy/prod/data.yaml":                nil,
		"deploy/prod/app/kustomization.yaml":   "namespace: NS\nresources:\n- ../../base\n- data.yaml\n",
		"deploy/prod/app/data.yaml":            baseFiles["deploy/prod/data.yaml"],
		"deploy/prod/steal/kustomization.yaml": "resources:\n- aws-auth.yaml\n",
		"deploy/prod/steal/aws-auth.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: kube-system\ndata:\n  mapRoles: harmless\n",
	})
	head := w.commit(side, map[string]any{
		"deploy/prod/steal/aws-auth.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: kube-system\ndata:\n  mapRoles: guess\n",
	})
	w.push(map[string]plumbing.Hash{"refs/heads/side": side})
	w.openPR(13, base, head, func(p *githubfake.Pull) { p.BaseSHA, p.BaseRef = side.String(), "side" })
	w.deliver("pull_request", "d-side", prPayload("opened", 13, head.String()))
	runs := w.waitChecks(head.String(), 1)
	if c := findRun(t, runs, "driftback"); c.Conclusion != "success" || !strings.Contains(c.Summary, "not affected") {
		t.Errorf("the required check of a pull request into a side branch: %s %q %q", c.Conclusion, c.Title, c.Summary)
	}
	if len(runs) != 1 {
		t.Errorf("%d check runs, want the required one alone", len(runs))
	}
	if cs := w.gh.Comments(fullName, 13); len(cs) != 0 {
		t.Errorf("a pull request into a side branch got a comment:\n%s", cs[0].Body)
	}
	if n := clusterReads.Load(); n != 0 {
		t.Errorf("a pull request into a side branch made %d cluster reads", n)
	}
}

// TestDangersFailWithoutTheCluster: a danger is known from Git, so a fork's
// pull request and a target whose cluster cannot be read fail on a failOn
// danger as a readable cluster does; the ack label works the same.
func TestDangersFailWithoutTheCluster(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	clusterReads := w.countClusterReads()
	base := w.commit(plumbing.ZeroHash, baseFiles)
	head := w.commit(base, map[string]any{"deploy/prod/kustomization.yaml": "namespace: NS\nresources:\n- ../base\n", "deploy/prod/data.yaml": nil})
	w.openPR(12, base, head, func(p *githubfake.Pull) { p.HeadRepo = "stranger/gitops" })
	w.deliver("pull_request", "d-fork-danger", prPayload("opened", 12, head.String()))
	runs := w.waitChecks(head.String(), 1)
	agg := findRun(t, runs, review.AggregateCheckName)
	if agg.Conclusion != "failure" || !strings.Contains(agg.Summary, "pvc-removal (1)") {
		t.Errorf("a fork's pull request removing a claim: %s %q, want failure on pvc-removal", agg.Conclusion, agg.Summary)
	}
	if body := w.gh.Comments(fullName, 12)[0].Body; !strings.Contains(body, "**pvc-removal**") || !strings.Contains(body, "unknown without the cluster") {
		t.Errorf("the fork's comment does not show the danger known from Git:\n%s", body)
	}
	if n := clusterReads.Load(); n != 0 {
		t.Errorf("%d cluster requests for a fork", n)
	}

	// The cluster cannot be read: the same.
	w.stop()
	dead := filepath.Join(w.dir, "dead-kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["dead"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	kc.AuthInfos["dead"] = &clientcmdapi.AuthInfo{Token: "x"}
	kc.Contexts["dead"] = &clientcmdapi.Context{Cluster: "dead", AuthInfo: "dead"}
	kc.CurrentContext = "dead"
	if err := clientcmd.WriteToFile(*kc, dead); err != nil {
		t.Fatal(err)
	}
	w.cfg.Clusters["test"] = config.Cluster{Kubeconfig: dead, Mode: drift.ModeReadOnly}
	w.start()
	w.openPR(12, base, head, nil) // same repository now
	w.deliver("pull_request", "d-dead-danger", prPayload("synchronize", 12, head.String()))
	waitUntil(t, "the check of an unreadable cluster to say so", func() bool {
		return strings.Contains(w.gh.Comments(fullName, 12)[0].Body, "could not be read")
	})
	waitUntil(t, "the target's own check run, now the pull request is the repository's", func() bool {
		for _, r := range w.gh.CheckRuns(fullName, head.String()) {
			if r.Name == "driftback / prod" {
				return true
			}
		}
		return false
	})
	prod := findRun(t, w.gh.CheckRuns(fullName, head.String()), "driftback / prod")
	if prod.Conclusion != "failure" || !strings.Contains(prod.Title, "pvc-removal (1)") {
		t.Errorf("an unreadable cluster: %s %q, want failure on pvc-removal", prod.Conclusion, prod.Title)
	}
	wantAggregate(t, w.gh.CheckRuns(fullName, head.String()), "failure")

	w.openPR(12, base, head, func(p *githubfake.Pull) {
		p.Labels, p.LabeledBy = []string{config.DefaultAckLabel}, map[string]string{config.DefaultAckLabel: "maintainer"}
	})
	ev := prPayload("labeled", 12, head.String())
	ev.Label = &github.Label{Name: github.String(config.DefaultAckLabel)}
	w.deliver("pull_request", "d-dead-label", ev)
	waitUntil(t, "the acknowledged danger to stop failing", func() bool {
		return findRun(t, w.gh.CheckRuns(fullName, head.String()), "driftback / prod").Conclusion == "neutral"
	})
	// Acknowledged, but the cluster is still unread: the comparison is not
	// whole, so the required check is not a success either.
	wantAggregate(t, w.gh.CheckRuns(fullName, head.String()), "neutral")
}

// TestChecksOnlyForAffectedTargets: a push touching one base shared by 10 of
// a repository's 200 targets writes 11 check runs (the aggregate and the 10
// affected), after one listing of the commit's runs, and the comment: GitHub's
// content-creation budget is spent on what changed, not on the repository's
// size.
func TestChecksOnlyForAffectedTargets(t *testing.T) {
	t.Parallel()
	w, base := manyTargets(t, 200, 10)
	head := w.commit(base, map[string]any{"bases/b03/app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  base: b03\n  version: \"2\"\n"})
	w.openPR(1, base, head, nil)
	if code := w.deliver("pull_request", "d-many", prPayload("opened", 1, head.String())); code != http.StatusAccepted {
		t.Fatalf("opened: %d", code)
	}
	runs := w.waitChecks(head.String(), 11)
	w.waitIdle()
	names := map[string]string{}
	for _, r := range runs {
		names[r.Name] = r.Conclusion
	}
	if len(runs) != 11 || names[review.AggregateCheckName] != "success" || names["driftback / o030"] != "success" || names["driftback / o039"] != "success" {
		t.Errorf("%d check runs, want the aggregate and o030…o039: %v", len(runs), names)
	}
	agg := findRun(t, runs, review.AggregateCheckName)
	if !strings.Contains(agg.Title, "10 targets affected") || !strings.Contains(agg.Summary, "190 other targets not affected") {
		t.Errorf("aggregate: %q\n%s", agg.Title, agg.Summary)
	}
	writes, lists := 0, 0
	for _, c := range w.gh.Calls() {
		switch {
		case strings.HasSuffix(c.Path, "/check-runs") && c.Method == "POST", strings.Contains(c.Path, "/check-runs/") && c.Method == "PATCH":
			writes++
		case strings.HasSuffix(c.Path, "/check-runs") && c.Method == "GET":
			lists++
		}
	}
	if writes != 11 || lists != 1 {
		t.Errorf("%d check-run writes and %d listings, want 11 and 1", writes, lists)
	}
}

// TestALongRateLimitCompletesTheCommentLater: GitHub asks driftback, in the
// middle of a comment of several parts, to wait longer than a worker holds on
// (past the retry policy's MaxWait, 2 minutes in production, 2 s here so the
// test does not wait minutes, and past the publish's own retries). The job gives its worker back, runs again once
// the wait is over, and writes the comment whole; no failure is reported on
// the pull request.
func TestALongRateLimitCompletesTheCommentLater(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	// The production policy, but for MaxWait.
	w.srv.App.clients = ghapp.NewClients(w.cfg.GitHub.AppID, w.gh.KeyPEM(), w.cfg.GitHub.APIURL,
		ghapp.RetryPolicy{PerMinute: w.cfg.GitHub.Pace.PerMinute, PerHour: w.cfg.GitHub.Pace.PerHour, MaxWait: 2 * time.Second})
	w.srv.App.clients.Observe(w.srv.Metrics.GitHubCall)
	base, head := w.threePartComment()
	w.openPR(7, base, head, nil)
	path := "/repos/" + fullName + "/issues/7/comments"
	const retryAfter = 10
	w.gh.FailAfter("POST", path, 1, 1, retryAfter) // the second part
	w.deliver("pull_request", "d-long-limit", prPayload("opened", 7, head.String()))
	eventually(t, func() bool { return len(w.gh.Comments(fullName, 7)) == 3 }, "the comment's 3 parts after a rate limit past MaxWait")
	w.waitChecks(head.String(), 2)
	comments := w.gh.Comments(fullName, 7)
	checkParts(t, comments)
	if len(comments) != 3 {
		t.Errorf("%d comments, want the 3 parts", len(comments))
	}
	if wait := limitedWriteWaited(t, w.gh.Calls(), path); wait < retryAfter*time.Second {
		t.Errorf("the part was written %s after a Retry-After of %d s: early", wait, retryAfter)
	}
	if n := deferredJobs(t, w); n < 1 {
		t.Errorf("the job was not deferred (%d deferred jobs): the wait was taken inside the worker", n)
	}
}

// deferredJobs counts the jobs that gave their worker back to wait out a
// rate limit, from the server's own metric.
func deferredJobs(t *testing.T, w *world) int {
	t.Helper()
	ms, err := w.srv.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.GetName() != "driftback_job_duration_seconds" {
			continue
		}
		for _, s := range m.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == "deferred" {
					return int(s.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return 0
}

// TestAComparisonThatIsNotWholeIsNeverASuccess: a target some of whose
// objects could not be compared (here the head gives a live ConfigMap a list
// where the schema wants a string, so its apply cannot be predicted) is
// neutral, and so is the required check: "nothing dangerous found" is not
// said of what was not looked at.
func TestAComparisonThatIsNotWholeIsNeverASuccess(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.liveProd()
	base := w.commit(plumbing.ZeroHash, baseFiles)
	head := w.commit(base, map[string]any{"deploy/base/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: [a, b]\n"})
	w.openPR(13, base, head, nil)
	w.deliver("pull_request", "d-not-whole", prPayload("opened", 13, head.String()))
	runs := w.waitChecks(head.String(), 3)
	prod := findRun(t, runs, "driftback / prod")
	if prod.Conclusion != "neutral" || !strings.Contains(prod.Title, "Incomplete") {
		t.Errorf("prod, one object not compared: %s %q", prod.Conclusion, prod.Title)
	}
	wantAggregate(t, runs, "neutral")
	if body := w.gh.Comments(fullName, 13)[0].Body; !strings.Contains(body, "ConfigMap/"+w.env.Namespace+"/settings") || !strings.Contains(body, "predict apply") {
		t.Errorf("the comment does not say which object was not compared:\n%s", body)
	}
}

// TestACommitTooLargeToCompare: a pull request whose head is a few kilobytes
// of trees naming each other (a quarter of a million paths) is refused at the
// bound: the required check fails saying it is too large to compare, the
// comment says why, and the next pull request is compared as usual.
func TestACommitTooLargeToCompare(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.liveProd()
	base := w.commit(plumbing.ZeroHash, baseFiles)
	bomb, err := gittest.Bomb(w.local, base, 64)
	if err != nil {
		t.Fatal(err)
	}
	w.openPR(31, base, bomb, nil)
	w.deliver("pull_request", "d-bomb", prPayload("opened", 31, bomb.String()))
	runs := w.waitChecks(bomb.String(), 1)
	wantAggregate(t, runs, "failure")
	if r := findRun(t, runs, review.AggregateCheckName); r.Title != "Too large to compare" || !strings.Contains(r.Summary, "more than 250000 files and directories") {
		t.Errorf("the required check: %q %q", r.Title, r.Summary)
	}
	if c := w.gh.Comments(fullName, 31); len(c) != 1 || !strings.Contains(c[0].Body, "is too large to compare") {
		t.Errorf("comments: %+v", c)
	}

	head := w.commit(base, withReplicas(4))
	w.openPR(32, base, head, nil)
	w.deliver("pull_request", "d-after", prPayload("opened", 32, head.String()))
	wantAggregate(t, w.waitChecks(head.String(), 2), "success")
}

// TestAForkCannotGuessASecret: a fork's pull request shown live data (the
// target allows it, forkLive), then one from the repository's own branch,
// sets a Secret's value. Whether it guessed the live value or not, the
// comparison reads the same: the Secret's values are compared Git against
// Git, and neither author learns anything of the cluster's (write access
// to the repository is not read access to the cluster's Secrets).
func TestAForkCannotGuessASecret(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(cfg *config.Config) {
		for i := range cfg.Targets {
			cfg.Targets[i].Policy.ForkLive = true
		}
	})
	w.liveProd()
	secret := func(password string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\nstringData:\n  password: " + password + "\n"
	}
	w.apply(strings.Replace(secret("the-live-one"), "metadata:\n", "metadata:\n  namespace: NS\n", 1))
	compared := w.captureComparisons()
	base := w.commit(w.commit(plumbing.ZeroHash, baseFiles), map[string]any{
		"deploy/prod/kustomization.yaml": "namespace: NS\nresources:\n- ../base\n- data.yaml\n- db.yaml\n",
		"deploy/prod/db.yaml":            secret("placeholder"),
	})
	secretFields := func(number int, guess string, fork bool) int {
		t.Helper()
		head := w.commit(base, map[string]any{"deploy/prod/db.yaml": secret(guess)})
		checks := 2
		w.openPR(number, base, head, func(p *githubfake.Pull) {
			if fork {
				p.HeadRepo, checks = "stranger/gitops", 1
			}
		})
		w.deliver("pull_request", fmt.Sprintf("d-guess-%d", number), prPayload("opened", number, head.String()))
		w.waitChecks(head.String(), checks)
		rep, _ := compared()
		n := -1
		for _, tg := range rep.Targets {
			if tg.Name != "prod" {
				continue
			}
			if tg.LiveError != "" {
				t.Fatalf("#%d: the fork's comparison did not read the cluster: %s", number, tg.LiveError)
			}
			n = 0
			for _, ch := range tg.Changes {
				if ch.Kind == "Secret" {
					n += len(ch.Fields)
				}
			}
		}
		return n
	}
	right, wrong := secretFields(21, "the-live-one", true), secretFields(22, "wrong-guess", true)
	if right != wrong || right <= 0 {
		t.Errorf("a fork: the right guess changes %d of the Secret's fields, a wrong one %d: want the same, the Git change", right, wrong)
	}
	right, wrong = secretFields(23, "the-live-one", false), secretFields(24, "wrong-guess", false)
	if right != wrong || right <= 0 {
		t.Errorf("a writer: the right guess changes %d of the Secret's fields, a wrong one %d: want the same, the Git change", right, wrong)
	}
}

// TestASupersededReportIsNotPublished: a commit pushed while the previous
// one is being compared cancels that report before it writes anything: no
// comment or check run is spent on a commit that is no longer the head.
func TestASupersededReportIsNotPublished(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.liveProd()
	base := w.commit(plumbing.ZeroHash, baseFiles)
	first := w.commit(base, withReplicas(3))
	second := w.commit(base, withReplicas(4))
	w.openPR(30, base, first, nil)
	var once sync.Once
	w.srv.App.compared = func(int, *drift.Report, []review.CheckResult) {
		once.Do(func() { // the first commit is compared: the author pushes again
			w.openPR(30, base, second, nil)
			w.deliver("pull_request", "d-second", prPayload("synchronize", 30, second.String()))
		})
	}
	w.deliver("pull_request", "d-first", prPayload("opened", 30, first.String()))
	w.waitChecks(second.String(), 3)
	w.waitIdle()
	if runs := w.gh.CheckRuns(fullName, first.String()); len(runs) != 0 {
		t.Errorf("the superseded commit got %d check runs", len(runs))
	}
	if c := w.gh.Comments(fullName, 30); len(c) != 1 || !strings.Contains(c[0].Body, second.String()[:12]) {
		t.Errorf("comments %d, want one reporting the newer commit", len(c))
	}
}
