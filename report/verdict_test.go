package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

// imageBump is a pull request that changes one image, on a workload whose
// replicas Git pinned under an autoscaler already at the base.
func imageBump() *drift.Report {
	web := drift.Change{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", Action: drift.ActionUpdate,
		Fields: []object.Field{{Path: ".spec.template.spec.containers[name=\"web\"].image", Kind: object.FieldPR, Base: "web:1.4.0", Desired: "web:1.5.0", Live: "web:1.4.0"}}}
	api := drift.Change{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "api", Action: drift.ActionUnchanged,
		Danger: []drift.Danger{{Reason: drift.DangerAutoscaledReplicas, Count: 1, Before: true, Message: "Git sets replicas (2) on a workload an autoscaler scales"}}}
	return &drift.Report{Targets: []drift.Target{{Name: "prod", Path: "overlays/prod", Changes: []drift.Change{web, api}}}}
}

// TestAPlainImageBumpIsNotDangerous: a condition as true before the pull
// request is noted apart and counted nowhere; the verdict says nothing here
// is dangerous, and the object it concerns is not listed as a change.
func TestAPlainImageBumpIsNotDangerous(t *testing.T) {
	out := strings.Join(Comment(imageBump(), CommentOptions{Checked: true}), "")
	for _, want := range []string{
		"## driftback: what merging this pull request does to the cluster\n\n✅ **Nothing here is dangerous**",
		"| `prod` (`overlays/prod`) | 0 | 1 | 0 | 1 | 0 | 0 |",
		"<details><summary>Already true before this pull request (1): not counted above</summary>",
		"What a sync does after merging (1 object):",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the comment does not say %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"Dangers this pull request brings", "<code>Deployment/shop/api</code>", "⚠️ **", "</summary> ⚠️", "⚠️ danger 1"} {
		if strings.Contains(out, not) {
			t.Errorf("the comment of a plain image bump says %q:\n%s", not, out)
		}
	}
}

// TestTheVerdictLeadsAndMarksWhatFails: a failing check is the first line,
// with what fails, where, and the label that accepts it; the dangers are
// ordered by severity, and the one that fails is marked, in the list and in
// its object, where its sentence is not said again.
func TestTheVerdictLeadsAndMarksWhatFails(t *testing.T) {
	rep := imageBump()
	tg := &rep.Targets[0]
	tg.Changes = append(tg.Changes,
		drift.Change{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "debug", Action: drift.ActionCreate,
			Danger: []drift.Danger{{Reason: drift.DangerRBACEscalation, Count: 1, Message: "grants 1 risky rule"}}},
		drift.Change{APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: "shop", Name: "cache", Action: drift.ActionDelete,
			Danger: []drift.Danger{{Reason: drift.DangerPVCRemoval, Count: 1, Message: "the claim is bound to pv-cache (5Gi, Delete): its data is deleted"}}})
	failing := Failing{Target: "prod", Reasons: []string{"pvc-removal (1)"}, On: []drift.DangerReason{drift.DangerPVCRemoval}, AckLabel: "driftback/allow-danger"}
	out := strings.Join(Comment(rep, CommentOptions{Checked: true, Failing: []Failing{failing}}), "")
	verdict := "## driftback: what merging this pull request does to the cluster\n\n❌ **The check fails** on pvc-removal (1) in `prod`. Review the dangers below; if they are wanted, someone with write access to the repository adds the label `driftback/allow-danger` to accept them."
	if !strings.HasPrefix(out, verdict) {
		t.Errorf("the comment does not lead with the verdict %q:\n%s", verdict, out)
	}
	first := strings.Index(out, "1. data lost · **pvc-removal** `PersistentVolumeClaim/shop/cache` in `prod` (`overlays/prod`) (delete) ❌ **fails the check**")
	second := strings.Index(out, "2. privilege · **rbac-escalation** `ClusterRole/debug`")
	if first < 0 || second < first {
		t.Errorf("the dangers are not listed most severe first, with the failing one marked:\n%s", out)
	}
	if n := strings.Count(out, "its data is deleted"); n != 1 {
		t.Errorf("the danger's sentence is said %d times, want once", n)
	}
	if !strings.Contains(out, "⚠️ danger 1 above: **pvc-removal**, which fails the check.") {
		t.Errorf("the claim's object does not point at its danger:\n%s", out)
	}
	// The check summary leads with the same verdict.
	summary := CheckSummary(tg, &failing)
	if !strings.HasPrefix(summary, verdict) {
		t.Errorf("the check summary does not lead with the verdict:\n%s", summary)
	}
	// Without a failing check, the dangers are to review, by severity.
	out = strings.Join(Comment(rep, CommentOptions{Checked: true}), "")
	if !strings.Contains(out, "⚠️ **2 dangers to review**: 1 losing data, 1 granting privilege; none fails a check.") {
		t.Errorf("the verdict without a failing check:\n%s", out)
	}
}

// TestAMultiLineValueIsALineDiff: one line changed in a 40-line file of a
// ConfigMap (a properties file: text, not a YAML or JSON document) reads as
// a diff of that line with a little context, in a fenced diff block, never
// as two escaped strings.
func TestAMultiLineValueIsALineDiff(t *testing.T) {
	var lines []string
	for i := range 40 {
		lines = append(lines, fmt.Sprintf("setting%02d = value%02d", i, i))
	}
	before := strings.Join(lines, "\n") + "\n"
	lines[20] = "setting20 = changed"
	after := strings.Join(lines, "\n") + "\n"
	cm := drift.Change{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "app", Action: drift.ActionUpdate,
		Fields: []object.Field{{Path: ".data.app.yaml", Kind: object.FieldPR, Base: before, Desired: after, Live: before}}}
	rep := &drift.Report{Targets: []drift.Target{{Path: "overlays/prod", Changes: []drift.Change{cm}}}}
	out := strings.Join(Comment(rep, CommentOptions{}), "")
	if !strings.Contains(out, "- changed by this PR `.data.app.yaml`: 1 line removed, 1 line added, as a diff below") {
		t.Errorf("the field's line does not count the lines changed:\n%s", out)
	}
	want := "```diff\n@@ -18,7 +18,7 @@\n setting17 = value17\n setting18 = value18\n setting19 = value19\n-setting20 = value20\n+setting20 = changed\n setting21 = value21\n setting22 = value22\n setting23 = value23\n```\n"
	if !strings.Contains(out, want) {
		t.Errorf("the change is not a diff of one line with three of context:\n%s", out)
	}
	if strings.Contains(out, `\n`) {
		t.Errorf("the comment shows an escaped string:\n%s", out)
	}
}

// TestNoAllClearWhenSomethingWasNotCompared: a target that could not be
// compared may hold the danger; the verdict says so instead of "nothing
// here is dangerous".
func TestNoAllClearWhenSomethingWasNotCompared(t *testing.T) {
	rep := imageBump()
	rep.Targets = append(rep.Targets, drift.Target{Path: "overlays/broken", NotCompared: "it does not render"})
	out := strings.Join(Comment(rep, CommentOptions{}), "")
	if !strings.Contains(out, "⚠️ **Not everything was compared** (see ❌ below); nothing in what was is dangerous.") || strings.Contains(out, "✅") {
		t.Errorf("the verdict with a target not compared:\n%s", out)
	}
	// Objects the live state lacks, a cluster that failed: the same. A
	// cluster not read by choice is a whole Git comparison.
	cm := drift.Change{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "app", Action: drift.ActionCreate}
	for _, c := range []struct {
		target drift.Target
		whole  bool
	}{
		{drift.Target{Path: "unread", Unread: []drift.Change{cm}}, false},
		{drift.Target{Path: "down", LiveError: "connection refused", PR: []drift.Change{cm}}, false},
		{drift.Target{Path: "git", LiveError: "no cluster given", LiveNotAsked: true, PR: []drift.Change{cm}}, true},
	} {
		rep := imageBump()
		rep.Targets = append(rep.Targets, c.target)
		out := strings.Join(Comment(rep, CommentOptions{}), "")
		if strings.Contains(out, "✅ **Nothing here is dangerous**") != c.whole {
			t.Errorf("%s: the verdict:\n%s", c.target.Path, out)
		}
	}
}

// TestAFailingDangerIsMarkedOnAnUnnamedTarget: a target of the command
// line (CI mode) has a path and no name; the danger its check fails on is
// marked all the same.
func TestAFailingDangerIsMarkedOnAnUnnamedTarget(t *testing.T) {
	pvc := drift.Change{APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: "shop", Name: "data", Action: drift.ActionDelete,
		Danger: []drift.Danger{{Reason: drift.DangerPVCRemoval, Count: 1, Message: "its data is deleted"}}}
	rep := &drift.Report{Targets: []drift.Target{{Path: "overlays/prod", Changes: []drift.Change{pvc}}}}
	failing := []Failing{{Target: FailingName(rep.Targets[0]), Reasons: []string{"pvc-removal (1)"}, On: []drift.DangerReason{drift.DangerPVCRemoval}, AckLabel: "driftback/allow-danger"}}
	out := strings.Join(Comment(rep, CommentOptions{Failing: failing, Checked: true}), "")
	if !strings.Contains(out, "❌ **fails the check**") {
		t.Errorf("the danger the check fails on is not marked:\n%s", out)
	}
}
