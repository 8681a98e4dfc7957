package valuediff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// A string that holds a JSON or YAML document (a settings file in a
// ConfigMap, a dashboard, an embedded manifest) is compared as the document
// it holds: the paths that changed, each with its two values, as dyff shows
// YAML. A one-key change inside a 6,000-character JSON line reads as one
// path, not as two escaped strings.

// maxDocPaths bounds the paths a document diff lists; the rest are counted.
const maxDocPaths = 40

// MaxValueText bounds a value shown inline: a longer one is cut with a note.
const MaxValueText = 240

// A value is read as a document only within bounds: its size, and how
// deep its brackets nest (a value from a pull request is hostile; the
// parsers recurse).
const (
	maxDocument = 256 << 10
	maxNesting  = 100
)

// nesting is how deep s's brackets nest, quotes aside roughly: a bound, not
// a parse.
func nesting(s string) int {
	depth, deepest := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[', '{':
			depth++
			deepest = max(deepest, depth)
		case ']', '}':
			depth = max(0, depth-1)
		}
	}
	return deepest
}

// docChange is one changed path of a document.
type docChange struct {
	path     string
	from, to any
	// absent marks a side where the path does not exist.
	fromAbsent, toAbsent bool
}

// docDiff compares two strings as the documents they hold, when both do
// (and at least one is not empty): the format's name ("JSON", "YAML") and
// the changed paths, in the order of their keys. ok is false when either is not a
// structured document, or when they hold the same document (only comments
// or formatting changed): then a line diff says it better.
func docDiff(from, to any) (format string, changes []docChange, ok bool) {
	a, aok := from.(string)
	b, bok := to.(string)
	if !aok || !bok {
		return "", nil, false
	}
	fa, da, okA := parseDocument(a)
	fb, db, okB := parseDocument(b)
	if !okA || !okB || fa != fb {
		return "", nil, false
	}
	walkDoc("", da, db, &changes)
	if len(changes) == 0 {
		return "", nil, false
	}
	return fa, changes, true
}

// parseDocument reads s as a JSON document (an object or an array), or as
// a YAML one of more than one line whose root is a mapping or a sequence.
// A plain text (a script, a properties file, nginx's configuration) is not
// a document.
func parseDocument(s string) (string, any, bool) {
	t := strings.TrimSpace(s)
	if t == "" || len(t) > maxDocument || nesting(t) > maxNesting {
		return "", nil, false // read as text: a line diff
	}
	if t[0] == '{' || t[0] == '[' {
		dec := json.NewDecoder(strings.NewReader(t))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err == nil && !dec.More() {
			return "JSON", v, true
		}
	}
	if !strings.Contains(t, "\n") {
		return "", nil, false
	}
	var v any
	// sigs.k8s.io/yaml reads YAML as JSON does: maps of strings, with
	// json.Number kept exact through UseNumber's equivalent below.
	j, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		return "", nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", nil, false
	}
	switch v.(type) {
	case map[string]any, []any:
		return "YAML", v, true
	}
	return "", nil, false
}

// walkDoc appends the changes between a and b below path.
func walkDoc(path string, a, b any, out *[]docChange) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(x)+len(y))
		for k := range x {
			keys = append(keys, k)
		}
		for k := range y {
			if _, seen := x[k]; !seen {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := docKey(path, k)
			xv, inX := x[k]
			yv, inY := y[k]
			switch {
			case !inX:
				*out = append(*out, docChange{path: p, to: yv, fromAbsent: true})
			case !inY:
				*out = append(*out, docChange{path: p, from: xv, toAbsent: true})
			default:
				walkDoc(p, xv, yv, out)
			}
		}
		return
	case []any:
		y, ok := b.([]any)
		if !ok {
			break
		}
		if walkNamed(path, x, y, out) {
			return
		}
		for i := 0; i < max(len(x), len(y)); i++ {
			p := path + "[" + strconv.Itoa(i) + "]"
			switch {
			case i >= len(x):
				*out = append(*out, docChange{path: p, to: y[i], fromAbsent: true})
			case i >= len(y):
				*out = append(*out, docChange{path: p, from: x[i], toAbsent: true})
			default:
				walkDoc(p, x[i], y[i], out)
			}
		}
		return
	}
	if !docEqual(a, b) {
		*out = append(*out, docChange{path: path, from: a, to: b})
	}
}

// walkNamed compares two lists of objects that each carry a distinct
// "name" (containers, ports, servers) item by name, as Kubernetes merges
// them, rather than by position: an item inserted first does not read as
// every item changed.
func walkNamed(path string, x, y []any, out *[]docChange) bool {
	names := func(l []any) ([]string, map[string]any, bool) {
		order := make([]string, 0, len(l))
		by := make(map[string]any, len(l))
		for _, it := range l {
			m, ok := it.(map[string]any)
			if !ok {
				return nil, nil, false
			}
			n, ok := m["name"].(string)
			if !ok {
				return nil, nil, false
			}
			if _, dup := by[n]; dup {
				return nil, nil, false
			}
			order = append(order, n)
			by[n] = it
		}
		return order, by, true
	}
	xo, xm, okX := names(x)
	yo, ym, okY := names(y)
	if !okX || !okY || len(x)+len(y) == 0 {
		return false
	}
	for _, n := range xo {
		p := path + "[name=" + strconv.Quote(n) + "]"
		if yv, ok := ym[n]; ok {
			walkDoc(p, xm[n], yv, out)
		} else {
			*out = append(*out, docChange{path: p, from: xm[n], toAbsent: true})
		}
	}
	for _, n := range yo {
		if _, ok := xm[n]; !ok {
			*out = append(*out, docChange{path: path + "[name=" + strconv.Quote(n) + "]", to: ym[n], fromAbsent: true})
		}
	}
	return true
}

// docKey extends a dotted path by a key, quoting a key that a dot or a
// bracket would make ambiguous.
func docKey(path, k string) string {
	if k == "" || strings.ContainsAny(k, ".[]\" ") {
		k = strconv.Quote(k)
	}
	if path == "" {
		return k
	}
	return path + "." + k
}

func docEqual(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// docValue shows one value of a document compactly, cut when long.
func docValue(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // a CEL rule's && reads as it is written
	if err := enc.Encode(v); err != nil {
		return Cut(fmt.Sprint(v))
	}
	return Cut(strings.TrimSuffix(b.String(), "\n"))
}

// Cut cuts s to MaxValueText characters, saying how many were left out: a
// value shown inline (the JSON report keeps it whole).
func Cut(s string) string {
	r := []rune(s)
	if len(r) <= MaxValueText {
		return s
	}
	return string(r[:MaxValueText]) + fmt.Sprintf("…(cut: %d more characters)", len(r)-MaxValueText)
}

// docDiffBlock shows a document's changes as a diff: each path as a hunk
// header, the value before as a removed line and after as an added one.
func docDiffBlock(changes []docChange) string {
	var b strings.Builder
	for i, c := range changes {
		if i == maxDocPaths {
			fmt.Fprintf(&b, "@@ and %s more @@\n", plural(len(changes)-maxDocPaths, "changed path"))
			break
		}
		switch {
		case c.fromAbsent:
			fmt.Fprintf(&b, "@@ %s (added) @@\n+ %s\n", docPath(c.path), docValue(c.to))
		case c.toAbsent:
			fmt.Fprintf(&b, "@@ %s (removed) @@\n- %s\n", docPath(c.path), docValue(c.from))
		default:
			fmt.Fprintf(&b, "@@ %s @@\n- %s\n+ %s\n", docPath(c.path), docValue(c.from), docValue(c.to))
		}
	}
	return b.String()
}

func docPath(p string) string {
	if p == "" {
		return "(the whole document)"
	}
	return Cut(p)
}

// docSummary says what a document diff holds: "JSON document, 1 path
// changed".
func docSummary(format string, changes []docChange) string {
	return fmt.Sprintf("%s document, %s", format, plural(len(changes), "path")+" changed")
}
