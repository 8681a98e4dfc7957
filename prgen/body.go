package prgen

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Title is the pull request's title: the overlay and what changed.
func Title(p *Plan) string {
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
	switch len(objects) {
	case 0:
		return fmt.Sprintf("Live changes in %s", p.Overlay)
	case 1:
		for o := range objects {
			return fmt.Sprintf("Codify live changes to %s in %s", o, p.Overlay)
		}
	}
	return fmt.Sprintf("Codify live changes to %d objects in %s", len(objects), p.Overlay)
}

// Markdown describes a plan for a person: what changed live, on which object,
// by whom and when, why when they said, where it is written in Git, the
// rendered change, what needs a manual edit, and how to accept or reject it.
func Markdown(p *Plan) string { return markdown(p, false) }

// ReportBody is the description of a target's drift issue (codify: report):
// the plan, read as a report, and its fingerprint.
func ReportBody(p *Plan) string {
	return markdown(p, true) + fmt.Sprintf("\n<!-- driftback:drift fingerprint=%s -->\n", p.Fingerprint())
}

func markdown(p *Plan, report bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Drift in `%s`\n\n", p.Overlay)
	if p.Empty() {
		b.WriteString("The cluster matches Git: nothing to codify.\n")
		return b.String()
	}
	b.WriteString("These changes were made in the cluster outside Git and are still there.\n\n")
	if len(p.Intents) > 0 {
		var objs []string
		for o := range p.Intents {
			objs = append(objs, o)
		}
		sort.Strings(objs)
		for _, o := range objs {
			fmt.Fprintf(&b, "> **Intent** on `%s`: %s\n", o, strings.ReplaceAll(p.Intents[o], "\n", " "))
		}
		b.WriteString("\n")
	}
	if len(p.Codified) > 0 {
		where := "written to"
		if report {
			where = "would be written to"
		}
		fmt.Fprintf(&b, "| object | field | Git | live | changed by | %s |\n|---|---|---|---|---|---|\n", where)
		for _, c := range p.Codified {
			by := c.Manager
			if c.Time != nil {
				by += " at " + c.Time.UTC().Format("2006-01-02 15:04 UTC")
			}
			fmt.Fprintf(&b, "| `%s` | `%s` | `%s` | `%s` | %s | `%s` (%s) |\n", c.Object, c.Path, value(c.Was), value(c.Value), by, c.File, c.Strategy)
		}
		b.WriteString("\n<details><summary>Rendered change</summary>\n\n```diff\n")
		last := ""
		for _, c := range p.Codified {
			if c.Object != last {
				fmt.Fprintf(&b, "@@ %s @@\n", c.Object)
				last = c.Object
			}
			if c.Was != nil {
				fmt.Fprintf(&b, "- %s: %s\n", c.Path, value(c.Was))
			}
			fmt.Fprintf(&b, "+ %s: %s\n", c.Path, value(c.Value))
		}
		b.WriteString("```\n\n</details>\n\n")
	}
	if len(p.Adopted) > 0 {
		b.WriteString("### Created live, now added to Git\n\n")
		for _, a := range p.Adopted {
			by := a.Manager
			if a.Time != nil {
				by += " at " + a.Time.UTC().Format("2006-01-02 15:04 UTC")
			}
			fmt.Fprintf(&b, "- `%s` (created by %s) → `%s`\n", a.Object, by, a.File)
		}
		b.WriteString("\n")
	}
	if len(p.Manual) > 0 {
		b.WriteString("### Needs a manual edit\n\n")
		for _, m := range p.Manual {
			fmt.Fprintf(&b, "- `%s` `%s` is `%s` live: %s\n", m.Object, m.Path, value(m.Value), m.Reason)
		}
		b.WriteString("\n")
	}
	if len(p.Unmanaged) > 0 {
		b.WriteString("### Created live, not in Git\n\n")
		for _, m := range p.Unmanaged {
			fmt.Fprintf(&b, "- `%s`: %s\n", m.Object, m.Reason)
		}
		b.WriteString("\n")
	}
	if len(p.Secrets) > 0 {
		b.WriteString("### Secrets changed live (never written to Git)\n\n")
		for _, s := range p.Secrets {
			fmt.Fprintf(&b, "- `%s`: keys %s (values hidden)\n", s.Object, strings.Join(s.Keys, ", "))
		}
		b.WriteString("\n")
	}
	if len(p.Deleted) > 0 {
		b.WriteString("### In Git but deleted from the cluster (no file changed)\n\n")
		for _, d := range p.Deleted {
			fmt.Fprintf(&b, "- `%s`\n", d)
		}
		b.WriteString("\n")
	}
	switch {
	case report:
		b.WriteString("driftback keeps this issue up to date while the drift lasts and closes it when the cluster matches Git again. Make the change in Git, or revert it in the cluster; close this issue to stop reports of this same drift.\n")
	case len(p.Files) > 0:
		b.WriteString("**Merge** to make these changes part of Git. **Close** to leave Git as it is: the reconciler may then revert the cluster, and driftback will not propose this same drift again.\n")
	default:
		b.WriteString("Nothing here can be written to Git automatically: make the edits above by hand, or **close** this to leave Git as it is.\n")
	}
	return b.String()
}

func value(v any) string {
	if v == nil {
		return "(absent)"
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
