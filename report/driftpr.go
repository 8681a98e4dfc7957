package report

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/report/valuediff"
)

// maxTitle is GitHub's limit on an issue or pull-request title.
const maxTitle = 256

// DriftTitle is a drift pull request's or issue's title: the overlay and what
// changed, on one line of plain text.
func DriftTitle(p *prgen.Plan) string {
	objects := map[string]bool{}
	for _, c := range p.Codified {
		objects[c.Object] = true
	}
	for _, m := range p.Manual {
		objects[m.Object] = true
	}
	for _, a := range p.Adopted {
		objects[a.Object] = true
	}
	var t string
	switch len(objects) {
	case 0:
		t = fmt.Sprintf("Live changes in %s", plain(p.Overlay))
	case 1:
		for o := range objects {
			t = fmt.Sprintf("Codify live changes to %s in %s", plain(o), plain(p.Overlay))
		}
	default:
		t = fmt.Sprintf("Codify live changes to %d objects in %s", len(objects), plain(p.Overlay))
	}
	return truncateRunes(t, maxTitle)
}

// DriftPullRequest is a drift pull request's description: the plan for a
// person, and the fingerprint that lets driftback find its decision again.
func DriftPullRequest(p *prgen.Plan) string {
	return DriftPlan(p) + "\n" + prgen.FingerprintMarker(p) + "\n"
}

// audience is who reads a plan, which decides what it says to do.
type audience int

const (
	// forPullRequest: the plan is a drift pull request, merged or closed.
	forPullRequest audience = iota
	// forIssue: the plan is a report, kept in an issue.
	forIssue
	// forCommandLine: the plan is what driftback would propose.
	forCommandLine
)

// DriftIssue is the description of a target's drift issue (codify: report):
// the plan, read as a report, and its fingerprint.
func DriftIssue(p *prgen.Plan) string {
	return driftPlan(p, forIssue) + "\n" + prgen.FingerprintMarker(p) + "\n"
}

// DriftPlan describes a plan for a person: what changed live, on which
// object, by whom and when, why when they said, where it is written in Git,
// the rendered change, what needs a manual edit, and how to accept or reject
// it.
func DriftPlan(p *prgen.Plan) string { return driftPlan(p, forPullRequest) }

// DriftPlanPreview describes a plan as what driftback would propose, for
// the command line: what it would write where, and how to write it.
func DriftPlanPreview(p *prgen.Plan) string { return driftPlan(p, forCommandLine) }

// autoscaled lists the replicas an autoscaler owns, which are never codified.
func autoscaled(b *strings.Builder, p *prgen.Plan) {
	if len(p.Autoscaled) == 0 {
		return
	}
	b.WriteString("### Scaled live, owned by an autoscaler (not written to Git)\n\n")
	for _, m := range p.Autoscaled {
		fmt.Fprintf(b, "- %s %s is %s live: %s\n", code(m.Object), code(m.Path), code(planValue(m.Value)), text(m.Reason))
	}
	b.WriteString("\n")
}

// fights lists fields two writers keep changing, with the choices.
func fights(b *strings.Builder, p *prgen.Plan) {
	if len(p.Fights) == 0 {
		return
	}
	b.WriteString("### Two writers fight over these fields (not drift: a rule to choose)\n\n")
	b.WriteString("| object | field | writers | changes | last values |\n|---|---|---|---:|---|\n")
	for _, f := range p.Fights {
		var last []string
		for _, m := range f.Managers {
			if v, ok := f.Last[m]; ok {
				last = append(last, m+": "+planValue(v))
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %d in %s | %s |\n", cell(f.Object), cell(f.Path), textCell(f.Managers[0]+" and "+f.Managers[1]),
			f.Changes, textCell(f.Window.String()), cell(strings.Join(last, "; ")))
	}
	b.WriteString("\nNeither value is proposed: each flip would look like drift, and writing either into Git settles nothing while the other writer runs. Choose one:\n\n" +
		"- **Git owns it**: keep the value in Git and stop the other writer from setting it (its pipeline step, operator setting or script).\n" +
		"- **The other writer owns it**: leave it out of what the reconciler applies (remove it from the manifest, or an ignore rule such as Argo CD's `ignoreDifferences` or driftback's `policy.ignore`).\n\n")
}

func driftPlan(p *prgen.Plan, to audience) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Drift in %s\n\n", code(p.Overlay))
	if p.OnlyFights() {
		fights(&b, p)
		return b.String()
	}
	if p.Empty() {
		b.WriteString("The cluster matches Git: nothing to codify.\n")
		if len(p.Autoscaled) > 0 {
			b.WriteString("\n")
			autoscaled(&b, p)
		}
		return b.String()
	}
	fights(&b, p)
	b.WriteString("These changes were made in the cluster outside Git and are still there.\n\n")
	if p.Fate != "" && to != forCommandLine {
		b.WriteString("**If nobody acts:** " + text(p.Fate) + "\n\n")
	}
	if len(p.Intents) > 0 {
		var objs []string
		for o := range p.Intents {
			objs = append(objs, o)
		}
		sort.Strings(objs)
		for _, o := range objs {
			fmt.Fprintf(&b, "> **Intent** on %s: %s\n", code(o), text(p.Intents[o]))
		}
		b.WriteString("\n")
	}
	if len(p.Codified) > 0 {
		where := "written to"
		if to != forPullRequest {
			where = "would be written to"
		}
		fmt.Fprintf(&b, "| object | field | Git | live | changed by | %s |\n|---|---|---|---|---|---|\n", where)
		for _, c := range p.Codified {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s (%s) |\n", cell(c.Object), cell(c.Path), planCell(c.Was),
				planCell(c.Value), changedBy(c, p.Audited), cell(c.File), textCell(string(c.Strategy)))
		}
		var diff strings.Builder
		last := ""
		for _, c := range p.Codified {
			if c.Object != last {
				fmt.Fprintf(&diff, "@@ %s @@\n", c.Object)
				last = c.Object
			}
			if c.Was != nil {
				fmt.Fprintf(&diff, "- %s: %s\n", c.Path, planValue(c.Was))
			}
			fmt.Fprintf(&diff, "+ %s: %s\n", c.Path, planValue(c.Value))
		}
		b.WriteString("\n<details><summary>Rendered change</summary>\n\n" + fenced(diff.String(), "diff") + "\n</details>\n\n")
	}
	if len(p.Adopted) > 0 {
		b.WriteString("### Created live, now added to Git\n\n")
		for _, a := range p.Adopted {
			by := a.Manager
			if a.Time != nil {
				by += " at " + a.Time.UTC().Format("2006-01-02 15:04 UTC")
			}
			fmt.Fprintf(&b, "- %s (created by %s) → %s\n", code(a.Object), text(by), code(a.File))
		}
		b.WriteString("\n")
	}
	if len(p.Manual) > 0 {
		b.WriteString("### Needs a manual edit\n\n")
		for _, m := range p.Manual {
			value := code(planValue(m.Value))
			if v, ok := m.Value.(string); ok && strings.Contains(strings.TrimSuffix(v, "\n"), "\n") {
				value = codeLines(firstLines(v, 20, valuediff.MaxValueText)) // a file in a ConfigMap keeps its lines
			}
			fmt.Fprintf(&b, "- %s %s is %s live: %s\n", code(m.Object), code(m.Path), value, text(m.Reason))
		}
		b.WriteString("\n")
	}
	autoscaled(&b, p)
	if len(p.Unmanaged) > 0 {
		b.WriteString("### Created live, not in Git\n\n")
		for _, m := range p.Unmanaged {
			fmt.Fprintf(&b, "- %s: %s\n", code(m.Object), text(m.Reason))
		}
		b.WriteString("\n")
	}
	if len(p.Secrets) > 0 {
		b.WriteString("### Secrets changed live (never written to Git)\n\n")
		for _, s := range p.Secrets {
			keys := make([]string, len(s.Keys))
			for i, k := range s.Keys {
				keys[i] = code(k)
			}
			fmt.Fprintf(&b, "- %s: keys %s (values hidden)\n", code(s.Object), strings.Join(keys, ", "))
		}
		b.WriteString("\n")
	}
	if len(p.Deleted) > 0 {
		b.WriteString("### In Git but deleted from the cluster (no file changed)\n\n")
		for _, d := range p.Deleted {
			fmt.Fprintf(&b, "- %s\n", code(d))
		}
		b.WriteString("\n")
	}
	if len(p.NotApplied) > 0 {
		b.WriteString("### In Git, not applied yet (the reconciler has not applied them: not drift)\n\n")
		for _, d := range p.NotApplied {
			fmt.Fprintf(&b, "- %s\n", code(d))
		}
		b.WriteString("\n")
	}
	switch {
	case to == forCommandLine && len(p.Files) > 0:
		b.WriteString("driftback would propose these changes to Git as a pull request. `--write` writes them into the working tree instead, to review with `git diff`.\n")
	case to == forCommandLine:
		b.WriteString("Nothing here can be written to Git automatically: make the edits above by hand.\n")
	case to == forIssue:
		b.WriteString("driftback keeps this issue up to date while the drift lasts and closes it when the cluster matches Git again. Make the change in Git, or revert it in the cluster; close this issue to stop reports of this same drift.\n")
	case len(p.Files) > 0:
		b.WriteString("**Merge** to make these changes part of Git. **Close** to leave Git as it is: the reconciler may then revert the cluster, and driftback will not propose this same drift again.\n")
	default:
		b.WriteString("Nothing here can be written to Git automatically: make the edits above by hand, or **close** this to leave Git as it is.\n")
	}
	return b.String()
}

// CommitMessage is the message of a drift commit: plain text, one object
// per line, so no value can add a line of its own (a forged trailer such as
// Co-authored-by).
func CommitMessage(p *prgen.Plan) string {
	var b strings.Builder
	b.WriteString(DriftTitle(p) + "\n\n")
	for _, c := range p.Codified {
		by := c.Manager
		if c.By != nil {
			by = c.By.String()
		}
		fmt.Fprintf(&b, "- %s %s (changed live by %s)\n", plain(c.Object), plain(c.Path), plain(by))
	}
	for _, a := range p.Adopted {
		fmt.Fprintf(&b, "- %s created live by %s\n", plain(a.Object), plain(a.Manager))
	}
	for i, c := range p.CoAuthors {
		if i == 0 {
			b.WriteString("\n")
		}
		b.WriteString("Co-authored-by: " + plain(c) + "\n")
	}
	return b.String()
}

// plain shows s on one line of plain text without control characters, for
// titles and commit messages, which GitHub does not render as Markdown.
func plain(s string) string {
	return noRefs(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, visible(valid(s))))
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// planValue shows a value compactly: strings as they are, anything else as
// JSON, cut when long (the pull request's own diff holds it whole).
func planValue(v any) string {
	if v == nil {
		return "(absent)"
	}
	if s, ok := v.(string); ok {
		return valuediff.Cut(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return valuediff.Cut(fmt.Sprint(v))
	}
	return valuediff.Cut(string(b))
}

// planCell shows a value in a table cell: a multi-line one keeps its first
// lines (valueCell).
func planCell(v any) string {
	if s, ok := v.(string); ok && strings.Contains(strings.TrimSuffix(s, "\n"), "\n") {
		return valueCell(s)
	}
	return cell(planValue(v))
}

// changedBy says who made a live value, for a table cell: the person the
// cluster's audit log names, with their client, mentioned where app.yml
// maps them to a login that may read the repository; else the field
// manager, "unattributed" where the audit log was read and named no one.
func changedBy(c prgen.Codified, audited bool) string {
	if p := c.By; p != nil {
		s := textCell(p.String() + ", " + p.Time.UTC().Format("2006-01-02 15:04 UTC"))
		if p.Login != "" {
			s += " (" + mentionOf(p.Login) + ")"
		}
		return s
	}
	by := c.Manager
	if c.Time != nil {
		by += " at " + c.Time.UTC().Format("2006-01-02 15:04 UTC")
	}
	if audited {
		by += " (unattributed)"
	}
	return textCell(by)
}
