package reconcile

import (
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/reconcile/hide"
	"github.com/driftback/driftback/reconcile/prepare"
)

// secretUse is what a Flux target's objects do with its postBuild
// variables from Secrets.
type secretUse struct {
	// standIns are, for each object (as substituted) whose source uses
	// one, the object substituted with the variables' first and second
	// stand-ins instead: a chart is given those, never the value.
	standIns map[*unstructured.Unstructured][2]*unstructured.Unstructured
	// written are their names as Git writes them, for what is said of
	// them.
	written map[*unstructured.Unstructured]string
	// gitOnly are, by hide.Key, their fields that differ between the two
	// stand-ins: those that take a Secret's value.
	gitOnly map[string][]fieldpath.Path
}

// uses says o's source uses a Secret's variable.
func (s *secretUse) uses(o *unstructured.Unstructured) bool {
	if s == nil {
		return false
	}
	_, ok := s.standIns[o]
	return ok
}

// name is o's name as Git writes it when its source uses a Secret's
// variable, else its name.
func (s *secretUse) name(o *unstructured.Unstructured) string {
	if s == nil {
		return o.GetName()
	}
	if w, ok := s.written[o]; ok {
		return w
	}
	return o.GetName()
}

// standInSecrets substitutes the objects (raw before kustomize-controller's
// substitution, objs after it) whose source uses a Secret's variable with
// the variables' first and second stand-ins, and, unless
// vars.KeepSecretValues, puts the first's value in objs wherever the two
// differ, their identity aside: no object a pull request's target renders
// holds a Secret's value, or anything made of it, where a comparison could
// answer whether a guess is right. Those fields are compared Git against
// Git (gitOnly).
func standInSecrets(raw, objs []*unstructured.Unstructured, uses []bool, ks *unstructured.Unstructured, vars Vars) (*secretUse, error) {
	var at []int
	var sources []*unstructured.Unstructured
	for i, o := range raw {
		if i < len(uses) && uses[i] && i < len(objs) {
			at = append(at, i)
			sources = append(sources, o)
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
					fv.Values[name] = hide.StandInVariable(v, n)
				}
			}
		}
		got, err := prepare.FluxFinish(sources, ks, fv)
		if err != nil {
			return nil, err
		}
		given[n] = got
	}
	out := &secretUse{standIns: map[*unstructured.Unstructured][2]*unstructured.Unstructured{},
		written: map[*unstructured.Unstructured]string{}, gitOnly: map[string][]fieldpath.Path{}}
	for j, i := range at {
		o, first, second := objs[i], given[1][j], given[2][j]
		out.standIns[o] = [2]*unstructured.Unstructured{first, second}
		out.written[o] = raw[i].GetName()
		if vars.KeepSecretValues {
			continue
		}
		var paths []fieldpath.Path
		for _, p := range hide.DifferingFields(first, second) {
			if object.HasPrefix(p, fieldpath.MakePathOrDie("metadata", "name")) || object.HasPrefix(p, fieldpath.MakePathOrDie("metadata", "namespace")) {
				continue // the object is found by its real name
			}
			if v := object.ValueAt(first.Object, p); v != nil {
				if set, err := object.SetValueAt(o.Object, p, v); err == nil {
					o.Object = set.(map[string]any)
				}
			} else {
				object.RemoveValueAt(o.Object, p)
			}
			paths = append(paths, p)
		}
		out.gitOnly[hide.Key(o.GetKind(), o.GetName())] = paths
	}
	return out, nil
}
