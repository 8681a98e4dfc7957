package report

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	gmhtml "github.com/yuin/goldmark/renderer/html"
	xhtml "golang.org/x/net/html"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/prgen"
)

// The tests here render what driftback writes with a GitHub-flavoured
// Markdown renderer (goldmark with its GFM extensions, raw HTML kept as
// GitHub keeps <details>) and prove that text from Git, the cluster or
// GitHub, put in every field at once, never changes the structure of the
// page: the elements outside code are the same as with a harmless value,
// and no mention survives outside code.

var gfm = goldmark.New(goldmark.WithExtensions(extension.GFM), goldmark.WithRendererOptions(gmhtml.WithUnsafe()))

// page renders Markdown to an HTML tree.
func page(t *testing.T, md string) *xhtml.Node {
	t.Helper()
	var buf bytes.Buffer
	if err := gfm.Convert([]byte(md), &buf); err != nil {
		t.Fatal(err)
	}
	doc, err := xhtml.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// skeleton lists the elements of a page in document order with their
// depth, without looking inside code and pre, where text is only text.
func skeleton(n *xhtml.Node) []string {
	var out []string
	var walk func(*xhtml.Node, int)
	walk = func(n *xhtml.Node, depth int) {
		if n.Type == xhtml.ElementNode {
			out = append(out, strings.Repeat(" ", depth)+n.Data)
			if n.Data == "code" || n.Data == "pre" {
				return
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	return out
}

var mention = regexp.MustCompile(`(^|[^A-Za-z0-9_\x{200d}` + "`" + `])@[A-Za-z0-9]`)

// mentions returns the text outside code that GitHub would turn into a
// mention (and notify).
func mentions(n *xhtml.Node) []string {
	var out []string
	var walk func(*xhtml.Node)
	walk = func(n *xhtml.Node) {
		if n.Type == xhtml.ElementNode && (n.Data == "code" || n.Data == "pre") {
			return
		}
		if n.Type == xhtml.TextNode && mention.MatchString(n.Data) {
			out = append(out, n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

// sameShape fails when hostile Markdown renders to another structure than
// harmless Markdown, or mentions someone.
func sameShape(t *testing.T, what, harmless, hostile string) {
	t.Helper()
	want, got := page(t, harmless), page(t, hostile)
	if diff := cmp.Diff(skeleton(want), skeleton(got)); diff != "" {
		t.Fatalf("%s: hostile text changed the page's structure (-harmless +hostile):\n%s\nMarkdown:\n%s", what, diff, hostile)
	}
	if m := mentions(got); len(m) > 0 {
		t.Fatalf("%s: mentions outside code: %q\nMarkdown:\n%s", what, m, hostile)
	}
}

// hostileReport puts s in every field of a report that comes from Git, the
// cluster or GitHub: paths, kinds, names, namespaces, field paths, values,
// managers, messages and errors.
func hostileReport(s string) *drift.Report {
	at := time.Date(2026, 11, 29, 16, 8, 0, 0, time.UTC)
	f := object.Field{Path: s, Live: s, Desired: s, Base: s, Manager: s, Subresource: s, Time: &at, OverwritesDrift: true, Kind: object.FieldOverwrites}
	m := object.Field{Path: s, Live: map[string]any{s: []any{s}}, Desired: nil, Manager: s, Kind: object.FieldDrift}
	p := object.Field{Path: s, Live: s, Desired: s, Base: s, Kind: object.FieldPR}
	cod := object.Field{Path: s, Live: s, Desired: s, Base: map[string]any{s: s}, Manager: s, Time: &at, Kind: object.FieldCodifies}
	t := drift.Target{
		Name: s, Path: s, Cluster: s, Errors: []string{s},
		Changes: []drift.Change{
			{APIVersion: s, Kind: s, Namespace: s, Name: s, Action: drift.ActionCreate, Manifest: s,
				Danger: []drift.Danger{{Reason: drift.DangerRBACEscalation, Count: 1, Message: s}, {Reason: drift.DangerCRDRemoval, Count: 3, Message: s}, {Reason: drift.DangerRestoreNotRollback, Count: 1, Message: s}}},
			{APIVersion: "v1", Kind: s, Namespace: s, Name: s, Action: drift.ActionUpdate, Fields: []object.Field{f, m, p, cod},
				OverwritesDrift: true, Note: s},
			{APIVersion: "v1", Kind: s, Namespace: s, Name: s, Action: drift.ActionDelete, Manifest: s + "\n" + s},
			{APIVersion: "v1", Kind: "Secret", Namespace: s, Name: s, Action: drift.ActionUpdate, Secret: true,
				Fields: []object.Field{{Path: ".data." + s, Live: "hidden", Desired: "hidden", Hidden: true}}},
			{APIVersion: "v1", Kind: s, Namespace: s, Name: s, Action: drift.ActionKeep, KeptBy: s},
		},
		Drift:      []drift.Change{{APIVersion: "v1", Kind: s, Namespace: s, Name: s, Action: drift.ActionUpdate, Fields: []object.Field{f}}},
		OutOfScope: []drift.Change{{APIVersion: s, Kind: s, Namespace: s, Name: s, Action: drift.Action(s), Note: s}},
		Notes:      []string{s},
	}
	t.Reverts = []string{s}
	git := t
	git.LiveError = s
	git.PR = t.Changes
	return &drift.Report{Targets: []drift.Target{t, git}, Errors: []string{s},
		NotRendered: []drift.NotRendered{{Source: s, Cluster: s, Path: s, Reason: s}}}
}

// hostilePlan puts s in every field of a drift plan that comes from Git or
// the cluster, the person's intent included.
func hostilePlan(s string) *prgen.Plan {
	at := time.Date(2026, 11, 29, 16, 8, 0, 0, time.UTC)
	return &prgen.Plan{
		Overlay: s, Files: map[string][]byte{s: []byte(s)},
		Codified: []prgen.Codified{{Object: s, Path: s, Value: s, Was: s, Manager: s, Time: &at, File: s, Strategy: prgen.StrategyPatch},
			{Object: s, Path: s, Value: map[string]any{s: s}, Manager: s, File: s, Strategy: prgen.StrategyReplicas}},
		Manual:     []prgen.Manual{{Object: s, Path: s, Value: s, Reason: s}},
		Adopted:    []prgen.Adopted{{Object: s, File: s, Manager: s, Time: &at}},
		Unmanaged:  []prgen.Manual{{Object: s, Reason: s}},
		Autoscaled: []prgen.Manual{{Object: s, Path: s, Value: s, Reason: s}},
		Secrets:    []prgen.SecretDrift{{Object: s, Keys: []string{s, s}}},
		Deleted:    []string{s},
		Intents:    map[string]string{s: s},
	}
}

// seeds are the cases seen: names that are headings, links and mentions,
// keys that close the bot's block, backticks, fences, carriage returns,
// pipes, emphasis, entities, autolinks and math.
var seeds = []string{
	"x",
	"web\n\n# ✅ driftback: nothing to worry about [click](https://evil.example) @org/team",
	"</details>\n\n## ✅ driftback: nothing to worry about\n\n<details><summary>",
	"a`b``c```d",
	"`",
	"```\n# heading\n```",
	"~~~\n# heading",
	"line\rline\r\r# heading",
	"a | b | c\n|---|---|",
	"verbs [*] resources [*]",
	"![img](https://evil.example/x.png)",
	"<img src=x onerror=alert(1)>",
	"&lt;script&gt; &amp; &#64;",
	"https://evil.example www.evil.example user@evil.example",
	"@octocat please approve",
	"$\\text{✅ All checks passed}$",
	"- [ ] task\n- [x] done",
	"> quote\n>> nested",
	"   indented",
	"<!-- comment -->",
	"\\`escaped\\`",
	"a\u2028b\u2029c\u0000d\x7f",
	"\xff\xfe invalid utf-8",
	"**bold** _em_ ~~strike~~",
	"1. one\n2) two",
	"---\n===",
	"[ref]: https://evil.example",
}

func addSeeds(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
}

// usable skips inputs that are only whitespace: a field can never be empty
// and blank both where the harmless value is not, and the structure then
// rightly differs (a section with nothing to show is left out).
func usable(t *testing.T, s string) {
	if strings.TrimSpace(s) == "" {
		t.Skip()
	}
}

// FuzzComment: the pull-request comment, and a check run's summary.
func FuzzComment(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		usable(t, s)
		failing := func(s string) CommentOptions {
			// One part: splitting has its own test.
			return CommentOptions{Limit: 1 << 30, Failing: []Failing{{Target: s, Reasons: []string{s}, AckLabel: s}}}
		}
		sameShape(t, "comment", strings.Join(Comment(hostileReport("x"), failing("x")), ""), strings.Join(Comment(hostileReport(s), failing(s)), ""))
		t0 := hostileReport("x").Targets[0]
		t1 := hostileReport(s).Targets[0]
		sameShape(t, "check summary", CheckSummary(&t0, nil), CheckSummary(&t1, nil))
		sameShape(t, "failing check summary", CheckSummary(&t0, &Failing{Target: "x", Reasons: []string{"x"}, On: []drift.DangerReason{"x"}, AckLabel: "x"}),
			CheckSummary(&t1, &Failing{Target: s, Reasons: []string{s}, On: []drift.DangerReason{drift.DangerReason(s)}, AckLabel: s}))
	})
}

// FuzzDriftPullRequest: the drift pull request's and issue's descriptions,
// titles and commit message.
func FuzzDriftPullRequest(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		usable(t, s)
		sameShape(t, "drift pull request", DriftPullRequest(hostilePlan("x")), DriftPullRequest(hostilePlan(s)))
		sameShape(t, "drift issue", DriftIssue(hostilePlan("x")), DriftIssue(hostilePlan(s)))
		for _, title := range []string{DriftTitle(hostilePlan(s)), DriftIssueTitle(s), DangerousTitle([]string{s}), AcknowledgedTitle(s)} {
			if strings.ContainsAny(title, "\r\n\u2028\u2029") || len([]rune(title)) > maxTitle {
				t.Fatalf("title %q spans lines or is over %d characters", title, maxTitle)
			}
		}
		want, got := CommitMessage(hostilePlan("x")), CommitMessage(hostilePlan(s))
		if strings.Count(got, "\n") != strings.Count(want, "\n") {
			t.Fatalf("a value added lines to the commit message:\n%s", got)
		}
	})
}

// FuzzCheckText: the other texts of check runs and the error comment.
func FuzzCheckText(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		usable(t, s)
		at := time.Date(2026, 11, 29, 16, 8, 0, 0, time.UTC)
		for _, c := range []struct{ what, harmless, hostile string }{
			{"render problems", RenderProblemsSummary([]string{"x", "x"}), RenderProblemsSummary([]string{s, s})},
			{"comparison failed", ComparisonFailedSummary(errors.New("x")), ComparisonFailedSummary(errors.New(s))},
			{"git only", GitOnlySummary("x", ""), GitOnlySummary(s, "")},
			{"aggregate", AggregateSummary([]CheckRow{{"x", "x", "x", false}, {"x", "x", "x", true}}, 3), AggregateSummary([]CheckRow{{s, s, s, false}, {s, s, s, true}}, 3)},
			{"error comment", ErrorComment(errors.New("x"), "x", at), ErrorComment(errors.New(s), s, at)},
			{"approve how-to", ApproveHowTo("x", "x"), ApproveHowTo(s, s)},
			{"approve stale", ApproveStale("x", "x", "x"), ApproveStale(s, s, s)},
		} {
			sameShape(t, c.what, c.harmless, c.hostile)
		}
	})
}

// TestSplitCommentsKeepFencesClosed: a report split into parts, with
// values holding fences and backtick runs, gives parts that each render
// with every code block and details block closed.
func TestSplitCommentsKeepFencesClosed(t *testing.T) {
	for _, s := range []string{"```", "````\n```\n`", "~~~", "x"} {
		r := hostileReport(s)
		var fields []object.Field
		for i := range 400 {
			fields = append(fields, object.Field{Path: strings.Repeat("k", i%7) + s, Live: strings.Repeat(s+"\n", 20), Desired: strings.Repeat("v", 300)})
		}
		r.Targets[0].Changes[1].Fields = fields
		parts := Comment(r, CommentOptions{})
		if len(parts) < 2 {
			t.Fatalf("%q: %d parts, want a split", s, len(parts))
		}
		for i, p := range parts {
			doc := page(t, p)
			details := 0
			var walk func(*xhtml.Node)
			walk = func(n *xhtml.Node) {
				if n.Type == xhtml.ElementNode && n.Data == "details" {
					details++
				}
				if n.Type == xhtml.ElementNode && n.Data == "pre" {
					// A fence left open would swallow the rest of the part,
					// the closing </details> included.
					if strings.Contains(textOf(n), "</details>") {
						t.Errorf("%q part %d: a code block swallowed the details block's end", s, i+1)
					}
				}
				for c := n.FirstChild; c != nil; c = c.NextSibling {
					walk(c)
				}
			}
			walk(doc)
			if want := strings.Count(p, "<details>"); details != want {
				t.Errorf("%q part %d: %d details elements for %d opened", s, i+1, details, want)
			}
		}
	}
}

func textOf(n *xhtml.Node) string {
	var b strings.Builder
	var walk func(*xhtml.Node)
	walk = func(n *xhtml.Node) {
		if n.Type == xhtml.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}
