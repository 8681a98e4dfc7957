package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// yamlMessage matches the errors the YAML decoder gives for a key it does
// not know and for a value of the wrong type.
var (
	unknownField = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+$`)
	wrongType    = regexp.MustCompile("^line (\\d+): cannot unmarshal !!(\\w+)(?: `.*`)? into (\\S+)$")
)

// explainYAML rewrites the decoder's errors in app.yml's own terms: each
// names its line and the key path, says what was expected, and suggests the
// key a typo meant. root is the type decoded into; b the document.
func explainYAML(err error, b []byte, root reflect.Type) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil {
		return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var msgs []string
	for _, e := range te.Errors {
		msgs = append(msgs, explainOne(e, &doc, root))
	}
	return errors.New(strings.Join(msgs, "\n"))
}

func explainOne(e string, doc *yaml.Node, root reflect.Type) string {
	if m := unknownField.FindStringSubmatch(e); m != nil {
		line, _ := strconv.Atoi(m[1])
		path, _ := pathAt(doc, line, m[2], 0)
		msg := fmt.Sprintf("line %d: %s: unknown key", line, dotted(path))
		if s := DidYouMean(m[2], keysAt(root, path[:max(0, len(path)-1)])); s != "" {
			msg += " (did you mean " + s + "?)"
		}
		return msg
	}
	if m := wrongType.FindStringSubmatch(e); m != nil {
		line, _ := strconv.Atoi(m[1])
		kind := map[string]yaml.Kind{"map": yaml.MappingNode, "seq": yaml.SequenceNode}[m[2]]
		if kind == 0 {
			kind = yaml.ScalarNode
		}
		path, value := pathAt(doc, line, "", kind)
		got := m[2]
		if value != nil && value.Kind == yaml.ScalarNode {
			got = strconv.Quote(value.Value)
		} else if value != nil {
			got = map[yaml.Kind]string{yaml.MappingNode: "a mapping", yaml.SequenceNode: "a list"}[value.Kind]
		}
		return fmt.Sprintf("line %d: %s: expected %s, got %s", line, dotted(path), expected(typeAt(root, path), m[3]), got)
	}
	return strings.TrimPrefix(e, "yaml: ")
}

// pathAt finds the key path of the mapping entry on a line: the entry whose
// key is named key (an unknown key), else the deepest value of the given
// kind. It returns the value node too.
func pathAt(n *yaml.Node, line int, key string, kind yaml.Kind) ([]string, *yaml.Node) {
	var walk func(n *yaml.Node, path []string) ([]string, *yaml.Node, bool)
	walk = func(n *yaml.Node, path []string) ([]string, *yaml.Node, bool) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if p, v, ok := walk(c, path); ok {
					return p, v, true
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := append(append([]string{}, path...), k.Value)
				if key != "" && k.Line == line && k.Value == key {
					return p, v, true
				}
				// The deepest value on the line is the one that is wrong.
				if got, val, ok := walk(v, p); ok {
					return got, val, true
				}
				if key == "" && v.Line == line && v.Kind == kind {
					return p, v, true
				}
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := append(append([]string{}, path...), "["+strconv.Itoa(i)+"]")
				if got, val, ok := walk(c, p); ok {
					return got, val, true
				}
				if key == "" && c.Line == line && c.Kind == kind {
					return p, c, true
				}
			}
		}
		return nil, nil, false
	}
	p, v, _ := walk(n, nil)
	return p, v
}

// dotted writes a key path as app.yml's documentation does:
// clusters.prod.kubeconfig, targets[0].path.
func dotted(path []string) string {
	var b strings.Builder
	for i, p := range path {
		if i > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	if b.Len() == 0 {
		return "(top level)"
	}
	return b.String()
}

// typeAt follows a key path through the Go type app.yml decodes into.
func typeAt(t reflect.Type, path []string) reflect.Type {
	for _, p := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByKey(t, p)
			if !ok {
				return nil
			}
			t = f.Type
		case reflect.Map, reflect.Slice, reflect.Array:
			t = t.Elem()
		default:
			return nil
		}
	}
	return t
}

// yamlFields lists a struct's fields by their YAML key, inlined structs'
// fields among them.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case strings.Contains(opts, "inline"):
			maps.Copy(out, yamlFields(f.Type))
		case name != "" && name != "-":
			out[name] = f
		}
	}
	return out
}

// fieldByKey finds a struct's field by its YAML key.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	f, ok := yamlFields(t)[key]
	return f, ok
}

// keysAt lists the YAML keys of the struct at a path, sorted.
func keysAt(root reflect.Type, path []string) []string {
	t := typeAt(root, path)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	return slices.Sorted(maps.Keys(yamlFields(t)))
}

// DidYouMean returns the known name (a key, a flag) a typo most likely
// meant, or "" when none is close.
func DidYouMean(typo string, keys []string) string {
	best, bestDist := "", len(typo)/3+2
	for _, k := range keys {
		if d := editDistance(strings.ToLower(typo), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between two strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// expected says in words what a Go type takes.
func expected(t reflect.Type, goType string) string {
	if t == reflect.TypeFor[time.Duration]() {
		return "a duration such as 30s or 5m"
	}
	if t == nil {
		return goType
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return goType
}

// keyPath matches the key path a validation message starts with:
// targets[0].policy.failOn, clusters.prod.discover.destinations["x"].
var keyPath = regexp.MustCompile(`^([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+|\[[0-9]+\]|\["[^"]*"\])*): `)

// withLines puts, before each validation message of err ("; " between
// them), the line of app.yml its key path is on, where the file holds it
// (a value from the environment has no line).
func withLines(err error, b []byte) error {
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil {
		return err
	}
	msgs := strings.Split(err.Error(), "; ")
	for i, m := range msgs {
		if k := keyPath.FindStringSubmatch(m); k != nil {
			if line := lineOf(&doc, k[1]); line > 0 {
				msgs[i] = fmt.Sprintf("line %d: %s", line, m)
			}
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

// pathSegment matches one step of a key path: a key, an index, a quoted key.
var pathSegment = regexp.MustCompile(`[A-Za-z0-9_-]+|\[[0-9]+\]|\["[^"]*"\]`)

// lineOf is the line of the deepest node of a key path the document holds.
func lineOf(doc *yaml.Node, path string) int {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, seg := range pathSegment.FindAllString(path, -1) {
		var next *yaml.Node
		switch {
		case strings.HasPrefix(seg, "[\""):
			next = child(n, strings.TrimSuffix(strings.TrimPrefix(seg, "[\""), "\"]"), &line)
		case strings.HasPrefix(seg, "["):
			i, _ := strconv.Atoi(strings.Trim(seg, "[]"))
			if n.Kind == yaml.SequenceNode && i < len(n.Content) {
				next = n.Content[i]
				line = next.Line
			}
		default:
			next = child(n, seg, &line)
		}
		if next == nil {
			break
		}
		n = next
	}
	return line
}

// child is a mapping's value under key, setting line to the key's line.
func child(n *yaml.Node, key string, line *int) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			*line = n.Content[i].Line
			return n.Content[i+1]
		}
	}
	return nil
}
