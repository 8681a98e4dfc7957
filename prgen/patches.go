package prgen

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// patchSource is one patch the overlay's kustomization lists, in a file of
// the overlay or inline in the kustomization.
type patchSource struct {
	// file holds the patch: its own file, or the kustomization when inline.
	file string
	// inline is the kustomization's scalar node of an inline patch.
	inline *yaml.Node
	// content is the patch's text.
	content []byte
	// target is the selector of a `patches` or `patchesJson6902` entry.
	target *patchTarget
}

type patchTarget struct{ kind, name string }

// matches says whether a patch entry's target selects obj (written name as
// its source has it, or as rendered).
func (t *patchTarget) matches(obj *unstructured.Unstructured, name string) bool {
	if t == nil {
		return true
	}
	if t.kind != "" && t.kind != obj.GetKind() {
		return false
	}
	if t.name == "" {
		return true
	}
	re, err := regexp.Compile("^(?:" + t.name + ")$")
	if err != nil {
		return t.name == name || t.name == obj.GetName()
	}
	return re.MatchString(name) || re.MatchString(obj.GetName())
}

// patchSources lists the patches of the overlay's kustomization that live in
// the overlay: `patches`, `patchesStrategicMerge` and `patchesJson6902`
// entries, by file or inline. Patches in other directories (a shared base
// or component) are not the overlay's to edit.
func (p *planner) patchSources(kust string) ([]patchSource, error) {
	b, err := p.read(kust)
	if err != nil {
		return nil, err
	}
	docs, err := readDocs(b)
	if err != nil || len(docs) == 0 {
		return nil, err
	}
	var out []patchSource
	add := func(file string, inline *yaml.Node, target *patchTarget) {
		switch {
		case inline != nil:
			out = append(out, patchSource{file: kust, inline: inline, content: []byte(inline.Value), target: target})
		case file != "":
			rel := path.Join(p.in.Overlay, file)
			if !strings.HasPrefix(rel, p.in.Overlay+"/") {
				return
			}
			content, err := p.read(rel)
			if err != nil {
				return
			}
			out = append(out, patchSource{file: rel, content: content, target: target})
		}
	}
	readTarget := func(entry *yaml.RNode) *patchTarget {
		t := entry.Field("target")
		if t == nil {
			return nil
		}
		kind, _ := t.Value.GetString("kind")
		name, _ := t.Value.GetString("name")
		return &patchTarget{kind: kind, name: name}
	}
	for _, field := range []string{"patches", "patchesJson6902"} {
		f := docs[0].Field(field)
		if f == nil {
			continue
		}
		entries, _ := f.Value.Elements()
		for _, e := range entries {
			file, _ := e.GetString("path")
			var inline *yaml.Node
			if pf := e.Field("patch"); pf != nil && pf.Value.YNode().Kind == yaml.ScalarNode {
				inline = pf.Value.YNode()
			}
			add(file, inline, readTarget(e))
		}
	}
	if f := docs[0].Field("patchesStrategicMerge"); f != nil {
		entries, _ := f.Value.Elements()
		for _, e := range entries {
			n := e.YNode()
			if n.Kind != yaml.ScalarNode {
				continue
			}
			if strings.Contains(n.Value, "\n") {
				add("", n, nil)
			} else {
				add(n.Value, nil, nil)
			}
		}
	}
	return out, nil
}

// editExistingPatch sets the field in a patch of the overlay that sets it
// today, keeping the patch's layout. nil when the patch does not set it.
func (p *planner) editExistingPatch(src patchSource, obj *unstructured.Unstructured, name string, fp fieldpath.Path, live any) ([]byte, error) {
	if !src.target.matches(obj, name) {
		return nil, nil
	}
	var edited []byte
	if root, err := yaml.Parse(string(src.content)); err == nil && root.YNode().Kind == yaml.SequenceNode {
		if edited, err = editJSONPatch(src.content, root, obj, fp, live); err != nil || edited == nil {
			return nil, err
		}
	} else {
		docs, err := readDocs(src.content)
		if err != nil || len(docs) == 0 {
			return nil, nil // not YAML driftback can edit: leave it
		}
		doc := matchDoc(docs, obj)
		if doc == nil && src.target != nil {
			doc = docs[0] // a targeted patch names its objects by the selector
		}
		if doc == nil || lookupAt(doc, fp) == nil {
			return nil, nil
		}
		if edited, err = editAt(src.content, docs, doc, fp, live); err != nil {
			return nil, err
		}
	}
	if src.inline == nil {
		return edited, nil
	}
	kust, err := p.read(src.file)
	if err != nil {
		return nil, err
	}
	return replaceBlock(kust, src.inline, edited)
}

// editJSONPatch sets the value of the add or replace operation whose path is
// the field, or a parent of it.
func editJSONPatch(src []byte, root *yaml.RNode, obj *unstructured.Unstructured, fp fieldpath.Path, live any) ([]byte, error) {
	segments, ok := pointerSegments(obj.Object, fp)
	if !ok {
		return nil, nil
	}
	ops, err := root.Elements()
	if err != nil {
		return nil, nil
	}
	rewrite := func() ([]byte, error) {
		s, err := root.String()
		return []byte(s), err
	}
	for _, op := range ops {
		kind, _ := op.GetString("op")
		ptr, _ := op.GetString("path")
		if kind != "add" && kind != "replace" {
			continue
		}
		parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
		if len(parts) > len(segments) {
			continue
		}
		prefix := true
		for i, part := range parts {
			part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			if part != segments[i] && !(part == "-" && i == len(parts)-1) {
				prefix = false
				break
			}
		}
		if !prefix {
			continue
		}
		value := op.Field("value")
		if value == nil {
			continue
		}
		rest := fp[len(parts):]
		if len(rest) == 0 {
			if out, ok := spliceScalar(src, value.Value.YNode(), live); ok {
				return out, nil
			}
			if err := setField(op, "value", live); err != nil {
				return nil, err
			}
			return rewrite()
		}
		n := lookupAt(value.Value, rest)
		if n == nil {
			continue
		}
		if out, ok := spliceScalar(src, n.YNode(), live); ok {
			return out, nil
		}
		if err := setAt(value.Value, rest, live); err != nil {
			return nil, err
		}
		return rewrite()
	}
	return nil, nil
}

// pointerSegments turns a field path into JSON-pointer segments, finding the
// index of each keyed list item in obj (the render).
func pointerSegments(obj map[string]any, fp fieldpath.Path) ([]string, bool) {
	var out []string
	var cur any = obj
	for _, pe := range fp {
		switch {
		case pe.FieldName != nil:
			m, _ := cur.(map[string]any)
			out = append(out, *pe.FieldName)
			cur = m[*pe.FieldName]
		case pe.Key != nil:
			list, ok := cur.([]any)
			if !ok {
				return nil, false
			}
			found := -1
			for i, item := range list {
				m, ok := item.(map[string]any)
				if !ok {
					continue
				}
				match := true
				for _, k := range *pe.Key {
					if jsonScalar(m[k.Name]) != jsonScalar(k.Value.Unstructured()) {
						match = false
					}
				}
				if match {
					found = i
					break
				}
			}
			if found < 0 {
				return nil, false
			}
			out = append(out, strconv.Itoa(found))
			cur = list[found]
		case pe.Index != nil:
			list, _ := cur.([]any)
			if *pe.Index >= len(list) {
				return nil, false
			}
			out = append(out, strconv.Itoa(*pe.Index))
			cur = list[*pe.Index]
		default:
			return nil, false
		}
	}
	return out, true
}

// replaceBlock writes text as the new content of the block scalar n (an
// inline patch) in src, at the block's own indentation; a scalar that is not
// a literal block is rewritten with the document.
func replaceBlock(src []byte, n *yaml.Node, text []byte) ([]byte, error) {
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
