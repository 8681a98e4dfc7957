// Package hide keeps what came from a Secret out of everything driftback
// shows: objects built with a Secret's value hidden whole and named as Git
// writes them, Secret values redacted from any text, the stand-ins a chart
// is given in place of a Secret's value, and the fields rendered from them,
// which are compared Git against Git.
package hide

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

// AsWritten is the part of an object's identity that its Git source writes
// with a Secret's variable, as written (before postBuild substitution); ""
// for a part that uses none. It is what is shown of that part, so that no
// piece of the value shows in a name.
type AsWritten struct{ Namespace, Name string }

// Key identifies an object for hiding: kind and name, any
// namespace, so a defaulted namespace cannot make one slip through.
func Key(kind, name string) string { return kind + "\x00" + name }

// KeyIn identifies an object for hiding in its namespace: a chart's
// objects, placed when rendered, so that a look-alike of the same kind and
// name elsewhere in the target is not hidden with it. It also matches the
// object when the comparison finds its kind cluster-scoped (no namespace).
func KeyIn(kind, namespace, name string) string { return kind + "\x00" + namespace + "\x00" + name }

// lookup is what m holds for an object: by its namespace, as cluster-scoped
// in any namespace (KeyIn), or by kind and name (Key).
func lookup[V any](m map[string]V, kind, namespace, name string) (V, bool) {
	if v, ok := m[KeyIn(kind, namespace, name)]; ok {
		return v, true
	}
	if v, ok := m[Key(kind, name)]; ok {
		return v, true
	}
	var zero V
	if namespace != "" {
		return zero, false
	}
	prefix, suffix := kind+"\x00", "\x00"+name
	for k, v := range m {
		if strings.HasPrefix(k, prefix) && strings.HasSuffix(k, suffix) && strings.Count(k, "\x00") == 2 {
			return v, true
		}
	}
	return zero, false
}

// secretHidden stands for every value of an object that uses a Secret's
// variable.
const secretHidden = "(hidden: substituted from a Secret)"

// Substituted hides every value of the objects whose source uses a
// Secret's variable, and shows their identity as Git writes it: a name such
// as a-${TOKEN:0:6} would otherwise carry a piece of the value.
func Substituted(t *drift.Target, objects map[string]AsWritten) {
	if len(objects) == 0 {
		return
	}
	for _, list := range [][]drift.Change{t.Changes, t.Drift, t.PR, t.OutOfScope} {
		for i := range list {
			c := &list[i]
			w, ok := lookup(objects, c.Kind, c.Namespace, c.Name)
			if !ok {
				continue
			}
			if w.Name != "" {
				c.Name = w.Name
			}
			if w.Namespace != "" {
				c.Namespace = w.Namespace
			}
			for j := range c.Fields {
				f := &c.Fields[j]
				for _, v := range []*any{&f.Live, &f.Desired, &f.Base} {
					if *v != nil {
						*v = secretHidden
					}
				}
				f.Hidden = true
			}
			if c.Manifest != "" {
				c.Manifest = secretHidden
			}
		}
	}
	// What a removal deletes with it names objects too: those Git builds
	// with a Secret's variable are named as written.
	for _, list := range [][]drift.Change{t.Changes, t.Drift, t.PR, t.OutOfScope} {
		for i := range list {
			for j := range list[i].Danger {
				for k := range list[i].Danger[j].Lost {
					l := &list[i].Danger[j].Lost[k]
					if w, ok := lookup(objects, l.Kind, l.Namespace, l.Name); ok {
						if w.Name != "" {
							l.Name = w.Name
						}
						if w.Namespace != "" {
							l.Namespace = w.Namespace
						}
					}
				}
			}
		}
	}
}

// With is hidden with more values, longest first, so that a value
// that contains another is hidden whole.
func With(hidden, more []string) []string {
	if len(more) == 0 {
		return hidden
	}
	out := append(slices.Clone(hidden), more...)
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return slices.Compact(out)
}

// In replaces every hidden value in s.
func In(s string, hidden []string) string {
	for _, h := range hidden {
		if h != "" {
			s = strings.ReplaceAll(s, h, "(hidden)")
		}
	}
	return s
}

// Redact replaces every occurrence of the hidden values in the strings of
// v (a pointer), wherever they are: values substituted from Secrets are
// never shown.
func Redact(v any, hidden []string) {
	if len(hidden) == 0 {
		return
	}
	redactValue(reflect.ValueOf(v), hidden)
}

func redactValue(v reflect.Value, hidden []string) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			redactValue(v.Elem(), hidden)
		}
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		if e := v.Elem(); e.Kind() == reflect.String {
			if r := In(e.String(), hidden); r != e.String() && v.CanSet() {
				v.Set(reflect.ValueOf(r).Convert(e.Type()))
			}
			return
		}
		redactValue(v.Elem(), hidden)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			redactValue(v.Field(i), hidden)
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			redactValue(v.Index(i), hidden)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := v.MapIndex(k)
			if e.Kind() == reflect.String || (e.Kind() == reflect.Interface && !e.IsNil() && e.Elem().Kind() == reflect.String) {
				s := e.String()
				if e.Kind() == reflect.Interface {
					s = e.Elem().String()
				}
				if r := In(s, hidden); r != s {
					v.SetMapIndex(k, reflect.ValueOf(r).Convert(e.Type()))
				}
				continue
			}
			c := reflect.New(e.Type()).Elem()
			c.Set(e)
			redactValue(c, hidden)
			v.SetMapIndex(k, c)
		}
	case reflect.String:
		if v.CanSet() {
			if r := In(v.String(), hidden); r != v.String() {
				v.SetString(r)
			}
		}
	}
}

// standInStrings and standInNumbers are what a chart is given for a
// Secret's value, first and second: fixed and public, so that nothing
// rendered from them tells anything of the value but its type. The two
// strings differ in every character and in length, so that a slice, a
// case change or a length of them differs too; both are valid names.
var (
	standInStrings = [3]string{"", "xxxxxxxxxxxxxxxx", "yyyyyyyyyyyyyyyyyyyyyyyy"}
	standInNumbers = [3]float64{0, 1, 2}
)

// StandIn is a Secret's value with every scalar replaced by stand-in
// n, keeping its shape: a values document stays one with its keys (as a
// Secret's keys are shown), a number stays a number, a boolean a boolean.
func StandIn(v []byte, n int) []byte {
	var doc any
	if err := yaml.Unmarshal(v, &doc); err == nil {
		switch doc.(type) {
		case map[string]any, []any:
			if b, err := yaml.Marshal(standInLeaves(doc, n)); err == nil {
				return b
			}
		}
	}
	s := strings.TrimSpace(string(v))
	switch {
	case s == "true" || s == "false":
		return []byte(strconv.FormatBool(n == 2))
	case isNumber(s):
		return []byte(strconv.FormatFloat(standInNumbers[n], 'f', -1, 64))
	}
	return []byte(standInStrings[n])
}

// StandInVariable is what a Secret's postBuild variable is substituted
// with in what a chart is given: stand-in n of the value's type.
func StandInVariable(v string, n int) string {
	switch s := strings.TrimSpace(v); {
	case s == "true" || s == "false":
		return strconv.FormatBool(n == 2)
	case isNumber(s):
		return strconv.FormatFloat(standInNumbers[n], 'f', -1, 64)
	}
	return standInStrings[n]
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil && s != "" && !strings.ContainsAny(s, "xXnN") // no hex, NaN or Inf
}

func standInLeaves(v any, n int) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = standInLeaves(e, n)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = standInLeaves(e, n)
		}
		return out
	case string:
		return standInStrings[n]
	case float64, int64, int, uint64:
		return standInNumbers[n]
	case bool:
		return n == 2
	case nil:
		return nil
	}
	return standInStrings[n]
}

// DifferingFields are the fields in which a chart's object rendered with
// the first stand-ins differs from the same object rendered with the
// second: the fields that take a Secret's value in the cluster. All of
// the object's own fields when they cannot be told apart.
func DifferingFields(a, b *unstructured.Unstructured) []fieldpath.Path {
	typed, err := object.Typed([]*unstructured.Unstructured{a, b})
	if err != nil {
		return WholeObject(a)
	}
	fields, err := object.FieldDiff(object.BuiltinTypeConverter(), typed[0], typed[1], nil)
	if err != nil || len(fields) == 0 {
		return WholeObject(a)
	}
	out := make([]fieldpath.Path, len(fields))
	for i, f := range fields {
		out[i] = f.FieldPath()
	}
	return out
}

// WholeObject are every field of o but its identity and status: what is
// compared Git against Git when the fields that take a Secret's value are
// not known.
func WholeObject(o *unstructured.Unstructured) []fieldpath.Path {
	keys := make([]string, 0, len(o.Object))
	for k := range o.Object {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
		default:
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := []fieldpath.Path{fieldpath.MakePathOrDie("metadata", "labels"), fieldpath.MakePathOrDie("metadata", "annotations")}
	for _, k := range keys {
		out = append(out, fieldpath.MakePathOrDie(k))
	}
	return out
}

// GitOnlyFields is the comparison's drift.Options.GitOnly for a build's
// GitOnly: the fields of an object that take a Secret's value in the
// cluster, compared Git against Git. nil when there are none.
func GitOnlyFields(gitOnly map[string][]fieldpath.Path) func(*unstructured.Unstructured) []fieldpath.Path {
	if len(gitOnly) == 0 {
		return nil
	}
	return func(o *unstructured.Unstructured) []fieldpath.Path {
		paths, _ := lookup(gitOnly, o.GetKind(), o.GetNamespace(), o.GetName())
		return paths
	}
}

// MinLength is the shortest Secret value searched for in what is shown;
// shorter ones would blank unrelated text. Objects built from a Secret's
// value are hidden whole whatever its length.
const MinLength = 4

// Forms are the texts of a Secret's value v that are redacted wherever
// they would be shown: v, its base64 encodings, and each scalar of it when
// it is a values document; none shorter than MinLength.
func Forms(v string) []string {
	var out []string
	add := func(s string) {
		if len(s) >= MinLength {
			out = append(out, s, base64.StdEncoding.EncodeToString([]byte(s)), base64.RawStdEncoding.EncodeToString([]byte(s)))
		}
	}
	add(v)
	var doc any
	if yaml.Unmarshal([]byte(v), &doc) == nil {
		walkLeaves(doc, add)
	}
	return out
}

// walkLeaves calls f with every scalar of v, as text.
func walkLeaves(v any, f func(string)) {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			walkLeaves(e, f)
		}
	case []any:
		for _, e := range x {
			walkLeaves(e, f)
		}
	case string:
		f(x)
	case nil:
	default:
		f(fmt.Sprint(x))
	}
}
