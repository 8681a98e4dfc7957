package review

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/driftback/driftback/internal/testfs"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/render"
)

const (
	claim = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: shop}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n"
	notes = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes, namespace: shop}\ndata: {a: b}\n"
)

// pullRequest is a pull request that removes a claim from apps/prod and
// leaves apps/dev alone, with the targets of both.
func pullRequest(t *testing.T) Input {
	base := map[string]string{
		"apps/prod/kustomization.yaml": "resources: [claim.yaml, notes.yaml]\n",
		"apps/prod/claim.yaml":         claim,
		"apps/prod/notes.yaml":         notes,
		"apps/dev/kustomization.yaml":  "resources: [notes.yaml]\n",
		"apps/dev/notes.yaml":          notes,
	}
	head := map[string]string{}
	for p, c := range base {
		head[p] = c
	}
	head["apps/prod/kustomization.yaml"] = "resources: [notes.yaml]\n"
	delete(head, "apps/prod/claim.yaml")
	target := func(name, path string) targets.Target {
		tg := targets.Target{Target: config.Target{Name: name, Repo: "acme/gitops", Path: path, Cluster: "prod"}}
		tg.Policy.AckLabel = config.DefaultAckLabel
		tg.Policy.FailOn = []drift.DangerReason{drift.DangerPVCRemoval}
		return tg
	}
	b, h := testfs.Tree(t, base), testfs.Tree(t, head)
	changed, err := render.Changed(b, h)
	if err != nil {
		t.Fatal(err)
	}
	return Input{
		Targets: []targets.Target{target("prod", "apps/prod"), target("dev", "apps/dev")},
		Base:    b, Head: h, Scope: b, Changed: changed, Branch: "main",
		// A fork's pull request: nothing is read from a cluster, and the
		// dangers Git shows still decide.
		Fork: true,
	}
}

func reviewer(t *testing.T) *Reviewer {
	return &Reviewer{
		Renderer: render.New(render.DefaultOptions()),
		Cluster: func(name string) Cluster {
			t.Errorf("cluster %s read for a fork's pull request", name)
			return Cluster{}
		},
		Log: slog.New(slog.DiscardHandler),
	}
}

// TestChecksDecideFromTheReview: the decisions of a review, without GitHub
// or a cluster. A target the pull request does not touch gets no check of
// its own; a danger the policy fails on fails the target's check, and so the
// aggregate; the acknowledge label turns it into an acknowledged success.
func TestChecksDecideFromTheReview(t *testing.T) {
	in := pullRequest(t)
	rep, checks := reviewer(t).Review(context.Background(), in)
	if len(checks) != 2 || len(rep.Targets) != 1 || rep.Targets[0].Name != "prod" {
		t.Fatalf("checks %+v, targets %d: want prod compared and dev unaffected", checks, len(rep.Targets))
	}
	prod, dev := checks[0], checks[1]
	if !dev.Unaffected || dev.Name != "driftback / dev" {
		t.Errorf("dev: %+v, want unaffected", dev)
	}
	if prod.Conclusion != "failure" || prod.Failing == nil || len(prod.Failing.Reasons) != 1 || !strings.HasPrefix(prod.Failing.Reasons[0], "pvc-removal") {
		t.Errorf("prod: %+v, want a failure on pvc-removal", prod)
	}
	if agg := Aggregate(checks); agg.Name != AggregateCheckName || agg.Conclusion != "failure" {
		t.Errorf("aggregate %+v, want a failure", agg)
	}
	if f := Failing(checks); len(f) != 1 || f[0].Target != "prod" || f[0].AckLabel != config.DefaultAckLabel {
		t.Errorf("failing %+v", f)
	}
	if rep.Targets[0].LiveError == "" {
		t.Errorf("a fork's comparison says nothing of the cluster not being read")
	}

	// Acknowledged, the danger no longer fails the check; a comparison
	// that did not read the cluster is still not a success.
	in.Labels = map[string]bool{config.DefaultAckLabel: true}
	_, checks = reviewer(t).Review(context.Background(), in)
	if c := checks[0]; c.Conclusion != "neutral" || c.Failing != nil || !strings.Contains(c.Title, "the cluster was not read") {
		t.Errorf("acknowledged on a fork: %+v, want neutral, the cluster not read", c)
	}
	if agg := Aggregate(checks); agg.Conclusion != "neutral" {
		t.Errorf("acknowledged aggregate %+v", agg)
	}
	// Live data allowed but the cluster unreachable: the same.
	in.Fork, in.Labels = false, nil
	r := reviewer(t)
	r.Cluster = func(string) Cluster { return Cluster{Err: errors.New("no route to host")} }
	rep, checks = r.Review(context.Background(), in)
	if c := checks[0]; c.Conclusion != "failure" || !strings.Contains(rep.Targets[0].LiveError, "no route to host") {
		t.Errorf("an unreachable cluster: %+v, live error %q: the danger still fails the check", c, rep.Targets[0].LiveError)
	}
}

// TestAffects: a pull request affects a target when a file its build reads
// changed, and only on the branch the target follows (the default branch
// when it names none).
func TestAffects(t *testing.T) {
	in := pullRequest(t)
	prod, dev := in.Targets[0], in.Targets[1]
	if !Affects(prod, "main", "main", in.Base, in.Head, in.Changed) {
		t.Error("removing a resource of apps/prod does not affect it")
	}
	if Affects(dev, "main", "main", in.Base, in.Head, in.Changed) {
		t.Error("apps/dev is affected by a change it does not read")
	}
	// A target that names no branch follows the default branch: a pull
	// request into a branch its author pushed affects nothing.
	if Affects(prod, "side", "main", in.Base, in.Head, in.Changed) {
		t.Error("a pull request into a side branch affects a target that follows the default branch")
	}
	prod.Branch = "release"
	if Affects(prod, "main", "main", in.Base, in.Head, in.Changed) {
		t.Error("a pull request into main affects a target that follows release")
	}
	if !Affects(prod, "release", "main", in.Base, in.Head, in.Changed) {
		t.Error("a pull request into release does not affect a target that follows it")
	}
}

// TestAnUnrenderableTargetFailsItsCheck: an overlay that does not build is
// a failing check that says so, never a success.
func TestAnUnrenderableTargetFailsItsCheck(t *testing.T) {
	in := pullRequest(t)
	broken := map[string]string{"apps/prod/kustomization.yaml": "resources: [missing.yaml]\n", "apps/dev/kustomization.yaml": "resources: []\n"}
	in.Head = testfs.Tree(t, broken)
	changed, err := render.Changed(in.Base, in.Head)
	if err != nil {
		t.Fatal(err)
	}
	in.Changed = changed
	_, checks := reviewer(t).Review(context.Background(), in)
	if c := checks[0]; c.Conclusion != "failure" || c.Title != "The overlay does not render" {
		t.Errorf("an overlay that does not render: %+v", c)
	}
}

// TestATargetOnAnUnnamedRepositoryIsAdvisory: a discovered target whose
// repository app.yml does not name (a tenant's object chose it) shows its
// failure on its own check run, but that failure never fails the required
// aggregate check: a tenant cannot block the repository's pull requests.
func TestATargetOnAnUnnamedRepositoryIsAdvisory(t *testing.T) {
	in := pullRequest(t)
	in.Targets[0].Unnamed = true
	_, checks := reviewer(t).Review(context.Background(), in)
	if c := checks[0]; c.Conclusion != "failure" || !c.Advisory {
		t.Fatalf("the unnamed target's own check: %+v, want an advisory failure", c)
	}
	agg := Aggregate(checks)
	if agg.Conclusion != "neutral" || !strings.Contains(agg.Summary, "failure (advisory)") || !strings.Contains(agg.Summary, "does not fail this check") {
		t.Errorf("aggregate %+v, want neutral and the advisory failure said", agg)
	}
	in.Targets[0].Unnamed = false
	_, checks = reviewer(t).Review(context.Background(), in)
	if agg := Aggregate(checks); agg.Conclusion != "failure" {
		t.Errorf("a named target's failure: aggregate %s", agg.Conclusion)
	}
}

// TestJudgeUnreadIsNotASuccess: objects the live state does not hold
// leave the check neutral, never a success; a danger Git alone shows on
// them still fails it.
func TestJudgeUnreadIsNotASuccess(t *testing.T) {
	cm := drift.Change{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "app", Action: drift.ActionCreate}
	pvc := drift.Change{APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: "shop", Name: "data", Action: drift.ActionDelete,
		Danger: []drift.Danger{{Reason: drift.DangerPVCRemoval, Count: 1}}}
	policy := config.Policy{FailOn: []drift.DangerReason{drift.DangerPVCRemoval}, AckLabel: config.DefaultAckLabel}
	if c := Judge("prod", &drift.Target{Path: "prod", Unread: []drift.Change{cm}}, policy, nil); c.Conclusion != "neutral" || !strings.Contains(c.Title, "1 object not compared with the cluster") {
		t.Errorf("unread: %+v, want neutral", c)
	}
	if c := Judge("prod", &drift.Target{Path: "prod", Unread: []drift.Change{pvc}}, policy, nil); c.Conclusion != "failure" {
		t.Errorf("an unread claim removed: %+v, want a failure", c)
	}
}
