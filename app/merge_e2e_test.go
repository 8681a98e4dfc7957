package app

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/internal/githubfake"
)

// merge makes the commit GitHub's test merge is: first's tree with files
// written over it, whose parents are first (the base's tip) and second (the
// pull request's head).
func (w *world) merge(first, second plumbing.Hash, files map[string]any) plumbing.Hash {
	w.t.Helper()
	w.message, w.parents = "Merge "+second.String()+" into "+first.String(), []plumbing.Hash{first, second}
	return w.commit(first, files)
}

// TestAPullRequestBehindItsBaseIsNotBlamedForIt: a teammate merged a PVC
// into main after the pull request branched off. The pull request changes
// replicas only: merging it removes nothing, so its comment names no
// pvc-removal and the required check passes. GitHub's test merge is read
// (once GitHub has computed it); a pull request that conflicts is compared
// with its merge base, saying so.
func TestAPullRequestBehindItsBaseIsNotBlamedForIt(t *testing.T) {
	t.Parallel()
	// prod prunes what its reconciler applied and the head drops.
	// Its scope is every namespace: a base branch that does not render
	// still lets the claim be read.
	w := newWorld(t, func(c *config.Config) {
		c.Targets[0].Tracking = drift.Tracking{Selector: "tracked-by=prod"}
		c.Targets[0].Scope.Namespaces = []string{"*"}
	})
	w.srv.App.MergeWaits = []time.Duration{10 * time.Millisecond, 10 * time.Millisecond}
	w.liveProd() // the teammate's PVC is live: Flux applied main
	w.apply(strings.Replace(strings.Replace(baseFiles["deploy/prod/data.yaml"].(string), "metadata:\n", "metadata:\n  namespace: NS\n  labels: {tracked-by: prod}\n", 1), "name: data", "name: data", 1))
	withoutPVC := map[string]any{}
	for k, v := range baseFiles {
		withoutPVC[k] = v
	}
	withoutPVC["deploy/prod/kustomization.yaml"] = "namespace: NS\nresources:\n- ../base\n"
	delete(withoutPVC, "deploy/prod/data.yaml")
	branchPoint := w.commit(plumbing.ZeroHash, withoutPVC)
	head := w.commit(branchPoint, withReplicas(3))
	teammate := w.commit(branchPoint, map[string]any{"deploy/prod/kustomization.yaml": baseFiles["deploy/prod/kustomization.yaml"], "deploy/prod/data.yaml": baseFiles["deploy/prod/data.yaml"]})
	testMerge := w.merge(teammate, head, withReplicas(3))
	w.push(map[string]plumbing.Hash{"refs/pull/1/merge": testMerge})
	yes := true
	// GitHub answers null twice while it computes the test merge.
	w.openPR(1, teammate, head, func(p *githubfake.Pull) { p.Mergeable, p.MergeSHA, p.MergeableAfter = &yes, testMerge.String(), 2 })
	if code := w.deliver("pull_request", "d-behind", prPayload("opened", 1, head.String())); code != http.StatusAccepted {
		t.Fatalf("opened: %d", code)
	}
	runs := w.waitChecks(head.String(), 3)
	if prod := findRun(t, runs, "driftback / prod"); prod.Conclusion != "success" {
		t.Errorf("prod check: %s %q: the pull request is blamed for its base's newer commit", prod.Conclusion, prod.Title)
	}
	body := w.gh.Comments(fullName, 1)[0].Body
	for _, s := range []string{"changed by this PR `.spec.replicas`: Git `2` → `3`",
		"main " + teammate.String()[:12] + " merged with head " + head.String()[:12] + " (test merge " + testMerge.String()[:12] + ")"} {
		if !strings.Contains(body, s) {
			t.Errorf("the comment does not say %q:\n%s", s, body)
		}
	}
	if strings.Contains(body, "pvc-removal") {
		t.Errorf("the comment blames the pull request for the base's PVC:\n%s", body)
	}

	// The same pull request in conflict with main: its head against the
	// merge base, said at the top and in the footer.
	no := false
	w.openPR(2, teammate, head, func(p *githubfake.Pull) { p.Mergeable = &no })
	if code := w.deliver("pull_request", "d-conflict", prPayload("opened", 2, head.String())); code != http.StatusAccepted {
		t.Fatalf("opened: %d", code)
	}
	eventually(t, func() bool { return len(w.gh.Comments(fullName, 2)) == 1 }, "the conflicting pull request's comment")
	body = w.gh.Comments(fullName, 2)[0].Body
	// Compared from the merge base, the PVC main gained since is still not
	// the pull request's to prune.
	if strings.Contains(body, "pvc-removal") {
		t.Errorf("the conflicting pull request is blamed for its base's PVC:\n%s", body)
	}
	for _, s := range []string{"This pull request conflicts with main: its head is compared with where it left main (the merge base " + branchPoint.String()[:12] + ")",
		"head " + head.String()[:12] + " against the merge base " + branchPoint.String()[:12] + " with main"} {
		if !strings.Contains(body, s) {
			t.Errorf("the comment does not say %q:\n%s", s, body)
		}
	}
	// main's tip breaks prod: what main gained cannot be told from a prune;
	// the claim is not compared, with why, and never pruned.
	broken := w.commit(teammate, map[string]any{"deploy/prod/kustomization.yaml": "namespace: NS\nresources:\n- ../base\n- data.yaml\n- gone.yaml\n"})
	w.openPR(3, broken, head, func(p *githubfake.Pull) { p.Mergeable = &no })
	if code := w.deliver("pull_request", "d-broken", prPayload("opened", 3, head.String())); code != http.StatusAccepted {
		t.Fatalf("opened: %d", code)
	}
	eventually(t, func() bool { return len(w.gh.Comments(fullName, 3)) == 1 }, "the comment of a pull request into a broken main")
	if body = w.gh.Comments(fullName, 3)[0].Body; !strings.Contains(body, "the base branch's tip does not render") || strings.Contains(body, "pvc-removal") {
		t.Errorf("the claim main may have gained is not \"not compared\" with why:\n%s", body)
	}
}
