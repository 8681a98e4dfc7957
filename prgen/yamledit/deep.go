package yamledit

import (
	"encoding/json"
	"sort"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// scalarEdit is one scalar of a collection that takes a new value.
type scalarEdit struct {
	node  *yaml.Node
	value any
}

// SpliceDeep sets the collection n to value by splicing only the scalars
// that differ, when value has n's shape (the same keys, as many items): an
// edit inside a list Kubernetes replaces whole (an autoscaler's metrics, a
// container's args) touches those values only, and the file keeps every
// other byte, its comments and key order included. It reports false when
// the shape differs or a scalar cannot be spliced exactly: the caller then
// rewrites the document.
func SpliceDeep(src []byte, n *yaml.Node, value any) ([]byte, bool) {
	var edits []scalarEdit
	if n == nil || !collectEdits(n, value, &edits) || len(edits) == 0 {
		return nil, false
	}
	// From the end of the file: a splice moves only what follows it on its
	// line (or, for a block scalar, the lines after it).
	sort.Slice(edits, func(i, j int) bool {
		a, b := edits[i].node, edits[j].node
		if a.Line != b.Line {
			return a.Line > b.Line
		}
		return a.Column > b.Column
	})
	out := src
	for _, e := range edits {
		var ok bool
		if out, ok = SpliceScalar(out, e.node, e.value); !ok {
			return nil, false
		}
	}
	return out, true
}

// collectEdits walks n and v together, collecting the scalars that differ;
// false when their shapes differ.
func collectEdits(n *yaml.Node, v any, edits *[]scalarEdit) bool {
	switch n.Kind {
	case yaml.MappingNode:
		m, ok := v.(map[string]any)
		if !ok || len(n.Content)%2 != 0 || len(n.Content)/2 != len(m) {
			return false
		}
		for i := 0; i < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Value == "<<" {
				return false // a merge key: what the keys are is not in the text
			}
			val, ok := m[k.Value]
			if !ok || !collectEdits(n.Content[i+1], val, edits) {
				return false
			}
		}
		return true
	case yaml.SequenceNode:
		l, ok := v.([]any)
		if !ok || len(l) != len(n.Content) {
			return false
		}
		for i, item := range n.Content {
			if !collectEdits(item, l[i], edits) {
				return false
			}
		}
		return true
	case yaml.ScalarNode:
		switch v.(type) {
		case map[string]any, []any:
			return false
		}
		if !sameScalar(n, v) {
			*edits = append(*edits, scalarEdit{node: n, value: v})
		}
		return true
	}
	return false // aliases, documents: not spliced
}

// sameScalar says whether the scalar n reads as v.
func sameScalar(n *yaml.Node, v any) bool {
	var x any
	if err := n.Decode(&x); err != nil {
		return false
	}
	a, errA := json.Marshal(x)
	b, errB := json.Marshal(v)
	return errA == nil && errB == nil && string(a) == string(b)
}
