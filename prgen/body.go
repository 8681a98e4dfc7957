package prgen

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Markdown describes a plan for a person: what changed live, on which object,
// by whom and when, where it is written in Git, what needs a manual edit, and
// how to accept or reject it.
func Markdown(p *Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Drift in `%s`\n\n", p.Overlay)
	if p.Empty() {
		b.WriteString("The cluster matches Git: nothing to codify.\n")
		return b.String()
	}
	b.WriteString("These changes were made in the cluster outside Git and are still there.\n\n")
	if len(p.Codified) > 0 {
		b.WriteString("| object | field | live value | changed by | written to |\n|---|---|---|---|---|\n")
		for _, c := range p.Codified {
			by := c.Manager
			if c.Time != nil {
				by += " at " + c.Time.UTC().Format("2006-01-02 15:04 UTC")
			}
			fmt.Fprintf(&b, "| `%s` | `%s` | `%s` | %s | `%s` (%s) |\n", c.Object, c.Path, value(c.Value), by, c.File, c.Strategy)
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
	if len(p.Files) > 0 {
		b.WriteString("**Merge** to make these changes part of Git; **close** to leave Git as it is (the reconciler may then revert the cluster).\n")
	}
	return b.String()
}

func value(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
