package report

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/driftback/driftback/drift"
)

// A change to a base that many overlays share (one per tenant, region or
// cluster) makes the same change in each of them. The comment tells it
// once: the targets whose changes read the same, namespaces aside, are one
// group, shown by its first target with the others listed, collapsed.

// targetGroups maps each target to the first target of its group, and
// counts each group's targets. A target alone is its own group of one.
type targetGroups struct {
	first   []int         // by target: its group's first target
	members map[int][]int // by a group's first target: all its targets, in order
}

// groupTargets groups the report's targets by what their sections say.
func groupTargets(r *drift.Report) targetGroups {
	g := targetGroups{first: make([]int, len(r.Targets)), members: map[int][]int{}}
	seen := map[string]int{}
	for i, t := range r.Targets {
		key, ok := sameAs(t)
		if f, found := seen[key]; ok && found {
			g.first[i] = f
			g.members[f] = append(g.members[f], i)
			continue
		}
		if ok {
			seen[key] = i
		}
		g.first[i] = i
		g.members[i] = []int{i}
	}
	return g
}

// grouped says whether target i is shown by another target of its group.
func (g targetGroups) grouped(i int) bool { return g.first[i] != i }

// others counts the targets that target i, first of its group, stands for.
func (g targetGroups) others(i int) int { return len(g.members[i]) - 1 }

// metadataNamespace finds a manifest's own namespace (drift writes
// metadata's fields two spaces in); a namespace anywhere else (a binding's
// subject, an Application's destination) is content, read as it is.
var metadataNamespace = regexp.MustCompile(`(?m)^(  namespace: )(\S+)$`)

// sameAs is a key for what t's section says, with each namespace replaced
// by its order of appearance in t: two tenants' overlays that change the
// same object in their own namespace have the same key. ok is false for a
// target that is never grouped (not compared, or with errors: each says
// why on its own).
func sameAs(t drift.Target) (string, bool) {
	if t.NotCompared != "" || len(t.Errors) > 0 {
		return "", false
	}
	// The namespaces are the objects' own, in order of appearance.
	names := map[string]string{}
	for _, cs := range [][]drift.Change{t.Changes, t.Drift, t.PR, t.OutOfScope, t.Unread} {
		for _, c := range cs {
			if n := c.Namespace; n != "" && names[n] == "" {
				names[n] = fmt.Sprintf("\x00ns%d", len(names))
			}
		}
	}
	ns := func(n string) string {
		if k, ok := names[n]; ok {
			return k
		}
		return n // not an object's namespace: content, as it is
	}
	norm := func(cs []drift.Change) []drift.Change {
		out := make([]drift.Change, len(cs))
		for i, c := range cs {
			c.Namespace = ns(c.Namespace)
			c.Manifest = metadataNamespace.ReplaceAllStringFunc(c.Manifest, func(l string) string {
				m := metadataNamespace.FindStringSubmatch(l)
				return m[1] + ns(m[2])
			})
			var dangers []drift.Danger
			for _, d := range c.Danger {
				lost := make([]drift.Lost, len(d.Lost))
				for j, l := range d.Lost {
					l.Namespace = ns(l.Namespace)
					lost[j] = l
				}
				d.Lost = lost
				dangers = append(dangers, d)
			}
			c.Danger = dangers
			out[i] = c
		}
		return out
	}
	b, err := json.Marshal(struct {
		Changes, Drift, PR, OutOfScope, Unread []drift.Change
		LiveError                              string
		LiveNotAsked                           bool
		Reverts, Notes                         []string
	}{norm(t.Changes), norm(t.Drift), norm(t.PR), norm(t.OutOfScope), norm(t.Unread), t.LiveError, t.LiveNotAsked, t.Reverts, t.Notes})
	if err != nil {
		return "", false
	}
	return string(b), true
}

// namespacesDiffer says whether a group's targets name different
// namespaces: then its first target's section shows its own.
func namespacesDiffer(r *drift.Report, members []int) bool {
	first := namespacesOf(r.Targets[members[0]])
	for _, i := range members[1:] {
		if namespacesOf(r.Targets[i]) != first {
			return true
		}
	}
	return false
}

func namespacesOf(t drift.Target) string {
	var ns []string
	for _, c := range t.Told() {
		ns = append(ns, c.Namespace)
	}
	return strings.Join(ns, "\x00")
}

// groupTitle names a target and, first of a group, how many it stands for.
func groupTitle(t drift.Target, others int) string {
	if others == 0 {
		return targetTitle(t)
	}
	if len(t.Told()) == 0 && t.NotCompared == "" {
		return fmt.Sprintf("%s and %s, none changed", targetTitle(t), plural(others, "more target"))
	}
	return fmt.Sprintf("%s and %s with the same changes", targetTitle(t), plural(others, "more target"))
}

// groupList lists a group's targets, collapsed.
func groupList(r *drift.Report, members []int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<details><summary>The %d targets</summary>\n\n", len(members))
	for _, i := range members {
		b.WriteString("- " + targetTitle(r.Targets[i]) + "\n")
	}
	b.WriteString("\n</details>\n\n")
	return b.String()
}

// failingTargets are targets whose checks fail on the same dangers, with
// the same label to accept them.
type failingTargets struct {
	Failing
	targets []string
}

// failingAlike joins the failing targets that fail alike, in order: a
// group's targets fail on the same dangers.
func failingAlike(failing []Failing) []failingTargets {
	var out []failingTargets
	at := map[string]int{}
	for _, f := range failing {
		key := strings.Join(f.Reasons, "\x00") + "\x00" + f.AckLabel
		if i, ok := at[key]; ok {
			out[i].targets = append(out[i].targets, f.Target)
			continue
		}
		at[key] = len(out)
		out = append(out, failingTargets{Failing: f, targets: []string{f.Target}})
	}
	return out
}

// namesList names targets as code, the first three and how many more:
// "`a`, `b`, `c` and 297 more targets".
func namesList(names []string) string {
	const shown = 3
	var quoted []string
	for _, n := range names[:min(len(names), shown)] {
		quoted = append(quoted, code(n))
	}
	switch {
	case len(names) > shown:
		return strings.Join(quoted, ", ") + " and " + plural(len(names)-shown, "more target")
	case len(quoted) > 1:
		return strings.Join(quoted[:len(quoted)-1], ", ") + " and " + quoted[len(quoted)-1]
	}
	return quoted[0]
}
