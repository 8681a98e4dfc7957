package drift

import (
	"sort"
	"strings"

	"github.com/driftback/driftback/drift/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// tell makes the live impact the one story of each object: every field is
// tagged with what it is to the pull request (its own change, a live change
// it overwrites or codifies, drift it leaves), the fields it codifies are
// added (a sync changes nothing there, yet the pull request writes a
// person's live change into Git), and created and deleted objects carry
// their rendered manifest.
func (c *comparer) tell(base, head []*unstructured.Unstructured, liveObjs map[string]*unstructured.Unstructured) {
	byPath := func(changes []Change) map[string]map[string]object.Field {
		out := map[string]map[string]object.Field{}
		for _, ch := range changes {
			m := map[string]object.Field{}
			for _, f := range ch.Fields {
				m[f.Path] = f
			}
			out[ch.Ref().Key()] = m
		}
		return out
	}
	prActions := map[string]Action{}
	for _, ch := range c.t.PR {
		prActions[ch.Ref().Key()] = ch.Action
	}
	prFields, driftFields := byPath(c.t.PR), byPath(c.t.Drift)
	baseIdx, headIdx := index(base), index(head)
	for i := range c.t.Changes {
		ch := &c.t.Changes[i]
		key := ch.Ref().Key()
		switch ch.Action {
		case ActionCreate:
			ch.Manifest = manifestOf(headIdx[key])
			continue
		case ActionDelete, ActionKeep:
			ch.Manifest = manifestOf(baseIdx[key])
			ch.Why = leaves(ch.Ref(), baseIdx[key] != nil, head, baseIdx)
			continue
		}
		l := liveObjs[key]
		if l == nil {
			continue
		}
		applier := c.applierOf(l)
		person := func(f object.Field) bool {
			return f.Manager != "" && f.Manager != applier && !object.ManagerMatches(c.opts.IgnoreManagers, f.Manager)
		}
		newInGit := prActions[key] == ActionCreate
		seen := map[string]bool{}
		ch.OverwritesDrift = false
		for j := range ch.Fields {
			f := &ch.Fields[j]
			seen[f.Path] = true
			if b := baseIdx[key]; b != nil && f.FieldPath() != nil {
				f.Base = object.ValueAt(b.Object, f.FieldPath())
				if f.Hidden {
					f.Base = hidden(f.Base)
				}
			}
			_, inPR := prFields[key][f.Path]
			_, drifted := driftFields[key][f.Path]
			switch {
			case (inPR || newInGit) && (drifted || newInGit) && person(*f):
				f.Kind, f.OverwritesDrift, ch.OverwritesDrift = object.FieldOverwrites, true, true
			case inPR || newInGit:
				f.Kind, f.OverwritesDrift = object.FieldPR, false
			default:
				f.Kind, f.OverwritesDrift = object.FieldDrift, false
			}
		}
		for path, pf := range prFields[key] {
			df, drifted := driftFields[key][path]
			if seen[path] || !drifted || !person(df) {
				continue
			}
			ch.Fields = append(ch.Fields, object.Field{Path: path, Live: df.Live, Desired: pf.Desired, Base: pf.Live, Kind: object.FieldCodifies,
				Manager: df.Manager, Operation: df.Operation, Subresource: df.Subresource, Time: df.Time, Hidden: pf.Hidden}.WithFieldPath(pf.FieldPath()))
		}
		sort.SliceStable(ch.Fields, func(a, b int) bool { return ch.Fields[a].Path < ch.Fields[b].Path })
	}
}

// tellGit tags the Git change's fields and gives its created and deleted
// objects their rendered manifest.
func (c *comparer) tellGit(base, head []*unstructured.Unstructured) {
	baseIdx, headIdx := index(base), index(head)
	for i := range c.t.PR {
		ch := &c.t.PR[i]
		for j := range ch.Fields {
			// Live is the base's value here: Git before the pull request.
			ch.Fields[j].Kind, ch.Fields[j].Base = object.FieldPR, ch.Fields[j].Live
		}
		switch ch.Action {
		case ActionCreate:
			ch.Manifest = manifestOf(headIdx[ch.Ref().Key()])
		case ActionDelete:
			ch.Manifest = manifestOf(baseIdx[ch.Ref().Key()])
			ch.Why = leaves(ch.Ref(), true, head, baseIdx)
		}
	}
}

// leaves says why an object of the base render (indexed in base), or one a
// sync applied before and tracks, is not in the head render.
func leaves(ref object.Ref, inBase bool, head []*unstructured.Unstructured, base map[string]*unstructured.Unstructured) string {
	// Only an object new at head takes another's place: one the base had
	// already (the same Role in another team's namespace) is not its
	// successor.
	var added []*unstructured.Unstructured
	for _, h := range head {
		if base[object.RefOf(h).Key()] == nil {
			added = append(added, h)
		}
	}
	switch o, how := object.Successor(ref, added); how {
	case object.MovedNamespace:
		return "moves to namespace " + o.GetNamespace() + ": the object there is new, and this one is pruned"
	case object.Regenerated:
		return "replaced by " + o.GetName() + ": a generated name changes with its content"
	}
	switch {
	case !inBase:
		return "still live from an earlier sync, and in neither the base nor the head render"
	case len(head) == 0:
		return WhyNothingRendered
	}
	return WhyNotRendered
}

// The reasons of an object that leaves the render without a successor;
// render/removal names the change of Git that removes it, where it finds
// one.
const (
	WhyNotRendered     = "the head no longer renders it"
	WhyNothingRendered = "the overlay renders nothing at head"
)

// MaxManifest is how much of a created or deleted object's rendered YAML a
// report carries; the rest is cut with a note.
const MaxManifest = 4000

// manifestOf renders an object as YAML for a report: Secret values hidden,
// cut at MaxManifest at a line's end.
func manifestOf(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	u = u.DeepCopy()
	unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(u.Object, "status")
	if isSecret(u) {
		for _, field := range []string{"data", "stringData"} {
			m, ok := u.Object[field].(map[string]any)
			if !ok {
				continue
			}
			for k := range m {
				m[k] = hiddenValue
			}
		}
	}
	b, err := yaml.Marshal(u.Object)
	if err != nil {
		return ""
	}
	s := string(b)
	if len(s) <= MaxManifest {
		return s
	}
	cut := strings.LastIndexByte(s[:MaxManifest], '\n') + 1
	return s[:cut] + "# … cut at 4,000 characters: the whole object is in the repository\n"
}
