// Package yamledit edits YAML manifests as text, the way a person would: a
// value is spliced into its own token, keeping the line's comment, the
// quoting, the indentation and every other document of the stream; only
// what cannot be spliced rewrites its document.
package yamledit

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// ReadDocs parses a YAML stream keeping comments, document separators,
// quoting and sequence indentation. Node lines count from the top of the
// stream, as the splices read them: kio numbers each document's from 1.
func ReadDocs(b []byte) ([]*yaml.RNode, error) {
	rw := &kio.ByteReader{Reader: bytes.NewReader(b), PreserveSeqIndent: true}
	docs, err := rw.Read()
	if err != nil {
		return nil, err
	}
	offsets := documentLines(string(b))
	for i, d := range docs {
		if len(offsets) == len(docs) {
			shiftLines(d.YNode(), offsets[i])
		} else {
			// Documents kio unwrapped or skipped otherwise: no line is
			// known, and every edit rewrites the document instead.
			shiftLines(d.YNode(), -1<<30)
		}
	}
	return docs, nil
}

// documentSeparator is where kio splits a stream into documents.
var documentSeparator = regexp.MustCompile(`\n---.*\n`)

// documentLines are the lines before each non-empty document of a stream,
// found as kio splits and skips them.
func documentLines(s string) []int {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var out []int
	prev := 0
	add := func(start, end int) {
		var n yaml.Node
		err := yaml.NewDecoder(strings.NewReader(s[start:end])).Decode(&n)
		if err != nil || (n.Kind == yaml.DocumentNode && len(n.Content) == 0) || yaml.IsMissingOrNull(yaml.NewRNode(&n)) {
			return
		}
		out = append(out, strings.Count(s[:start], "\n"))
	}
	for _, loc := range documentSeparator.FindAllStringIndex(s, -1) {
		add(prev, loc[0])
		prev = loc[1]
	}
	add(prev, len(s))
	return out
}

// shiftLines moves every node's line by n; a line moved below 1 is unknown (0).
func shiftLines(node *yaml.Node, n int) {
	if node == nil {
		return
	}
	if node.Line > 0 {
		node.Line = max(node.Line+n, 0)
	}
	for _, c := range node.Content {
		shiftLines(c, n)
	}
}

// WriteDocs prints documents back as ReadDocs found them.
func WriteDocs(docs []*yaml.RNode) ([]byte, error) {
	var out bytes.Buffer
	w := kio.ByteWriter{Writer: &out, KeepReaderAnnotations: false}
	if err := w.Write(docs); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// SetAt writes value at path p inside node, creating maps and keyed list items
// on the way. A scalar replacing a scalar is assigned in place, which keeps
// its line comment (yaml.SetField would drop it).
func SetAt(node *yaml.RNode, p fieldpath.Path, value any) error {
	cur := node
	for i, pe := range p {
		last := i == len(p)-1
		switch {
		case pe.FieldName != nil:
			name := *pe.FieldName
			if last {
				return SetField(cur, name, value)
			}
			next, err := cur.Pipe(yaml.LookupCreate(nextKind(p[i+1]), name))
			if err != nil {
				return err
			}
			cur = next
		case pe.Key != nil:
			var match []string
			for _, f := range *pe.Key {
				match = append(match, f.Name, fmt.Sprint(f.Value.Unstructured()))
			}
			item, err := cur.Pipe(yaml.MatchElementList(keysOf(match), valuesOf(match)))
			if err != nil {
				return err
			}
			if item == nil {
				item = yaml.NewMapRNode(nil)
				for j := 0; j < len(match); j += 2 {
					if err := SetField(item, match[j], keyValue(pe, match[j])); err != nil {
						return err
					}
				}
				if err := cur.PipeE(yaml.Append(item.YNode())); err != nil {
					return err
				}
			}
			if last {
				return ReplaceNode(item, value)
			}
			cur = item
		case pe.Index != nil:
			items, err := cur.Elements()
			if err != nil || *pe.Index >= len(items) {
				return fmt.Errorf("list index %d is not in the file", *pe.Index)
			}
			if last {
				return ReplaceNode(items[*pe.Index], value)
			}
			cur = items[*pe.Index]
		default:
			return fmt.Errorf("%s: set-list members cannot be edited one by one", p)
		}
	}
	return nil
}

func keysOf(kv []string) []string {
	var out []string
	for i := 0; i < len(kv); i += 2 {
		out = append(out, kv[i])
	}
	return out
}

func valuesOf(kv []string) []string {
	var out []string
	for i := 1; i < len(kv); i += 2 {
		out = append(out, kv[i])
	}
	return out
}

func keyValue(pe fieldpath.PathElement, name string) any {
	for _, f := range *pe.Key {
		if f.Name == name {
			return f.Value.Unstructured()
		}
	}
	return nil
}

func nextKind(pe fieldpath.PathElement) yaml.Kind {
	if pe.FieldName != nil {
		return yaml.MappingNode
	}
	return yaml.SequenceNode
}

// SetField sets one field of a map, in place when both old and new are scalars.
func SetField(m *yaml.RNode, name string, value any) error {
	existing := m.Field(name)
	if existing != nil {
		if s, ok := scalar(value); ok && existing.Value.YNode().Kind == yaml.ScalarNode {
			n := existing.Value.YNode()
			n.Value, n.Tag = s.Value, s.Tag
			if s.Style == yaml.LiteralStyle {
				n.Style = yaml.LiteralStyle
			}
			if s.Style != 0 || n.Style == yaml.DoubleQuotedStyle || n.Style == yaml.SingleQuotedStyle {
				if s.Tag != yaml.NodeTagString {
					n.Style = 0 // a number or boolean is written bare
				}
			}
			return nil
		}
	}
	v, err := toNode(value)
	if err != nil {
		return err
	}
	return m.PipeE(yaml.SetField(name, v))
}

// ReplaceNode replaces the content of n with value, keeping n's comments.
func ReplaceNode(n *yaml.RNode, value any) error {
	v, err := toNode(value)
	if err != nil {
		return err
	}
	y := n.YNode()
	head, line, foot := y.HeadComment, y.LineComment, y.FootComment
	*y = *v.YNode()
	y.HeadComment, y.LineComment, y.FootComment = head, line, foot
	return nil
}

// scalar renders a scalar value as a YAML node.
func scalar(v any) (*yaml.Node, bool) {
	switch x := v.(type) {
	case string:
		n := &yaml.Node{Kind: yaml.ScalarNode, Value: x, Tag: yaml.NodeTagString}
		switch {
		case strings.Contains(x, "\n") && !strings.Contains(x, "\r") && !strings.HasPrefix(x, " "):
			n.Style = yaml.LiteralStyle // a script or a config file, kept readable
		case needsQuotes(x): // a string that would read as another type keeps its quotes
			n.Style = yaml.DoubleQuotedStyle
		}
		return n, true
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatBool(x), Tag: yaml.NodeTagBool}, true
	case int64:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatInt(x, 10), Tag: yaml.NodeTagInt}, true
	case int:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.Itoa(x), Tag: yaml.NodeTagInt}, true
	case float64:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatFloat(x, 'g', -1, 64), Tag: yaml.NodeTagFloat}, true
	}
	return nil, false
}

func needsQuotes(s string) bool {
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		return true
	}
	_, isString := v.(string)
	return !isString
}

func toNode(value any) (*yaml.RNode, error) {
	if s, ok := scalar(value); ok {
		return yaml.NewRNode(s), nil
	}
	b, err := yaml.Marshal(value)
	if err != nil {
		return nil, err
	}
	return yaml.Parse(string(b))
}
