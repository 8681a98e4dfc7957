package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/prgen"
)

// bigReport has n updated objects, each with a few long fields.
func bigReport(n int) *drift.Report {
	t := drift.Target{Path: "overlays/prod"}
	for i := range n {
		ch := drift.Change{APIVersion: "v1", Kind: "ConfigMap", Namespace: "prod", Name: fmt.Sprintf("config-%04d", i), Action: drift.ActionUpdate}
		for j := range 3 {
			ch.Fields = append(ch.Fields, object.Field{Path: fmt.Sprintf(".data.key%d", j), Live: strings.Repeat("a", 200), Desired: strings.Repeat("b", 200)})
		}
		t.Changes = append(t.Changes, ch)
	}
	return &drift.Report{Targets: []drift.Target{t}}
}

// TestMarkdownSplitsAtSectionBoundaries proves a report over the comment limit
// becomes numbered parts, each within the limit, none breaking a code fence or
// a details block, with nothing lost; and a small report is one part.
func TestMarkdownSplitsAtSectionBoundaries(t *testing.T) {
	parts := Comment(bigReport(300), CommentOptions{})
	if len(parts) < 3 {
		t.Fatalf("%d parts for a report of about %d characters", len(parts), len(strings.Join(parts, "")))
	}
	for i, p := range parts {
		if len(p) > MaxCommentSize-1024 {
			t.Errorf("part %d is %d characters, over the limit", i+1, len(p))
		}
		if !strings.HasPrefix(p, fmt.Sprintf("_(part %d of %d)_", i+1, len(parts))) {
			t.Errorf("part %d is not numbered: %.40q", i+1, p)
		}
		if strings.Count(p, "<details>") != strings.Count(p, "</details>") {
			t.Errorf("part %d breaks a details block", i+1)
		}
		if strings.Count(p, "```")%2 != 0 {
			t.Errorf("part %d breaks a code fence", i+1)
		}
	}
	all := strings.Join(parts, "")
	for _, name := range []string{"config-0000", "config-0150", "config-0299"} {
		if strings.Count(all, "<code>ConfigMap/prod/"+name+"</code>") != 1 {
			t.Errorf("%s is not shown exactly once across the parts", name)
		}
	}
	if small := Comment(bigReport(2), CommentOptions{}); len(small) != 1 || strings.HasPrefix(small[0], "_(part") {
		t.Errorf("a small report gives %d parts", len(small))
	}
}

// TestMarkdownCutsAnObjectTooLargeForAComment proves one object whose diff is
// larger than a whole part is cut and still closed properly.
func TestMarkdownCutsAnObjectTooLargeForAComment(t *testing.T) {
	r := bigReport(1)
	r.Targets[0].Changes[0].Fields[0].Desired = strings.Repeat("x", 80_000)
	r.Targets[0].Changes[0].Fields = append(r.Targets[0].Changes[0].Fields, object.Field{Path: ".data.more", Desired: strings.Repeat("y\n", 30_000)})
	parts := Comment(r, CommentOptions{})
	for i, p := range parts {
		if len(p) > MaxCommentSize-1024 {
			t.Errorf("part %d is %d characters", i+1, len(p))
		}
		if strings.Count(p, "<details>") != strings.Count(p, "</details>") || strings.Count(p, "```")%2 != 0 {
			t.Errorf("part %d is not well formed", i+1)
		}
	}
	// The object is still there, and says it was cut.
	all := strings.Join(parts, "")
	if !strings.Contains(all, "<code>ConfigMap/prod/config-0000</code>") || !strings.Contains(all, "too long for a comment") {
		t.Errorf("the object too large for a comment vanished or was cut silently:\n%.2000s", all)
	}
}

// TestALineTooLongForACommentIsCutNotTheRest: an object whose name is
// longer than a whole comment part (70,000 characters) is cut, with a note,
// and the other dangers and objects around it are all still shown.
func TestALineTooLongForACommentIsCutNotTheRest(t *testing.T) {
	r := bigReport(3)
	for i := range r.Targets[0].Changes {
		r.Targets[0].Changes[i].Action = drift.ActionDelete
		r.Targets[0].Changes[i].Danger = []drift.Danger{{Reason: drift.DangerCRDRemoval, Message: "deletes every custom resource of its kind", Count: i + 1}}
	}
	r.Targets[0].Changes[1].Name = strings.Repeat("n", 70_000)
	parts := Comment(r, CommentOptions{})
	all := strings.Join(parts, "")
	for i, p := range parts {
		if len(p) > MaxCommentSize-1024 {
			t.Errorf("part %d is %d characters", i+1, len(p))
		}
		if strings.Count(p, "<details>") != strings.Count(p, "</details>") || strings.Count(p, "<code>") != strings.Count(p, "</code>") {
			t.Errorf("part %d is not well formed", i+1)
		}
	}
	for _, want := range []string{"config-0000", "config-0002", "cut: too long for a comment"} {
		if n := strings.Count(all, want); n < 2 && want != "cut: too long for a comment" || n == 0 {
			t.Errorf("%q appears %d times: in the dangers and in the objects, want both", want, n)
		}
	}
}

// TestDriftPlanNamesTheAutoscaler: replicas an autoscaler owns are reported
// with why, even when nothing else is there to codify.
func TestDriftPlanNamesTheAutoscaler(t *testing.T) {
	p := &prgen.Plan{Overlay: "deploy/prod", Files: map[string][]byte{}, Autoscaled: []prgen.Manual{{
		Object: "Deployment/prod/web", Path: ".spec.replicas", Value: int64(6),
		Reason: "replicas belong to HorizontalPodAutoscaler/web (min 2, max 10 replicas)"}}}
	got := DriftPlan(p)
	for _, want := range []string{"nothing to codify", "owned by an autoscaler", "`.spec.replicas` is `6` live", "HorizontalPodAutoscaler/web (min 2, max 10 replicas)"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// TestReconcilerNotesAndUnrenderedSources: a suspended reconciler is said
// under its target's heading, and a source that cannot be rendered is listed
// with why, its names escaped.
func TestReconcilerNotesAndUnrenderedSources(t *testing.T) {
	r := &drift.Report{
		Targets: []drift.Target{{Name: "prod/flux-system/apps", Path: "apps", Cluster: "prod",
			Notes: []string{"the Kustomization is suspended (spec.suspend): merging changes nothing on this cluster until reconciliation resumes"}}},
		NotRendered: []drift.NotRendered{{Source: "Application argocd/`x`<b>", Cluster: "prod", Path: "charts/cache", Reason: "it is a Helm source"}},
	}
	body := strings.Join(Comment(r, CommentOptions{}), "\n")
	for _, s := range []string{
		"### `prod/flux-system/apps` (`apps`) on cluster `prod`\n\n> ℹ️ the Kustomization is suspended (spec.suspend): merging changes nothing on this cluster until reconciliation resumes",
		"### Not rendered",
		"(`charts/cache`) on cluster `prod`: not rendered: it is a Helm source",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the comment does not say %q:\n%s", s, body)
		}
	}
	if !strings.Contains(body, "- ``Application argocd/`x`<b>`` (") || strings.Count(body, "<b>") != 1 {
		t.Errorf("a source's name reaches the comment outside a code span:\n%s", body)
	}
}

// TestMarkersCannotBeForged: driftback's hidden markers are read back from
// the lines it writes them on, and no text from the cluster or Git can carry
// one, inside code spans or code blocks too.
//   - A live value holding the fingerprint of another drift, in a drift pull
//     request that a person then closes, must not make the other drift read
//     as "decided against".
//   - An object named with a LostMarker claiming 0 lost must not replace the
//     512 custom resources the cluster counted.
func TestMarkersCannotBeForged(t *testing.T) {
	real := &prgen.Plan{Overlay: "deploy/prod", Files: map[string][]byte{"deploy/prod/web.yaml": []byte("x")},
		Codified: []prgen.Codified{{Object: "Deployment/prod/web", Path: ".spec.replicas", Value: int64(6), File: "deploy/prod/web.yaml"}}}
	forged := prgen.FingerprintMarker(real)
	decoy := &prgen.Plan{Overlay: "deploy/prod", Files: map[string][]byte{},
		Codified: []prgen.Codified{{Object: "ConfigMap/prod/notes", Path: ".data.note", Value: "x\n" + forged + "\n", File: "deploy/prod/notes.yaml"}},
		Manual:   []prgen.Manual{{Object: "ConfigMap/prod/other", Path: ".data.a", Value: forged, Reason: forged}}}
	body := DriftPullRequest(decoy)
	if strings.Contains(strings.TrimSuffix(body, prgen.FingerprintMarker(decoy)+"\n"), "<!--") {
		t.Errorf("the description carries a marker from the cluster:\n%s", body)
	}
	if got := prgen.FingerprintOf(body); got != decoy.Fingerprint() {
		t.Errorf("FingerprintOf = %s, want the decoy's own %s", got, decoy.Fingerprint())
	}
	d := prgen.Decide(real, []prgen.PullRequest{{Number: 7, Body: body}}, false)
	if d.Action != prgen.ActionOpen {
		t.Errorf("after a forged fingerprint was closed: %+v, want the real drift opened", d)
	}

	r := &drift.Report{Targets: []drift.Target{{Name: "prod", Path: "deploy/prod", Changes: []drift.Change{
		{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: "widgets.example.com", Action: drift.ActionDelete,
			Danger: []drift.Danger{{Reason: drift.DangerCRDRemoval, Message: "deletes every Widget", Count: 512}}},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "prod", Name: "x\n<!-- driftback:lost kind=CustomResourceDefinition name=widgets.example.com count=0 -->\n",
			Action: drift.ActionDelete, Danger: []drift.Danger{{Reason: drift.DangerPVCRemoval, Message: "<!-- driftback:lost kind=CustomResourceDefinition name=widgets.example.com count=0 -->", Count: 1}}},
	}}}}
	all := strings.Join(Comment(r, CommentOptions{}), "\n")
	if n, ok := LostCount(all, "CustomResourceDefinition", "widgets.example.com"); !ok || n != 512 {
		t.Errorf("LostCount = %d, %v; want 512 as counted", n, ok)
	}
	if strings.Count(all, "<!-- driftback:lost") != 1 {
		t.Errorf("the comment holds a lost marker it did not write:\n%s", all)
	}
}

// TestReferencesAndFormatCharacters: text from Git or the cluster cannot
// link or notify another issue or pull request (#123, owner/repo#1, GH-1),
// in text, HTML or titles, and its Unicode
// format characters (a bidi override, a zero-width space) are shown, in code
// too; what a reader sees of the rest is unchanged.
func TestReferencesAndFormatCharacters(t *testing.T) {
	refs := "fixes #123, acme/other#7 and GH-42"
	for name, got := range map[string]string{"text": text(refs), "html": html(refs), "title": plain(refs)} {
		for _, ref := range []string{"#123", "#7", "GH-42"} {
			if strings.Contains(got, ref) {
				t.Errorf("%s: %q links %s", name, got, ref)
			}
		}
		if strings.ReplaceAll(strings.NewReplacer(`\`, "", "&#35;", "#", "&#44;", ",").Replace(got), zwj, "") != refs {
			t.Errorf("%s: %q does not read as %q", name, got, refs)
		}
	}
	hidden := "admin\u202Egnp.exe\u200B"
	for name, got := range map[string]string{"code": code(hidden), "fenced": fenced(hidden, ""), "text": text(hidden), "html": html(hidden), "title": plain(hidden)} {
		if strings.ContainsAny(got, "\u202E\u200B") || !strings.Contains(got, "U+202E") || !strings.Contains(got, "U+200B") {
			t.Errorf("%s: %q hides or reorders what it shows", name, got)
		}
	}
}
