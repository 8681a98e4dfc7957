// Package report writes what driftback found as GitHub-flavoured Markdown:
// the pull-request comment, check runs, drift pull requests and issues, and
// commit messages. It is the one place text from Git, the cluster or GitHub
// becomes Markdown, and only through the functions of md.go.
package report

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/driftback/driftback/drift"
)

// MaxCommentSize is GitHub's limit on the body of a comment.
const MaxCommentSize = 65536

// CommentOptions shape the pull-request comment.
type CommentOptions struct {
	// Limit is the size of one part; 0 means MaxCommentSize less room for a
	// marker and footer that the caller adds (1,024 characters).
	Limit int
}

// Comment renders the report as a pull-request comment: a summary table,
// then dangers, then the live changes the PR overwrites, then one collapsible
// diff per object. A report over the limit is split into numbered parts at
// section boundaries; no part breaks a code fence or a details block.
func Comment(r *drift.Report, opts CommentOptions) []string {
	limit := opts.Limit
	if limit <= 0 {
		limit = MaxCommentSize - 1024
	}
	blocks := markdownBlocks(r)
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

	if d := dangerSection(r); d != "" {
		blocks = append(blocks, d)
	}
	if o := overwriteSection(r); o != "" {
		blocks = append(blocks, o)
	}
	for _, t := range r.Targets {
		blocks = append(blocks, targetBlocks(t)...)
	}
	return blocks
}

func summaryTable(r *drift.Report) string {
	var b strings.Builder
	b.WriteString("| overlay | create | update | delete | unchanged | ⚠️ dangers | ↩️ overwrites live changes | existing drift |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range r.Targets {
		counts := map[drift.Action]int{}
		dangers, overwrites, drifted := 0, 0, 0
		for _, c := range t.Told() {
			dangers += len(c.Danger)
		}
		for _, c := range t.Changes {
			counts[c.Action]++
			for _, f := range c.Fields {
				if f.OverwritesDrift {
					overwrites++
				}
			}
		}
		for _, c := range t.Drift {
			if c.Action != drift.ActionUnchanged {
				drifted++
			}
		}
		if t.LiveError != "" {
			counts = map[drift.Action]int{}
			for _, c := range t.PR {
				counts[c.Action]++
			}
		}
		fmt.Fprintf(&b, "| %s%s | %d | %d | %d | %d | %s | %s | %d |\n", cell(t.Path), liveMark(t),
			counts[drift.ActionCreate], counts[drift.ActionUpdate], counts[drift.ActionDelete]+counts[drift.ActionKeep], counts[drift.ActionUnchanged],
			bold(dangers), bold(overwrites), drifted)
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
	var lines []string
	total := 0
	for _, t := range r.Targets {
		for _, c := range t.Told() {
			for _, d := range c.Danger {
				total++
				lines = append(lines, fmt.Sprintf("- **%s** %s in %s (%s): %s", text(string(d.Reason)), code(refString(c)), code(t.Path), text(string(c.Action)), text(d.Message)))
			}
		}
	}
	if total == 0 {
		return ""
	}
	return fmt.Sprintf("### ⚠️ Dangers (%d)\n\n%s\n", total, strings.Join(lines, "\n"))
}

func overwriteSection(r *drift.Report) string {
	var lines []string
	for _, t := range r.Targets {
		for _, c := range t.Changes {
			for _, f := range c.Fields {
				if !f.OverwritesDrift {
					continue
				}
				lines = append(lines, fmt.Sprintf("- %s %s in %s: live %s%s → %s", code(refString(c)), code(f.Path), code(t.Path),
					code(valueText(f, f.Live)), spaced(text(who(f))), code(valueText(f, f.Desired))))
			}
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return fmt.Sprintf("### ↩️ This pull request overwrites live changes (%d)\n\nThese fields were changed in the cluster outside Git; a sync after merging reverts them.\n\n%s\n", len(lines), strings.Join(lines, "\n"))
}

// spaced puts a space before s unless it is empty.
func spaced(s string) string {
	if s == "" {
		return ""
	}
	return " " + s
}

// who says which manager set a field live, and when.
func who(f drift.Field) string {
	if f.Manager == "" {
		return ""
	}
	s := " (set by " + f.Manager
	if f.Subresource != "" {
		s += " via " + f.Subresource
	}
	if f.Time != nil {
		s += " at " + f.Time.UTC().Format("2006-01-02 15:04 UTC")
	}
	return s + ")"
}

func targetBlocks(t drift.Target) []string {
	var blocks []string
	var head strings.Builder
	fmt.Fprintf(&head, "### %s\n\n", code(t.Path))
	if t.LiveError != "" {
		fmt.Fprintf(&head, "> The cluster could not be read (%s): this shows what the pull request changes in Git only.\n\n", text(t.LiveError))
	}
	for _, e := range t.Errors {
		fmt.Fprintf(&head, "- ❌ %s\n", text(e))
	}
	if len(t.Errors) > 0 {
		head.WriteString("\n")
	}
	changes := t.Changes
	title := "What a sync does after merging"
	if t.LiveError != "" {
		changes, title = t.PR, "What the pull request changes"
	}
	n := 0
	for _, c := range changes {
		if c.Action != drift.ActionUnchanged {
			n++
		}
	}
	if n == 0 {
		fmt.Fprintf(&head, "%s: nothing.\n", title)
		blocks = append(blocks, head.String())
	} else {
		fmt.Fprintf(&head, "%s (%d):\n", title, n)
		blocks = append(blocks, head.String())
		for _, c := range changes {
			if c.Action != drift.ActionUnchanged {
				blocks = append(blocks, changeBlock(c, false))
			}
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
	var drifted []drift.Change
	for _, c := range t.Drift {
		if c.Action != drift.ActionUnchanged {
			drifted = append(drifted, c)
		}
	}
	if len(drifted) > 0 {
		blocks = append(blocks, fmt.Sprintf("#### Existing drift in %s (%d)\n\nThe cluster already differs from the base branch here, whatever this pull request does.\n", code(t.Path), len(drifted)))
		for _, c := range drifted {
			blocks = append(blocks, changeBlock(c, true))
		}
	}
	return blocks
}

var actionIcon = map[drift.Action]string{
	drift.ActionCreate: "➕ create", drift.ActionUpdate: "✏️ update", drift.ActionDelete: "🗑️ delete", drift.ActionKeep: "📌 keep (leaves Git, stays in the cluster)",
}

// changeBlock renders one object as a details block with a diff inside.
func changeBlock(c drift.Change, drifted bool) string {
	var b strings.Builder
	action := actionIcon[c.Action]
	if drifted {
		action = "≠ drifted"
		if c.Action == drift.ActionCreate {
			action = "≠ missing from the cluster"
		}
	}
	summary := fmt.Sprintf("%s %s", action, htmlCode(refString(c)))
	if len(c.Fields) > 0 {
		summary += fmt.Sprintf(" (%s)", plural(len(c.Fields), "field"))
	}
	if len(c.Danger) > 0 {
		summary += " ⚠️"
	}
	if c.OverwritesDrift {
		summary += " ↩️"
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
	if len(c.Fields) > 0 {
		var body strings.Builder
		for _, f := range c.Fields {
			if f.Live != nil {
				fmt.Fprintf(&body, "- %s: %s\n", f.Path, valueText(f, f.Live))
			}
			if f.Desired != nil {
				fmt.Fprintf(&body, "+ %s: %s\n", f.Path, valueText(f, f.Desired))
			}
			if w := who(f); w != "" && !drifted {
				fmt.Fprintf(&body, "  # live value%s\n", w)
			} else if w != "" {
				fmt.Fprintf(&body, "  # changed%s\n", w)
			}
		}
		b.WriteString(fenced(body.String(), "diff") + "\n")
	}
	b.WriteString("</details>\n")
	return b.String()
}

func refString(c drift.Change) string {
	if c.Namespace == "" {
		return c.Kind + "/" + c.Name
	}
	return c.Kind + "/" + c.Namespace + "/" + c.Name
}

// valueText shows a value compactly: scalars as they are, structures as JSON.
func valueText(f drift.Field, v any) string {
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
	kept := 0
	tail := "\n_(this object's diff is too long for a comment; the rest is left out)_\n\n</details>\n"
	fence := ""
	for _, l := range lines {
		if b.Len()+len(l)+len(tail)+len(fence)+2 > room {
			break
		}
		// Fences are ours (fenced): an opener starts with three or more
		// backticks outside a block; inside, only that fence closes it,
		// and no content line can equal it.
		switch {
		case fence == "" && strings.HasPrefix(l, "```"):
			fence = l[:len(l)-len(strings.TrimLeft(l, "`"))]
		case fence != "" && l == fence:
			fence = ""
		}
		b.WriteString(l + "\n")
		kept++
	}
	if fence != "" {
		b.WriteString(fence + "\n")
	}
	if strings.HasPrefix(blk, "<details>") {
		b.WriteString(tail)
	}
	return []string{b.String()}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
