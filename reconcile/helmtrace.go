package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/render"
)

// traceable is a rendered release, as a write-back traces its values.
type traceable struct {
	release *unstructured.Unstructured // the HelmRelease as rendered
	chart   render.Chart
	values  map[string]any // its spec.values
	objects map[string]*unstructured.Unstructured
}

// chartValues traces drift on a target's Helm releases to their values
// (prgen.ChartValues).
type chartValues struct {
	r        *render.Renderer
	releases []*traceable
}

// Trace finds the one value of the HelmRelease's values that sets obj's
// field at fp: among its values equal to what the chart renders there, the
// one that, changed to live and rendered again, changes that field to live
// and nothing else. The edit is that field of the HelmRelease, which the
// planner writes and verifies as it does any field of the overlay's
// objects.
func (c *chartValues) Trace(ctx context.Context, obj string, fp fieldpath.Path, live any) (prgen.ChartEdit, string, bool) {
	var rel *traceable
	var rendered *unstructured.Unstructured
	for _, t := range c.releases {
		if o, ok := t.objects[obj]; ok {
			rel, rendered = t, o
		}
	}
	if rel == nil {
		return prgen.ChartEdit{}, "", false
	}
	name := "HelmRelease/" + rel.release.GetNamespace() + "/" + rel.release.GetName()
	git := object.ValueAt(rendered.Object, fp)
	candidates := leavesEqual(rel.values, nil, git)
	if len(candidates) == 0 {
		return prgen.ChartEdit{}, fmt.Sprintf("rendered by %s's chart, from no value of its values (the chart's templates or defaults set it)", name), true
	}
	var found [][]string
	for _, path := range candidates {
		ok, err := c.setsOnly(ctx, rel, path, obj, fp, live)
		if err != nil {
			return prgen.ChartEdit{}, fmt.Sprintf("%s's chart could not be rendered again: %v", name, err), true
		}
		if ok {
			found = append(found, path)
		}
	}
	if len(found) != 1 {
		return prgen.ChartEdit{}, fmt.Sprintf("rendered by %s's chart, from %d of its values", name, len(found)), true
	}
	return prgen.ChartEdit{
		Release: object.RefOf(rel.release),
		Path:    fieldpath.MakePathOrDie(append([]any{"spec", "values"}, anySlice(found[0])...)...),
		Was:     git,
	}, "", true
}

// setsOnly says that with the value at path changed to live, the chart
// renders live at fp of obj and nothing else differently.
func (c *chartValues) setsOnly(ctx context.Context, rel *traceable, path []string, obj string, fp fieldpath.Path, live any) (bool, error) {
	values := setLeaf(rel.values, path, live)
	vb, err := json.Marshal(values)
	if err != nil {
		return false, err
	}
	chart := rel.chart
	chart.Values = vb
	out, err := c.r.RenderChart(ctx, chart)
	if err != nil {
		return false, err
	}
	if out.Problem != nil {
		return false, nil // that value cannot take the live one
	}
	placed, err := object.Place(ctx, nil, out.Objects, chart.Release.Namespace)
	if err != nil {
		return false, err
	}
	if len(placed) != len(rel.objects) {
		return false, nil
	}
	for _, o := range placed {
		key := object.RefOf(o).String()
		was, ok := rel.objects[key]
		if !ok {
			return false, nil
		}
		want := was.DeepCopy()
		if key == obj {
			set, err := object.SetValueAt(want.Object, fp, live)
			if err != nil {
				return false, nil
			}
			want.Object = set.(map[string]any)
		}
		o.SetLabels(want.GetLabels()) // the reconciler's labels, added after
		if !object.SameJSON(o.Object, want.Object) {
			return false, nil
		}
	}
	return true, nil
}

// leavesEqual are the paths of the scalar values under m equal to v.
func leavesEqual(m map[string]any, prefix []string, v any) [][]string {
	var out [][]string
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := append(append([]string{}, prefix...), k)
		switch x := m[k].(type) {
		case map[string]any:
			out = append(out, leavesEqual(x, path, v)...)
		case []any:
		default:
			if object.SameJSON(x, v) {
				out = append(out, path)
			}
		}
	}
	return out
}

// setLeaf is a copy of m with the value at path set to v.
func setLeaf(m map[string]any, path []string, v any) map[string]any {
	out := make(map[string]any, len(m))
	for k, x := range m {
		out[k] = x
	}
	if len(path) == 1 {
		out[path[0]] = v
		return out
	}
	inner, _ := out[path[0]].(map[string]any)
	out[path[0]] = setLeaf(inner, path[1:], v)
	return out
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}
