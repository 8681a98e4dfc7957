// Package report writes what driftback found as GitHub-flavoured Markdown:
// the pull-request comment, check runs, drift pull requests and issues, and
// commit messages. It is the one place text from Git, the cluster or GitHub
// becomes Markdown, and only through the functions of md.go.
package report

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

// MaxCommentSize is GitHub's limit on the body of a comment.
const MaxCommentSize = 65536

// CommentOptions shape the pull-request comment.
type CommentOptions struct {
	// Limit is the size of one part; 0 means MaxCommentSize less room for a
	// marker and footer that the caller adds (1,024 characters).
	Limit int
	// Failing lists the targets whose check fails on dangers: the comment
	// ends with what to do next.
	Failing []Failing
}

// Failing is a target whose check fails on dangers its policy names.
type Failing struct {
	// Target names the target; Reasons are "reason (count)".
	Target   string
	Reasons  []string
	AckLabel string
}

// Comment renders the report as a pull-request comment: a summary table,
// then dangers, then each target with each affected object once, every
// changed field tagged with what it is to the pull request, then what to do
// next when a check fails. A report over the limit is split into numbered
// parts at block boundaries; no part breaks a code fence or a details block.
func Comment(r *drift.Report, opts CommentOptions) []string {
	limit := opts.Limit
	if limit <= 0 {
		limit = MaxCommentSize - 1024
	}
	blocks := markdownBlocks(r)
	if n := nextSteps(opts.Failing); n != "" {
		blocks = append(blocks, n)
	}
	return pack(blocks, limit)
}

// markdownBlocks renders the report as self-contained blocks, in order.
func markdownBlocks(r *drift.Report) []string {
	var blocks []string
	var b strings.Builder
	b.WriteString("## driftback: what merging this pull request does to the cluster\n\n")
	b.WriteString(summaryTable(r))
	blocks = append(blocks, b.String())

	if len(r.Errors) > 0 {
		var e strings.Builder
		e.WriteString("### ❌ Errors\n\n")
		for _, msg := range r.Errors {
			e.WriteString("- " + text(msg) + "\n")
		}
		blocks = append(blocks, e.String())
	}

	if len(r.NotRendered) > 0 {
		var e strings.Builder
		e.WriteString("### Not rendered\n\n")
		for _, n := range r.NotRendered {
			where := code(n.Source)
			if n.Path != "" {
				where += " (" + code(n.Path) + ")"
			}
			if n.Cluster != "" {
				where += " on cluster " + code(n.Cluster)
			}
			e.WriteString("- " + where + ": not rendered: " + text(n.Reason) + "\n")
		}
		blocks = append(blocks, e.String())
	}
	if d := dangerSection(r); d != "" {
		blocks = append(blocks, d)
	}
	for _, t := range r.Targets {
		blocks = append(blocks, targetBlocks(t)...)
	}
	return blocks
}

// nextSteps says, when checks fail on dangers, how to accept them.
func nextSteps(failing []Failing) string {
	if len(failing) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("### What to do next\n\n")
	for _, f := range failing {
		fmt.Fprintf(&b, "- The check of %s fails on %s. Once the dangers above are reviewed and wanted, add the label %s to accept them.\n",
			code(f.Target), text(strings.Join(f.Reasons, ", ")), code(f.AckLabel))
	}
	b.WriteString("\nEvery new push is evaluated again.\n")
	return b.String()
}

// targetTitle names a target, its overlay and its cluster.
func targetTitle(t drift.Target) string {
	s := code(t.Path)
	if t.Name != "" && t.Name != t.Path {
		s = code(t.Name) + " (" + code(t.Path) + ")"
	}
	if t.Cluster != "" {
		s += " on cluster " + code(t.Cluster)
	}
	return s
}

// fieldCounts counts a target's told fields by kind.
func fieldCounts(t drift.Target) map[object.FieldKind]int {
	out := map[object.FieldKind]int{}
	for _, c := range t.Told() {
		for _, f := range c.Fields {
			out[f.Kind]++
		}
	}
	return out
}

func summaryTable(r *drift.Report) string {
	var b strings.Builder
	b.WriteString("| target | create | update | delete | unchanged | ⚠️ dangers | ↩️ overwrites live changes | ≠ drift left |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range r.Targets {
		if t.NotCompared != "" {
			fmt.Fprintf(&b, "| %s ❌ not compared: %s | – | – | – | – | – | – | – |\n", strings.ReplaceAll(targetTitle(t), "|", `\|`),
				strings.ReplaceAll(text(t.NotCompared), "|", `\|`))
			continue
		}
		counts := map[drift.Action]int{}
		dangers := 0
		for _, c := range t.Told() {
			counts[c.Action]++
			dangers += len(c.Danger)
		}
		fields := fieldCounts(t)
		fmt.Fprintf(&b, "| %s%s | %d | %d | %d | %d | %s | %s | %d |\n", strings.ReplaceAll(targetTitle(t), "|", `\|`), liveMark(t),
			counts[drift.ActionCreate], counts[drift.ActionUpdate], counts[drift.ActionDelete]+counts[drift.ActionKeep], counts[drift.ActionUnchanged],
			bold(dangers), bold(fields[object.FieldOverwrites]), fields[object.FieldDrift])
	}
	if len(r.Targets) == 0 {
		b.WriteString("| _no overlay is affected by this change_ | | | | | | | |\n")
	}
	return b.String()
}

func liveMark(t drift.Target) string {
	if t.LiveError != "" {
		return " (Git only: cluster not read)"
	}
	if n := len(t.OutOfScope); n > 0 {
		return fmt.Sprintf(" (%s outside its scope: Git only)", plural(n, "object"))
	}
	return ""
}

func bold(n int) string {
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("**%d**", n)
}

func dangerSection(r *drift.Report) string {
	var lines, marks []string
	total := 0
	for _, t := range r.Targets {
		for _, c := range t.Told() {
			for _, d := range c.Danger {
				total++
				lines = append(lines, fmt.Sprintf("- **%s** %s in %s (%s): %s", text(string(d.Reason)), code(refString(c)), targetTitle(t), text(string(c.Action)), text(d.Message)))
				if m := LostMarker(d, c); m != "" {
					marks = append(marks, m)
				}
			}
		}
	}
	if total == 0 {
		return ""
	}
	return fmt.Sprintf("### ⚠️ Dangers (%d)\n\n%s\n%s", total, strings.Join(lines, "\n"), strings.Join(append(marks, ""), "\n"))
}

// LostMarker records, invisibly in the comment, how many objects a removal
// deletes as measured on the cluster, so that a later pull request restoring
// the same CRD or namespace can say what did not come back. Names are
// query-escaped: nothing from Git can close the HTML comment.
func LostMarker(d drift.Danger, c drift.Change) string {
	if d.CountUnknown || (d.Reason != drift.DangerCRDRemoval && d.Reason != drift.DangerNamespaceRemoval) {
		return ""
	}
	return fmt.Sprintf("<!-- driftback:lost kind=%s name=%s count=%d -->", url.QueryEscape(c.Kind), url.QueryEscape(c.Name), d.Count)
}

// lostPattern matches a LostMarker on its own line, where driftback writes it.
var lostPattern = regexp.MustCompile(`(?m)^<!-- driftback:lost kind=([^ ]+) name=([^ ]+) count=(\d+) -->\r?$`)

// LostCount reads back a LostMarker from a comment's body.
func LostCount(body, kind, name string) (int, bool) {
	for _, m := range lostPattern.FindAllStringSubmatch(body, -1) {
		k, err1 := url.QueryUnescape(m[1])
		n, err2 := url.QueryUnescape(m[2])
		count, err3 := strconv.Atoi(m[3])
		if err1 == nil && err2 == nil && err3 == nil && k == kind && n == name {
			return count, true
		}
	}
	return 0, false
}

// revertSection says what a revert does not restore.
func revertSection(t drift.Target) string {
	if len(t.Reverts) == 0 {
		return ""
	}
	var lines []string
	for _, c := range t.Told() {
		for _, d := range c.Danger {
			if d.Reason == drift.DangerRestoreNotRollback || d.Reason == drift.DangerRollbackAcrossJob {
				lines = append(lines, fmt.Sprintf("- %s: %s", code(refString(c)), text(d.Message)))
			}
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return fmt.Sprintf("#### What this revert does not restore\n\nThis pull request reverts %s. Git goes back; these do not:\n\n%s\n\n",
		text(strings.Join(t.Reverts, "; ")), strings.Join(lines, "\n"))
}

// who says which manager set a live value, how and when: "kubectl scale,
// 2026-11-29 16:08 UTC".
func who(f object.Field) string {
	if f.Manager == "" {
		return ""
	}
	s := f.Manager
	if f.Subresource != "" {
		s += " " + f.Subresource
	}
	if f.Time != nil {
		s += ", " + f.Time.UTC().Format("2006-01-02 15:04 UTC")
	}
	return s
}

func targetBlocks(t drift.Target) []string {
	var blocks []string
	var head strings.Builder
	fmt.Fprintf(&head, "### %s\n\n", targetTitle(t))
	for _, n := range t.Notes {
		fmt.Fprintf(&head, "> ℹ️ %s\n\n", text(n))
	}
	head.WriteString(revertSection(t))
	if t.LiveError != "" {
		fmt.Fprintf(&head, "> The cluster could not be read (%s): this shows what the pull request changes in Git only.\n\n", text(t.LiveError))
	}
	for _, e := range t.Errors {
		fmt.Fprintf(&head, "- ❌ not compared: %s\n", text(e))
	}
	if len(t.Errors) > 0 {
		head.WriteString("\n")
	}
	if t.NotCompared != "" {
		fmt.Fprintf(&head, "**Not compared: %s.** What merging does to this target is unknown until that is fixed.\n", text(t.NotCompared))
		return append(blocks, head.String())
	}
	title := "What a sync does after merging"
	if t.LiveError != "" {
		title = "What the pull request changes"
	}
	var shown []drift.Change
	for _, c := range t.Told() {
		if c.Action != drift.ActionUnchanged || len(c.Fields) > 0 || len(c.Danger) > 0 {
			shown = append(shown, c)
		}
	}
	if len(shown) == 0 {
		fmt.Fprintf(&head, "%s: nothing.\n", title)
		blocks = append(blocks, head.String())
	} else {
		fmt.Fprintf(&head, "%s (%s):\n", title, plural(len(shown), "object"))
		blocks = append(blocks, head.String())
		for _, c := range shown {
			blocks = append(blocks, changeBlock(c))
		}
	}
	if len(t.OutOfScope) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "#### Outside the scope of %s (%d)\n\nThese objects are compared in Git only: the cluster is not read for them, so no live value, owner or count is shown. An operator widens a target's scope with %s in app.yml.\n\n", code(t.Path), len(t.OutOfScope), code("scope:"))
		for _, c := range t.OutOfScope {
			fmt.Fprintf(&b, "- %s: %s in Git\n", code(refString(c)), text(string(c.Action)))
		}
		blocks = append(blocks, b.String())
	}
	return blocks
}

var actionIcon = map[drift.Action]string{
	drift.ActionCreate: "➕ create", drift.ActionUpdate: "✏️ update", drift.ActionDelete: "🗑️ delete",
	drift.ActionKeep: "📌 keep (leaves Git, stays in the cluster)", drift.ActionUnchanged: "＝ no change live",
}

// kindLabel names each kind of field change for a reader.
var kindLabel = map[object.FieldKind]string{
	object.FieldPR:         "changed by this PR",
	object.FieldOverwrites: "↩️ overwrites a live change",
	object.FieldCodifies:   "📝 codifies a live change",
	object.FieldDrift:      "≠ drift this PR leaves",
}

// changeBlock renders one object once: what happens to it, its dangers, and
// each changed field with what it is to the pull request.
func changeBlock(c drift.Change) string {
	var b strings.Builder
	summary := fmt.Sprintf("%s %s", actionIcon[c.Action], htmlCode(refString(c)))
	kinds := map[object.FieldKind]int{}
	for _, f := range c.Fields {
		kinds[f.Kind]++
	}
	var parts []string
	for _, k := range []object.FieldKind{object.FieldPR, object.FieldOverwrites, object.FieldCodifies, object.FieldDrift} {
		if kinds[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", kinds[k], strings.TrimLeft(kindLabel[k], "↩️📝≠ ")))
		}
	}
	if len(parts) > 0 {
		summary += ": " + html(strings.Join(parts, ", "))
	}
	if len(c.Danger) > 0 {
		summary += " ⚠️"
	}
	fmt.Fprintf(&b, "<details><summary>%s</summary>\n\n", summary)
	if c.KeptBy != "" {
		fmt.Fprintf(&b, "Kept by %s.\n\n", code(c.KeptBy))
	}
	for _, d := range c.Danger {
		fmt.Fprintf(&b, "⚠️ **%s**: %s\n\n", text(string(d.Reason)), text(d.Message))
	}
	if c.Note != "" {
		fmt.Fprintf(&b, "Note: %s\n\n", text(c.Note))
	}
	if c.Secret && len(c.Fields) > 0 {
		var keys []string
		for _, f := range c.Fields {
			if f.Hidden {
				keys = append(keys, code(strings.TrimPrefix(strings.TrimPrefix(f.Path, ".data."), ".data")))
			}
		}
		if len(keys) > 0 {
			fmt.Fprintf(&b, "Secret keys changed: %s (values hidden)\n\n", strings.Join(keys, ", "))
		}
	}
	for _, f := range c.Fields {
		b.WriteString(fieldLine(f) + "\n")
	}
	if len(c.Fields) > 0 {
		b.WriteString("\n")
	}
	if c.Manifest != "" {
		what := "rendered YAML"
		if c.Action == drift.ActionDelete || c.Action == drift.ActionKeep {
			what = "YAML as the base renders it"
		}
		fmt.Fprintf(&b, "<details><summary>%s</summary>\n\n%s\n</details>\n\n", what, fenced(c.Manifest, "yaml"))
	}
	b.WriteString("</details>\n")
	return b.String()
}

// fieldLine tells one field: Git → live for drift, Git before → after for
// the pull request's own change, with who set the live value and when.
func fieldLine(f object.Field) string {
	line := storyLine(f)
	if f.Autoscaler != "" {
		line += "; the replicas belong to " + text(f.Autoscaler)
	}
	return line
}

func storyLine(f object.Field) string {
	v := func(x any) string { return code(valueText(f, x)) }
	by := ""
	if w := who(f); w != "" {
		by = " (" + text(w) + ")"
	}
	switch f.Kind {
	case object.FieldOverwrites:
		return fmt.Sprintf("- %s %s: Git %s → %s; live %s%s is replaced", kindLabel[f.Kind], code(f.Path), v(f.Base), v(f.Desired), v(f.Live), by)
	case object.FieldCodifies:
		return fmt.Sprintf("- %s %s: Git %s → %s, the live value%s", kindLabel[f.Kind], code(f.Path), v(f.Base), v(f.Desired), by)
	case object.FieldDrift:
		return fmt.Sprintf("- %s %s: Git %s, live %s%s; any sync reverts it", kindLabel[f.Kind], code(f.Path), v(f.Desired), v(f.Live), by)
	case object.FieldPR:
		line := fmt.Sprintf("- %s %s: Git %s → %s", kindLabel[f.Kind], code(f.Path), v(f.Base), v(f.Desired))
		if !reflect.DeepEqual(f.Live, f.Base) {
			// Git did not hold the live value (an object new in Git that
			// exists live): it is replaced too.
			line += fmt.Sprintf("; live %s%s", v(f.Live), by)
		}
		return line
	}
	return fmt.Sprintf("- %s: %s → %s%s", code(f.Path), v(f.Live), v(f.Desired), by)
}

func refString(c drift.Change) string {
	if c.Namespace == "" {
		return c.Kind + "/" + c.Name
	}
	return c.Kind + "/" + c.Namespace + "/" + c.Name
}

// valueText shows a value compactly: scalars as they are, structures as JSON.
func valueText(f object.Field, v any) string {
	if f.Hidden && v != nil {
		return "(value hidden)"
	}
	switch x := v.(type) {
	case nil:
		return "(absent)"
	case string:
		b, _ := json.Marshal(x)
		return string(b)
	case map[string]any, []any:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	default:
		return fmt.Sprint(x)
	}
}

// pack joins blocks into parts of at most limit characters, breaking only
// between blocks. A block larger than a part on its own is cut at a line
// boundary and closed properly.
func pack(blocks []string, limit int) []string {
	const partHeader = "_(part %d of %d)_\n\n"
	room := limit - len(fmt.Sprintf(partHeader, 99, 99))
	var parts []string
	var cur strings.Builder
	for _, blk := range blocks {
		for _, piece := range splitBlock(blk, room) {
			if cur.Len() > 0 && cur.Len()+len(piece)+1 > room {
				parts = append(parts, cur.String())
				cur.Reset()
			}
			if cur.Len() > 0 {
				cur.WriteString("\n")
			}
			cur.WriteString(piece)
		}
	}
	if cur.Len() > 0 || len(parts) == 0 {
		parts = append(parts, cur.String())
	}
	if len(parts) > 1 {
		for i := range parts {
			parts[i] = fmt.Sprintf(partHeader, i+1, len(parts)) + parts[i]
		}
	}
	return parts
}

// splitBlock returns blk, or for a block over room, its head cut at a line
// with a note of what was left out, still a closed details block.
func splitBlock(blk string, room int) []string {
	if len(blk) <= room {
		return []string{blk}
	}
	lines := strings.Split(blk, "\n")
	var b strings.Builder
	const note = "\n_(this is too long for a comment; the rest is left out)_\n"
	const closer = "\n</details>\n"
	// A line longer than this is cut, and what follows it kept: a single
	// huge value or name never takes the lines after it along.
	longest := room / 4
	fence := ""
	depth := 0 // details blocks open, outside fences
	cut := false
	for _, l := range lines {
		if len(l) > longest {
			l = cutLine(l, longest)
		}
		if b.Len()+len(l)+len(note)+len(closer)*(depth+1)+len(fence)+2 > room {
			cut = true
			break
		}
		// Fences are ours (fenced): an opener starts with three or more
		// backticks outside a block; inside, only that fence closes it,
		// and no content line can equal it. Outside fences, text is
		// escaped, so a line opening or closing details is ours too.
		switch {
		case fence == "" && strings.HasPrefix(l, "```"):
			fence = l[:len(l)-len(strings.TrimLeft(l, "`"))]
		case fence != "" && l == fence:
			fence = ""
		case fence == "" && strings.HasPrefix(l, "<details>"):
			depth++
		case fence == "" && l == "</details>":
			depth--
		}
		b.WriteString(l + "\n")
	}
	if fence != "" {
		b.WriteString(fence + "\n")
	}
	if cut {
		b.WriteString(note)
	}
	for ; depth > 0; depth-- {
		b.WriteString(closer)
	}
	return []string{b.String()}
}

// cutLine shortens a line to about n bytes: at a character boundary, never
// inside an HTML entity or tag, with the code span and summary it opened
// closed again, and a note that it was cut.
func cutLine(l string, n int) string {
	const mark = " …(cut: too long for a comment)"
	s := l[:max(0, min(len(l), n-len(mark)-len("</code></summary>")))]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	if i := strings.LastIndexByte(s, '&'); i >= 0 && !strings.Contains(s[i:], ";") {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '<'); i >= 0 && !strings.Contains(s[i:], ">") {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '`'); i >= 0 && strings.Count(s, "`")%2 == 1 {
		s = s[:i] // a code span left open would swallow the mark
	}
	s += mark
	if strings.Count(s, "<code>") > strings.Count(s, "</code>") {
		s += "</code>"
	}
	if strings.HasPrefix(s, "<details><summary>") && !strings.Contains(s, "</summary>") {
		s += "</summary>"
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
