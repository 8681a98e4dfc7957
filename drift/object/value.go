package object

import (
	"encoding/json"
	"fmt"
	"reflect"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// SameJSON says a and b are equal as JSON: numbers of any Go type alike.
func SameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return reflect.DeepEqual(a, b)
	}
	var x, y any
	_ = json.Unmarshal(ja, &x) // both were just marshalled
	_ = json.Unmarshal(jb, &y)
	return reflect.DeepEqual(x, y)
}

// SetValueAt returns cur with v written at p, creating maps and keyed list
// items on the way: ValueAt's converse.
func SetValueAt(cur any, p fieldpath.Path, v any) (any, error) {
	if len(p) == 0 {
		return v, nil
	}
	pe := p[0]
	switch {
	case pe.FieldName != nil:
		m, ok := cur.(map[string]any)
		if !ok {
			if cur != nil {
				return nil, fmt.Errorf("%s is not a map", *pe.FieldName)
			}
			m = map[string]any{}
		}
		nv, err := SetValueAt(m[*pe.FieldName], p[1:], v)
		if err != nil {
			return nil, err
		}
		m[*pe.FieldName] = nv
		return m, nil
	case pe.Key != nil:
		l, _ := cur.([]any)
		for j, item := range l {
			if im, ok := item.(map[string]any); ok && keyMatches(im, pe) {
				nv, err := SetValueAt(item, p[1:], v)
				if err != nil {
					return nil, err
				}
				l[j] = nv
				return l, nil
			}
		}
		item := map[string]any{}
		for _, f := range *pe.Key {
			item[f.Name] = f.Value.Unstructured()
		}
		nv, err := SetValueAt(item, p[1:], v)
		if err != nil {
			return nil, err
		}
		return append(l, nv), nil
	case pe.Index != nil:
		l, ok := cur.([]any)
		if !ok || *pe.Index >= len(l) {
			return nil, fmt.Errorf("no list item %d", *pe.Index)
		}
		nv, err := SetValueAt(l[*pe.Index], p[1:], v)
		if err != nil {
			return nil, err
		}
		l[*pe.Index] = nv
		return l, nil
	}
	return nil, fmt.Errorf("%s: set-list members cannot be edited", p)
}

func keyMatches(m map[string]any, pe fieldpath.PathElement) bool {
	for _, f := range *pe.Key {
		if fmt.Sprint(m[f.Name]) != fmt.Sprint(f.Value.Unstructured()) {
			return false
		}
	}
	return true
}

// RemoveValueAt removes the value at p from obj, where it is: a map's
// field, a keyed list item or a list item by index. Nothing happens when
// there is none.
func RemoveValueAt(obj map[string]any, p fieldpath.Path) {
	if len(p) == 0 {
		return
	}
	parent := valueAt(obj, p[:len(p)-1])
	if len(p) == 1 {
		parent = obj
	}
	last := p[len(p)-1]
	switch {
	case last.FieldName != nil:
		if m, ok := parent.(map[string]any); ok {
			delete(m, *last.FieldName)
		}
	case last.Key != nil || last.Index != nil || last.Value != nil:
		l, ok := parent.([]any)
		if !ok {
			return
		}
		kept := l[:0:0]
		for i, item := range l {
			drop := false
			switch {
			case last.Index != nil:
				drop = i == *last.Index
			case last.Key != nil:
				im, isMap := item.(map[string]any)
				drop = isMap && keyMatches(im, last)
			default:
				drop = fmt.Sprint(item) == fmt.Sprint((*last.Value).Unstructured())
			}
			if !drop {
				kept = append(kept, item)
			}
		}
		// The list is the parent's value: written back in its place.
		if len(p) == 1 {
			return
		}
		_, _ = SetValueAt(obj, p[:len(p)-1], kept) // obj, a map, is changed in place; the path was just read

	}
}
