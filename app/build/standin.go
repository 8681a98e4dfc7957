package build

import (
	"maps"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/render/reconciler"
)

// releaseStandIns are, for each HelmRelease among objs (raw before
// kustomize-controller's substitution) whose source uses a Secret's
// postBuild variable, that HelmRelease substituted with the variable's
// first and second stand-ins: its chart is given those, never the
// Secret's value.
func releaseStandIns(raw, objs []*unstructured.Unstructured, uses []bool, ks *unstructured.Unstructured, vars Vars) (map[*unstructured.Unstructured][2]*unstructured.Unstructured, error) {
	var at []int
	var releases []*unstructured.Unstructured
	for i, o := range raw {
		if i < len(uses) && uses[i] && i < len(objs) && isHelmRelease(objs[i]) {
			at = append(at, i)
			releases = append(releases, o)
		}
	}
	if len(at) == 0 {
		return nil, nil
	}
	inline, _, _ := unstructured.NestedStringMap(ks.Object, "spec", "postBuild", "substitute")
	var given [3][]*unstructured.Unstructured
	for n := 1; n <= 2; n++ {
		fv := vars.FluxVariables
		fv.Values = maps.Clone(fv.Values)
		for _, name := range vars.secretNames {
			if v, ok := fv.Values[name]; ok {
				if _, set := inline[name]; !set {
					fv.Values[name] = StandInVariable(v, n)
				}
			}
		}
		got, err := reconciler.FluxFinish(releases, ks, fv)
		if err != nil {
			return nil, err
		}
		given[n] = got
	}
	out := make(map[*unstructured.Unstructured][2]*unstructured.Unstructured, len(at))
	for j, i := range at {
		out[objs[i]] = [2]*unstructured.Unstructured{given[1][j], given[2][j]}
	}
	return out, nil
}

// differingFields are the fields in which a chart's object rendered with
// the first stand-ins differs from the same object rendered with the
// second: the fields that take a Secret's value in the cluster. All of
// the object's own fields when they cannot be told apart.
func differingFields(a, b *unstructured.Unstructured) []fieldpath.Path {
	typed, err := object.Typed([]*unstructured.Unstructured{a, b})
	if err != nil {
		return wholeObject(a)
	}
	fields, err := object.FieldDiff(object.BuiltinTypeConverter(), typed[0], typed[1], nil)
	if err != nil || len(fields) == 0 {
		return wholeObject(a)
	}
	out := make([]fieldpath.Path, len(fields))
	for i, f := range fields {
		out[i] = f.FieldPath()
	}
	return out
}

// wholeObject are every field of o but its identity and status: what is
// compared Git against Git when the fields that take a Secret's value are
// not known.
func wholeObject(o *unstructured.Unstructured) []fieldpath.Path {
	keys := make([]string, 0, len(o.Object))
	for k := range o.Object {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
		default:
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := []fieldpath.Path{fieldpath.MakePathOrDie("metadata", "labels"), fieldpath.MakePathOrDie("metadata", "annotations")}
	for _, k := range keys {
		out = append(out, fieldpath.MakePathOrDie(k))
	}
	return out
}

// GitOnlyFields is the comparison's drift.Options.GitOnly for a build's
// GitOnly: the fields of an object that take a Secret's value in the
// cluster, compared Git against Git. nil when there are none.
func GitOnlyFields(gitOnly map[string][]fieldpath.Path) func(*unstructured.Unstructured) []fieldpath.Path {
	if len(gitOnly) == 0 {
		return nil
	}
	return func(o *unstructured.Unstructured) []fieldpath.Path {
		return gitOnly[substitutedKey(o.GetKind(), o.GetName())]
	}
}
