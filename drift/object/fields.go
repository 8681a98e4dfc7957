package object

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// Field is one field a change touches.
type Field struct {
	// Path names the field with list items by their keys, as server-side
	// apply does: .spec.template.spec.containers[name="web"].image
	Path string `json:"path"`
	// Live is the value in the cluster (or at base, for a change in Git); nil
	// when the field is absent, "(hidden)" for a Secret value.
	Live any `json:"live"`
	// Desired is the value after the change; nil when the field is removed,
	// "(hidden)" for a Secret value.
	Desired any `json:"desired"`
	// Manager is the live field manager that owns the live value.
	Manager string `json:"manager,omitempty"`
	// Operation is how Manager wrote it: Apply or Update.
	Operation string `json:"operation,omitempty"`
	// Subresource is set when Manager wrote through one, such as "scale".
	Subresource string `json:"subresource,omitempty"`
	// Time is when Manager last wrote the object.
	Time *time.Time `json:"time,omitempty"`
	// OverwritesDrift marks a field that has drifted from Git live and that
	// this change would revert: a live change the pull request overwrites.
	OverwritesDrift bool `json:"overwritesDrift,omitempty"`
	// Kind says what the field's change is to the pull request; set on the
	// live impact's fields, and "pr" on the Git change's.
	Kind FieldKind `json:"kind,omitempty"`
	// Base is the value in the base render (Git before the pull request),
	// on the live impact's fields; nil when absent there.
	Base any `json:"base,omitempty"`
	// Hidden marks a Secret value: the change is real, its values are not shown.
	Hidden bool `json:"hidden,omitempty"`
	// Autoscaler names the HorizontalPodAutoscaler or KEDA ScaledObject that
	// owns this replicas field, with its bounds; such a field is never
	// codified into Git.
	Autoscaler string `json:"autoscaler,omitempty"`
	// By is the person who made the live value, as the cluster's audit
	// log says (drift/audit); nil when no event matched: Manager stays,
	// unattributed.
	By *Person `json:"by,omitempty"`

	path fieldpath.Path
}

// Person is who made a live change, as the cluster's audit log says.
type Person struct {
	// User is the cluster's name for them ("alice@example.com"), the
	// impersonated user when someone acted as another (as a proxy that
	// logs people in does).
	User   string   `json:"user"`
	Groups []string `json:"groups,omitempty"`
	// ImpersonatedBy is who acted as User, when someone did: the user
	// the apiserver authenticated.
	ImpersonatedBy string `json:"impersonatedBy,omitempty"`
	// Client is the program ("kubectl"), from the request's user agent.
	Client string `json:"client,omitempty"`
	// Verb is the request's: create, update, patch.
	Verb string    `json:"verb"`
	Time time.Time `json:"time"`
	// Login is their GitHub login, as app.yml maps cluster identities;
	// empty when none is mapped.
	Login string `json:"login,omitempty"`
}

// String says who made a change and with what: "alice@example.com with
// kubectl", "alice@example.com (impersonated by proxy) with kubectl". It is
// the cluster's text: escape it for where it goes.
func (p *Person) String() string {
	s := p.User
	if p.ImpersonatedBy != "" {
		s += " (impersonated by " + p.ImpersonatedBy + ")"
	}
	if p.Client != "" {
		s += " with " + p.Client
	}
	return s
}

// FieldKind is what a changed field is to a pull request.
type FieldKind string

// Field kinds.
const (
	// FieldPR is changed by the pull request, and the live value is Git's.
	FieldPR FieldKind = "pr"
	// FieldOverwrites is changed by the pull request over a live change a
	// person made (the live owner is not the applier nor an ignored
	// controller): a sync replaces that person's value.
	FieldOverwrites FieldKind = "overwrites"
	// FieldCodifies is set by the pull request to the value a person set
	// live: a sync changes nothing there.
	FieldCodifies FieldKind = "codifies"
	// FieldDrift differs live from Git before and after the pull request
	// alike: drift the pull request leaves as it is.
	FieldDrift FieldKind = "drift"
)

// FieldPath returns the structured path of the field, with list items by key.
func (f Field) FieldPath() fieldpath.Path { return f.path }

// ValueAt returns the value at p in an unstructured object, or nil.
func ValueAt(obj map[string]any, p fieldpath.Path) any { return valueAt(obj, p) }

// allowDuplicates lets objects with duplicate list keys (which the server
// accepts for some built-in lists) be compared instead of failing.
var allowDuplicates = []typed.ValidationOptions{typed.AllowDuplicates}

// ignoredPaths are server-populated or bookkeeping fields that never count as
// changes.
var ignoredPaths = []fieldpath.Path{
	fieldpath.MakePathOrDie("status"),
	fieldpath.MakePathOrDie("metadata", "managedFields"),
	fieldpath.MakePathOrDie("metadata", "resourceVersion"),
	fieldpath.MakePathOrDie("metadata", "uid"),
	fieldpath.MakePathOrDie("metadata", "generation"),
	fieldpath.MakePathOrDie("metadata", "creationTimestamp"),
	fieldpath.MakePathOrDie("metadata", "selfLink"),
	fieldpath.MakePathOrDie("metadata", "deletionTimestamp"),
	fieldpath.MakePathOrDie("metadata", "deletionGracePeriodSeconds"),
	fieldpath.MakePathOrDie("metadata", "annotations", "kubectl.kubernetes.io/last-applied-configuration"),
	fieldpath.MakePathOrDie("metadata", "annotations", "deployment.kubernetes.io/revision"),
}

func ignored(p fieldpath.Path) bool {
	for _, ig := range ignoredPaths {
		if HasPrefix(p, ig) {
			return true
		}
	}
	return false
}

func HasPrefix(p, prefix fieldpath.Path) bool {
	if len(p) < len(prefix) {
		return false
	}
	for i := range prefix {
		if !p[i].Equals(prefix[i]) {
			return false
		}
	}
	return true
}

// stripped returns a copy without the fields that never count, for comparing.
func stripped(u *unstructured.Unstructured) *unstructured.Unstructured {
	c := u.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "status")
	for _, f := range []string{"managedFields", "resourceVersion", "uid", "generation", "creationTimestamp", "selfLink"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	if a := c.GetAnnotations(); a != nil {
		delete(a, "kubectl.kubernetes.io/last-applied-configuration")
		if len(a) == 0 {
			a = nil
		}
		c.SetAnnotations(a)
	}
	return c
}

// FieldDiff lists the fields that differ from before to after. With only set,
// an added or modified field counts only when set contains it (the fields the
// desired object sets); removed fields always count. Children of an added or
// removed parent are folded into the parent.
func FieldDiff(tc managedfields.TypeConverter, before, after *unstructured.Unstructured, only *fieldpath.Set) ([]Field, error) {
	b, a := stripped(before), stripped(after)
	btv, err := tc.ObjectToTyped(b, allowDuplicates...)
	if err != nil {
		return nil, err
	}
	atv, err := tc.ObjectToTyped(a, allowDuplicates...)
	if err != nil {
		return nil, err
	}
	cmp, err := btv.Compare(atv)
	if err != nil {
		return nil, err
	}
	var out []Field
	add := func(set *fieldpath.Set, filter bool) {
		var paths []fieldpath.Path
		set.Iterate(func(p fieldpath.Path) {
			if ignored(p) || (filter && only != nil && !only.Has(p)) {
				return
			}
			paths = append(paths, p.Copy())
		})
		for _, p := range topmost(paths) {
			out = append(out, Field{Path: p.String(), Live: valueAt(b.Object, p), Desired: valueAt(a.Object, p), path: p})
		}
	}
	add(cmp.Modified, true)
	add(cmp.Added, true)
	add(cmp.Removed, false)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// topmost drops paths that lie under another path of the list.
func topmost(paths []fieldpath.Path) []fieldpath.Path {
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) < len(paths[j]) })
	var out []fieldpath.Path
	for _, p := range paths {
		under := false
		for _, q := range out {
			if HasPrefix(p, q) {
				under = true
				break
			}
		}
		if !under {
			out = append(out, p)
		}
	}
	return out
}

// FieldSet returns the fields an object sets.
func FieldSet(tc managedfields.TypeConverter, u *unstructured.Unstructured) (*fieldpath.Set, error) {
	tv, err := tc.ObjectToTyped(stripped(u), allowDuplicates...)
	if err != nil {
		return nil, err
	}
	return tv.ToFieldSet()
}

// valueAt returns the value at p in an unstructured object, or nil.
func valueAt(obj any, p fieldpath.Path) any {
	cur := obj
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = m[*pe.FieldName]
		case pe.Key != nil:
			l, ok := cur.([]any)
			if !ok {
				return nil
			}
			cur = keyedItem(l, *pe.Key)
		case pe.Value != nil:
			l, ok := cur.([]any)
			if !ok {
				return nil
			}
			want := fmt.Sprint((*pe.Value).Unstructured())
			cur = nil
			for _, item := range l {
				if fmt.Sprint(item) == want {
					cur = item
					break
				}
			}
		case pe.Index != nil:
			l, ok := cur.([]any)
			if !ok || *pe.Index >= len(l) {
				return nil
			}
			cur = l[*pe.Index]
		}
		if cur == nil {
			return nil
		}
	}
	return cur
}

func matchesKey(m map[string]any, key value.FieldList) bool {
	for _, f := range key {
		if fmt.Sprint(m[f.Name]) != fmt.Sprint(f.Value.Unstructured()) {
			return false
		}
	}
	return true
}

// keyedItem finds a list item by its key. A key field the item does not
// write takes its schema default in the key (a port's protocol is "TCP"
// whether Git writes it or not): when no item matches the key whole, the one
// item whose written key fields match is it.
func keyedItem(l []any, key value.FieldList) any {
	var loose []any
	for _, item := range l {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		if matchesKey(m, key) {
			return item
		}
		match := true
		for _, f := range key {
			if v, set := m[f.Name]; set && fmt.Sprint(v) != fmt.Sprint(f.Value.Unstructured()) {
				match = false
			}
		}
		if match {
			loose = append(loose, item)
		}
	}
	if len(loose) == 1 {
		return loose[0]
	}
	return nil
}

// owner is one live field manager with the fields it owns.
type owner struct {
	entry metav1.ManagedFieldsEntry
	set   *fieldpath.Set
}

func owners(u *unstructured.Unstructured) []owner {
	var out []owner
	for _, e := range u.GetManagedFields() {
		if e.FieldsV1 == nil {
			continue
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			continue // a malformed entry owns nothing we can name
		}
		out = append(out, owner{entry: e, set: s})
	}
	return out
}

// attribute names the live manager of each field: the one whose field set
// holds the path itself; failing that, one that owns something under it (an
// added or removed subtree); failing that, one that owns a parent (an atomic
// value). Among several, the latest writer.
func attribute(fields []Field, os []owner) {
	tiers := []func(*fieldpath.Set, fieldpath.Path) bool{ownsExactly, OwnsUnder, ownsParent}
	for i := range fields {
		p := fields[i].path
		var best *owner
		for _, owns := range tiers {
			for j := range os {
				o := &os[j]
				if owns(o.set, p) && (best == nil || later(o.entry, best.entry)) {
					best = o
				}
			}
			if best != nil {
				break
			}
		}
		if best != nil {
			fields[i].Manager = best.entry.Manager
			fields[i].Operation = string(best.entry.Operation)
			fields[i].Subresource = best.entry.Subresource
			if best.entry.Time != nil {
				t := best.entry.Time.UTC()
				fields[i].Time = &t
			}
		}
	}
}

func ownsExactly(s *fieldpath.Set, p fieldpath.Path) bool { return s.Has(p) }

func OwnsUnder(s *fieldpath.Set, p fieldpath.Path) bool {
	under := s
	for _, pe := range p {
		under = under.WithPrefix(pe)
	}
	return !under.Empty()
}

func ownsParent(s *fieldpath.Set, p fieldpath.Path) bool {
	for i := len(p) - 1; i > 0; i-- {
		if s.Has(p[:i]) {
			return true
		}
	}
	return false
}

func later(a, b metav1.ManagedFieldsEntry) bool {
	if a.Time == nil {
		return false
	}
	if b.Time == nil {
		return true
	}
	return a.Time.After(b.Time.Time)
}

// pointer renders a field path as a JSON-pointer-like string for ignore rules:
// /spec/template/spec/containers/name=web/image.
func pointer(p fieldpath.Path) string {
	var b strings.Builder
	for _, pe := range p {
		b.WriteByte('/')
		switch {
		case pe.FieldName != nil:
			b.WriteString(*pe.FieldName)
		case pe.Key != nil:
			var parts []string
			for _, f := range *pe.Key {
				parts = append(parts, f.Name+"="+fmt.Sprint(f.Value.Unstructured()))
			}
			b.WriteString(strings.Join(parts, ","))
		case pe.Value != nil:
			b.WriteString(fmt.Sprint((*pe.Value).Unstructured()))
		case pe.Index != nil:
			fmt.Fprint(&b, *pe.Index)
		}
	}
	return b.String()
}

// AttributeFields names the live manager of each field of a change to live.
func AttributeFields(fields []Field, live *unstructured.Unstructured) {
	attribute(fields, owners(live))
}

// WithFieldPath returns f at the structured path p.
func (f Field) WithFieldPath(p fieldpath.Path) Field {
	f.path = p
	return f
}

// Attribute returns f as it stands on a live object now: its live value and
// the manager that set it. The drift loop follows a field it once saw in
// drift this way, to see who holds it after someone changed it again.
func Attribute(live *unstructured.Unstructured, f Field) Field {
	out := f
	out.Manager, out.Operation, out.Subresource, out.Time = "", "", "", nil
	fs := []Field{out}
	attribute(fs, owners(live))
	out = fs[0]
	out.Live = valueAt(live.Object, f.path)
	return out
}
