package prgen

import (
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/driftback/driftback/prgen/yamledit"
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

// targetOf reads the selector of a patch entry; nil when it has none.
func targetOf(entry *yaml.RNode) *patchTarget {
	t := entry.Field("target")
	if t == nil {
		return nil
	}
	kind, _ := t.Value.GetString("kind")
	name, _ := t.Value.GetString("name")
	return &patchTarget{kind: kind, name: name}
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
	docs, err := yamledit.ReadDocs(b)
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
			add(file, inline, targetOf(e))
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
		docs, err := yamledit.ReadDocs(src.content)
		if err != nil || len(docs) == 0 {
			return nil, nil // not YAML driftback can edit: leave it
		}
		doc := matchDoc(docs, obj)
		if doc == nil && src.target != nil {
			doc = docs[0] // a targeted patch names its objects by the selector
		}
		if doc == nil || yamledit.LookupAt(doc, fp) == nil {
			return nil, nil
		}
		if edited, err = yamledit.EditAt(src.content, docs, doc, fp, live); err != nil {
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
	return yamledit.ReplaceBlock(kust, src.inline, edited)
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
			if out, ok := yamledit.SpliceScalar(src, value.Value.YNode(), live); ok {
				return out, nil
			}
			if err := yamledit.SetField(op, "value", live); err != nil {
				return nil, err
			}
			return rewrite()
		}
		n := yamledit.LookupAt(value.Value, rest)
		if n == nil {
			continue
		}
		if out, ok := yamledit.SpliceScalar(src, n.YNode(), live); ok {
			return out, nil
		}
		if err := yamledit.SetAt(value.Value, rest, live); err != nil {
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
					if yamledit.JSONScalar(m[k.Name]) != yamledit.JSONScalar(k.Value.Unstructured()) {
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
