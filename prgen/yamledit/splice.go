package yamledit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// SpliceScalar replaces the scalar token of n in src with value, touching
// nothing else on the line (its comment, its alignment) or in the file. It
// reports false when the token cannot be found exactly, and the caller then
// rewrites the document instead.
func SpliceScalar(src []byte, n *yaml.Node, value any) ([]byte, bool) {
	if text, ok := value.(string); ok && strings.Contains(text, "\n") {
		return spliceBlock(src, n, text)
	}
	s, ok := scalar(value)
	if !ok || n == nil || n.Kind != yaml.ScalarNode || n.Line < 1 || n.Column < 1 {
		return nil, false
	}
	lines := bytes.SplitAfter(src, []byte("\n"))
	if n.Line > len(lines) {
		return nil, false
	}
	line := string(lines[n.Line-1])
	start, ok := byteColumn(line, n.Column)
	if !ok {
		return nil, false
	}
	end, ok := tokenEnd(line, start)
	if !ok || end == start {
		return nil, false // no token to replace (a null written as nothing): rewrite
	}
	if q := line[start]; q == '"' || q == '\'' {
		// A quoted token must read as the node's value, or it is not
		// the node's.
		var v string
		if err := yaml.Unmarshal([]byte(line[start:end]), &v); err != nil || v != n.Value {
			return nil, false
		}
	}
	flow := false
	if tok := line[start:end]; line[start] != '"' && line[start] != '\'' && tok != n.Value {
		// A plain scalar ends before a flow collection's `,`, `}` or `]`
		// ({name: web, newTag: 1.0}); any other difference is a token
		// this does not read exactly (a multi-line scalar): rewrite.
		rest := strings.TrimLeft(strings.TrimPrefix(tok, n.Value), " \t")
		if !strings.HasPrefix(tok, n.Value) || rest == "" || !strings.ContainsRune(",}]", rune(rest[0])) {
			return nil, false
		}
		end, flow = start+len(n.Value), true
	}
	text := s.Value
	// Plain text that would read otherwise here is quoted: another type,
	// a comment, a key, or in a flow collection its delimiters.
	quote := needsQuotes(s.Value) || strings.Contains(s.Value, " #") || strings.Contains(s.Value, ": ") || (flow && strings.ContainsAny(s.Value, ",[]{}"))
	switch {
	case line[start] == '"' || (s.Tag == yaml.NodeTagString && quote):
		b, _ := json.Marshal(s.Value) // a JSON string is a valid double-quoted YAML scalar
		text = string(b)
	case line[start] == '\'':
		text = "'" + strings.ReplaceAll(s.Value, "'", "''") + "'"
	}
	lines[n.Line-1] = []byte(line[:start] + text + line[end:])
	return bytes.Join(lines, nil), true
}

// byteColumn is the byte offset in line of the node's column, which counts
// characters from 1.
func byteColumn(line string, column int) (int, bool) {
	n := 1
	for i := range line {
		if n == column {
			return i, true
		}
		n++
	}
	return 0, false
}

// spliceBlock replaces the content of the literal block scalar n with the
// multi-line text, at the block's indentation, setting its chomping
// indicator to keep or strip the final newline as text does. It reports
// false for any other scalar (the document is rewritten instead, as a
// literal block) and for text a literal block cannot hold exactly.
func spliceBlock(src []byte, n *yaml.Node, text string) ([]byte, bool) {
	if n == nil || n.Kind != yaml.ScalarNode || n.Style&yaml.LiteralStyle == 0 || n.Line < 1 ||
		strings.HasSuffix(text, "\n\n") || strings.HasPrefix(text, " ") || strings.HasPrefix(text, "\n") || strings.Contains(text, "\r") {
		return nil, false
	}
	lines := bytes.SplitAfter(src, []byte("\n"))
	if n.Line > len(lines) {
		return nil, false
	}
	line := string(lines[n.Line-1])
	start, ok := byteColumn(line, n.Column)
	if !ok || line[start] != '|' {
		return nil, false
	}
	end := start + 1
	for end < len(line) && strings.ContainsRune("+-0123456789", rune(line[end])) {
		end++
	}
	indicator := "|"
	if !strings.HasSuffix(text, "\n") {
		indicator = "|-"
	}
	lines[n.Line-1] = []byte(line[:start] + indicator + line[end:])
	out, err := ReplaceBlock(bytes.Join(lines, nil), n, []byte(text))
	if err != nil {
		return nil, false
	}
	return out, true
}

// tokenEnd finds where the scalar starting at start ends on its line.
func tokenEnd(line string, start int) (int, bool) {
	switch line[start] {
	case '"':
		for i := start + 1; i < len(line); i++ {
			switch line[i] {
			case '\\':
				i++
			case '"':
				return i + 1, true
			}
		}
		return 0, false
	case '\'':
		for i := start + 1; i < len(line); i++ {
			if line[i] == '\'' {
				if i+1 < len(line) && line[i+1] == '\'' {
					i++
					continue
				}
				return i + 1, true
			}
		}
		return 0, false
	case '|', '>', '&', '*', '!', '[', '{':
		return 0, false // block scalars, anchors, tags and flow collections: rewrite instead
	}
	end := len(strings.TrimRight(line, "\r\n"))
	if i := strings.Index(line[start:], " #"); i >= 0 {
		end = start + i
	}
	return len(strings.TrimRight(line[:end], " \t")), true
}

// LookupAt finds the node at p without creating anything; nil when absent.
func LookupAt(node *yaml.RNode, p fieldpath.Path) *yaml.RNode {
	cur := node
	for _, pe := range p {
		if cur == nil {
			return nil
		}
		switch {
		case pe.FieldName != nil:
			f := cur.Field(*pe.FieldName)
			if f == nil {
				return nil
			}
			cur = f.Value
		case pe.Key != nil:
			var keys, values []string
			for _, f := range *pe.Key {
				keys = append(keys, f.Name)
				values = append(values, JSONScalar(f.Value.Unstructured()))
			}
			next, err := cur.Pipe(yaml.MatchElementList(keys, values))
			if err != nil {
				return nil
			}
			cur = next
		case pe.Index != nil:
			items, err := cur.Elements()
			if err != nil || *pe.Index >= len(items) {
				return nil
			}
			cur = items[*pe.Index]
		default:
			return nil
		}
	}
	return cur
}

func JSONScalar(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// EditAt sets the value at p in one document of src: by splicing the scalar
// when it is there, or the scalars that differ inside a collection of the
// same shape, else by rewriting the documents.
func EditAt(src []byte, docs []*yaml.RNode, doc *yaml.RNode, p fieldpath.Path, value any) ([]byte, error) {
	if n := LookupAt(doc, p); n != nil {
		if out, ok := SpliceScalar(src, n.YNode(), value); ok {
			return out, nil
		}
		if out, ok := SpliceDeep(src, n.YNode(), value); ok {
			return out, nil
		}
	}
	if err := SetAt(doc, p, value); err != nil {
		return nil, err
	}
	return WriteDocs(docs)
}

// ReplaceBlock writes text as the new content of the block scalar n (an
// inline patch) in src, at the block's own indentation; a scalar that is not
// a literal block is rewritten with the document.
func ReplaceBlock(src []byte, n *yaml.Node, text []byte) ([]byte, error) {
	lines := bytes.SplitAfter(src, []byte("\n"))
	if n.Style&yaml.LiteralStyle == 0 || n.Line < 1 || n.Line >= len(lines) {
		return nil, fmt.Errorf("the inline patch at line %d is not a literal block (|): edit it by hand", n.Line)
	}
	first, indent := -1, ""
	for i := n.Line; i < len(lines); i++ {
		if t := strings.TrimSpace(string(lines[i])); t != "" {
			first = i
			indent = string(lines[i][:len(lines[i])-len(bytes.TrimLeft(lines[i], " "))])
			break
		}
	}
	if first < 0 || indent == "" {
		return nil, fmt.Errorf("the inline patch at line %d is empty", n.Line)
	}
	end := first
	for end < len(lines) {
		l := lines[end]
		if len(bytes.TrimSpace(l)) > 0 && !bytes.HasPrefix(l, []byte(indent)) {
			break
		}
		end++
	}
	// Blank lines after the block belong to what follows it.
	for end > first && len(bytes.TrimSpace(lines[end-1])) == 0 {
		end--
	}
	var block []byte
	for _, l := range bytes.SplitAfter(bytes.TrimRight(text, "\n"), []byte("\n")) {
		if len(bytes.TrimSpace(l)) == 0 {
			block = append(block, '\n')
			continue
		}
		block = append(block, indent...)
		block = append(block, bytes.TrimRight(l, "\n")...)
		block = append(block, '\n')
	}
	out := append([]byte{}, bytes.Join(lines[:first], nil)...)
	out = append(out, block...)
	return append(out, bytes.Join(lines[end:], nil)...), nil
}

// AppendToList inserts item as the last entry of a top-level list, after its
// last line, with the indentation of its entries.
func AppendToList(src []byte, field *yaml.MapNode, item string) ([]byte, bool) {
	items := field.Value.YNode().Content
	if len(items) == 0 {
		return nil, false
	}
	first, last := items[0], items[len(items)-1]
	lines := bytes.SplitAfter(src, []byte("\n"))
	// The entry's dash sits two columns before its first field.
	col := first.Column - 3
	if col < 0 || last.Line < 1 || last.Line > len(lines) {
		return nil, false
	}
	// The last entry ends before the next line that is not more indented.
	end := last.Line
	for end < len(lines) {
		l := string(lines[end])
		trimmed := strings.TrimLeft(l, " ")
		if strings.TrimSpace(l) == "" || len(l)-len(trimmed) <= col {
			break
		}
		end++
	}
	if end > 0 && !bytes.HasSuffix(lines[end-1], []byte("\n")) {
		lines[end-1] = append(lines[end-1], '\n')
	}
	insert := []byte(strings.Repeat(" ", col) + item + "\n")
	out := append([][]byte{}, lines[:end]...)
	out = append(out, insert)
	out = append(out, lines[end:]...)
	return bytes.Join(out, nil), true
}
