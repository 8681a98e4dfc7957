package prgen

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// readDocs parses a YAML stream keeping comments, document separators,
// quoting and sequence indentation.
func readDocs(b []byte) ([]*yaml.RNode, error) {
	rw := &kio.ByteReader{Reader: bytes.NewReader(b), PreserveSeqIndent: true}
	return rw.Read()
}

// writeDocs prints documents back as readDocs found them.
func writeDocs(docs []*yaml.RNode) ([]byte, error) {
	var out bytes.Buffer
	w := kio.ByteWriter{Writer: &out, KeepReaderAnnotations: false}
	if err := w.Write(docs); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// setAt writes value at path p inside node, creating maps and keyed list items
// on the way. A scalar replacing a scalar is assigned in place, which keeps
// its line comment (yaml.SetField would drop it).
func setAt(node *yaml.RNode, p fieldpath.Path, value any) error {
	cur := node
	for i, pe := range p {
		last := i == len(p)-1
		switch {
		case pe.FieldName != nil:
			name := *pe.FieldName
			if last {
				return setField(cur, name, value)
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
					if err := setField(item, match[j], keyValue(pe, match[j])); err != nil {
						return err
					}
				}
				if err := cur.PipeE(yaml.Append(item.YNode())); err != nil {
					return err
				}
			}
			if last {
				return replaceNode(item, value)
			}
			cur = item
		case pe.Index != nil:
			items, err := cur.Elements()
			if err != nil || *pe.Index >= len(items) {
				return fmt.Errorf("list index %d is not in the file", *pe.Index)
			}
			if last {
				return replaceNode(items[*pe.Index], value)
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

// setField sets one field of a map, in place when both old and new are scalars.
func setField(m *yaml.RNode, name string, value any) error {
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

// replaceNode replaces the content of n with value, keeping n's comments.
func replaceNode(n *yaml.RNode, value any) error {
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
