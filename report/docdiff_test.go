package report

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

// fieldComment is the comment of one ConfigMap whose field changes.
func fieldComment(f object.Field) string {
	cm := drift.Change{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "app", Action: drift.ActionUpdate, Fields: []object.Field{f}}
	rep := &drift.Report{Targets: []drift.Target{{Path: "overlays/prod", Changes: []drift.Change{cm}}}}
	return strings.Join(Comment(rep, CommentOptions{}), "")
}

// longestLine is the length of out's longest line, in characters.
func longestLine(out string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		n = max(n, len([]rune(l)))
	}
	return n
}

// TestAJSONValueIsComparedAsADocument: a one-key change inside a JSON
// document of about 6,500 characters on one line (a ConfigMap's settings)
// reads as that key's path with its two values, not as two escaped
// strings on one 13,000-character line.
func TestAJSONValueIsComparedAsADocument(t *testing.T) {
	doc := func(enabled bool) string {
		var flags []string
		for i := range 150 {
			flags = append(flags, fmt.Sprintf(`"flag%03d":{"owner":"team-%d","rollout":%d}`, i, i%7, i%100))
		}
		return fmt.Sprintf(`{"features":{"checkout":{"enabled":%t,"percent":25}},"flags":{%s},"version":3}`, enabled, strings.Join(flags, ","))
	}
	before, after := doc(false), doc(true)
	if len(before) < 6000 {
		t.Fatalf("the document is %d characters, want a large one", len(before))
	}
	out := fieldComment(object.Field{Path: ".data.settings.json", Kind: object.FieldPR, Base: before, Desired: after, Live: before})
	if !strings.Contains(out, "- changed by this PR `.data.settings.json`: JSON document, 1 path changed, as a diff below") {
		t.Errorf("the field's line does not say it is a document with one path changed:\n%s", out)
	}
	if !strings.Contains(out, "```diff\n@@ features.checkout.enabled @@\n- false\n+ true\n```") {
		t.Errorf("the change is not the path with its two values:\n%s", out)
	}
	if strings.Contains(out, `\"`) || strings.Contains(out, "flag149") {
		t.Errorf("the comment shows the escaped document:\n%s", out)
	}
	if n := longestLine(out); n > 400 {
		t.Errorf("a line of the comment is %d characters long", n)
	}
}

// TestAYAMLValueListsItsChangedPaths: a YAML file in a ConfigMap shows its
// changed paths as dyff does, items of a named list by their name; a
// change of comments or layout only (the same document) is a line diff.
func TestAYAMLValueListsItsChangedPaths(t *testing.T) {
	before := "# upstreams\nservers:\n  - name: a\n    port: 80\n  - name: b\n    port: 81\nretries: 3\n"
	after := "# upstreams\nservers:\n  - name: z\n    port: 90\n  - name: a\n    port: 80\n  - name: b\n    port: 8081\ntimeout: 5s\n"
	out := fieldComment(object.Field{Path: ".data.upstreams.yaml", Kind: object.FieldPR, Base: before, Desired: after, Live: before})
	if !strings.Contains(out, "`.data.upstreams.yaml`: YAML document, 4 paths changed, as a diff below") {
		t.Errorf("the field's line:\n%s", out)
	}
	want := "```diff\n" +
		"@@ retries (removed) @@\n- 3\n" +
		"@@ servers[name=\"b\"].port @@\n- 81\n+ 8081\n" +
		"@@ servers[name=\"z\"] (added) @@\n+ {\"name\":\"z\",\"port\":90}\n" +
		"@@ timeout (added) @@\n+ \"5s\"\n```"
	if !strings.Contains(out, want) {
		t.Errorf("the paths are not listed, named items by name:\n%s\nwant:\n%s", out, want)
	}
	// Comments only: the same document, so its lines are what changed.
	out = fieldComment(object.Field{Path: ".data.upstreams.yaml", Kind: object.FieldPR, Base: before, Desired: strings.Replace(before, "# upstreams", "# the upstreams", 1), Live: before})
	if !strings.Contains(out, "1 line removed, 1 line added, as a diff below") || !strings.Contains(out, "+# the upstreams") {
		t.Errorf("a comment's change is not a line diff:\n%s", out)
	}
}

// TestADocumentInASecretStaysHidden: a Secret's value holding JSON shows
// neither its paths nor its values.
func TestADocumentInASecretStaysHidden(t *testing.T) {
	before, after := `{"db":{"password":"hunter2"}}`, `{"db":{"password":"correct-horse"}}`
	s := drift.Change{APIVersion: "v1", Kind: "Secret", Namespace: "shop", Name: "db", Action: drift.ActionUpdate, Secret: true,
		Fields: []object.Field{{Path: ".stringData.config", Kind: object.FieldPR, Base: before, Desired: after, Live: before, Hidden: true}}}
	// The same field outside a Secret's key list: a hidden value on its own line.
	cm := s
	cm.Kind, cm.Secret = "ConfigMap", false
	rep := &drift.Report{Targets: []drift.Target{{Path: "overlays/prod", Changes: []drift.Change{s, cm}}}}
	out := strings.Join(Comment(rep, CommentOptions{}), "")
	for _, leak := range []string{"hunter2", "correct-horse", "password"} {
		if strings.Contains(out, leak) {
			t.Errorf("the comment shows %q of a hidden value:\n%s", leak, out)
		}
	}
}

// TestALongValueIsCutWithANote: a long single-line value (not a document)
// is cut in the comment, saying how much was left out.
func TestALongValueIsCutWithANote(t *testing.T) {
	before, after := strings.Repeat("a", 5000), strings.Repeat("b", 5000)
	out := fieldComment(object.Field{Path: ".data.blob", Kind: object.FieldPR, Base: before, Desired: after, Live: before})
	if !strings.Contains(out, "…(cut: 4762 more characters)") {
		t.Errorf("the value is not cut with a note:\n%s", out)
	}
	if n := longestLine(out); n > 700 {
		t.Errorf("a line of the comment is %d characters long", n)
	}
}

// TestALiveChangeInADocumentSaysWhoMadeIt: a live edit inside a ConfigMap's
// YAML file that a sync reverts names the field manager that made it, as
// a sentence.
func TestALiveChangeInADocumentSaysWhoMadeIt(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 12, 0, 0, time.UTC)
	out := fieldComment(object.Field{Path: ".data.app.yaml", Kind: object.FieldDrift, Base: "a: 1\nb: 2\n", Desired: "a: 1\nb: 2\n", Live: "a: 1\nb: 5\n", Manager: "kubectl-edit", Time: &at})
	if !strings.Contains(out, "`.data.app.yaml`: YAML document, 1 path changed, as a diff below; live value set by kubectl-edit, 2026-12-01 09:12 UTC") {
		t.Errorf("the field's line does not say who set the live value:\n%s", out)
	}
	if !strings.Contains(out, "@@ b @@\n- 5\n+ 2\n") {
		t.Errorf("the drift is not from live to Git:\n%s", out)
	}
}

// TestAHostileDocumentIsReadAsText: a value larger than the bound, or
// nested deeper, is not parsed as a document: it shows as a line diff.
func TestAHostileDocumentIsReadAsText(t *testing.T) {
	big := func(last string) string {
		var b strings.Builder
		for i := range 12000 {
			fmt.Fprintf(&b, "key%05d: value of some length\n", i)
		}
		return b.String() + "last: " + last + "\n"
	}
	deep := func(leaf string) string {
		return "a: 1\nb: " + strings.Repeat("[", 1000) + leaf + strings.Repeat("]", 1000) + "\n"
	}
	for name, c := range map[string][2]string{"large": {big("1"), big("2")}, "deep": {deep("1"), deep("2")}} {
		out := fieldComment(object.Field{Path: ".data.x", Kind: object.FieldPR, Base: c[0], Desired: c[1], Live: c[0]})
		if strings.Contains(out, "YAML document") || !strings.Contains(out, "1 line removed, 1 line added") {
			t.Errorf("%s: the value was parsed as a document:\n%.400s", name, out)
		}
	}
}
