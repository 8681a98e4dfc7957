package object

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Typed is the one boundary between whatever produces objects and the
// comparison: kustomize's output, Flux's postBuild substitution (kyaml's maps
// hold Go ints), Argo CD's options, a live read, a dump. Every object that
// leaves it holds JSON types only: string, bool, int64, float64, nil,
// map[string]any and []any, as the apiserver's own decoder gives them. Other
// integer and float types, json.Number, typed maps and slices are converted;
// anything else (a struct, a pointer, a map with other keys) is an error
// naming the object and the field, never a panic further on.
//
// Objects already typed are returned as they are (no copy); a converted one
// is a new object, so the caller's objects are never changed.
func Typed(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for i, o := range objs {
		if o == nil || jsonTyped(o.Object) {
			if out != nil {
				out[i] = o
			}
			continue
		}
		m, err := toJSON(o.Object, "")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", describe(o), err)
		}
		if out == nil {
			out = make([]*unstructured.Unstructured, len(objs))
			copy(out, objs[:i])
		}
		out[i] = &unstructured.Unstructured{Object: m.(map[string]any)}
	}
	if out == nil {
		return objs, nil
	}
	return out, nil
}

// describe names an object for an error, whatever its fields hold.
func describe(o *unstructured.Unstructured) string {
	str := func(m map[string]any, k string) string {
		s, _ := m[k].(string)
		return s
	}
	meta, _ := o.Object["metadata"].(map[string]any)
	name := str(o.Object, "kind") + "/" + str(meta, "name")
	if ns := str(meta, "namespace"); ns != "" {
		name += " in " + ns
	}
	return name
}

// jsonTyped says whether v holds JSON types only.
func jsonTyped(v any) bool {
	switch v := v.(type) {
	case nil, string, bool, int64, float64:
		return true
	case map[string]any:
		for _, e := range v {
			if !jsonTyped(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range v {
			if !jsonTyped(e) {
				return false
			}
		}
		return true
	}
	return false
}

// toJSON converts v to JSON types; at is the field path, for errors.
func toJSON(v any, at string) (any, error) {
	switch v := v.(type) {
	case nil, string, bool, int64, float64:
		return v, nil
	case int:
		return int64(v), nil
	case int8:
		return int64(v), nil
	case int16:
		return int64(v), nil
	case int32:
		return int64(v), nil
	case uint:
		return uintJSON(uint64(v), at)
	case uint8:
		return int64(v), nil
	case uint16:
		return int64(v), nil
	case uint32:
		return int64(v), nil
	case uint64:
		return uintJSON(v, at)
	case float32:
		return float64(v), nil
	case json.Number:
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return n, nil
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a number", fieldName(at), string(v))
		}
		return f, nil
	case map[string]any:
		return mapJSON(v, at)
	case map[any]any:
		return mapJSON(v, at)
	case map[string]string:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = e
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			c, err := toJSON(e, fmt.Sprintf("%s[%d]", at, i))
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case []string:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = e
		}
		return out, nil
	case []map[string]any:
		out := make([]any, len(v))
		for i, e := range v {
			c, err := toJSON(e, fmt.Sprintf("%s[%d]", at, i))
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s holds a value of Go type %T, which has no JSON form", fieldName(at), v)
}

// mapJSON converts a map whose keys must be strings.
func mapJSON[K comparable](v map[K]any, at string) (any, error) {
	out := make(map[string]any, len(v))
	for k, e := range v {
		ks, ok := any(k).(string)
		if !ok {
			return nil, fmt.Errorf("%s: a key of type %T (%v), where JSON has string keys only", fieldName(at), k, k)
		}
		c, err := toJSON(e, at+"."+ks)
		if err != nil {
			return nil, err
		}
		out[ks] = c
	}
	return out, nil
}

func uintJSON(v uint64, at string) (any, error) {
	if v > math.MaxInt64 {
		return nil, fmt.Errorf("%s: %d is larger than the largest integer Kubernetes stores", fieldName(at), v)
	}
	return int64(v), nil
}

func fieldName(at string) string {
	if at == "" {
		return "the object"
	}
	return at
}
