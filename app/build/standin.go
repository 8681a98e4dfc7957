package build

import (
	"github.com/driftback/driftback/app/hide"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
					fv.Values[name] = hide.StandInVariable(v, n)
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
