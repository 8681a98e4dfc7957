package prepare

import (
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/driftback/driftback/render"
)

// ChartPaths are the charts and values files in the repository that the
// HelmReleases among files (a target's closure) install from a
// GitRepository: a change to them changes what the target applies.
func ChartPaths(tree *render.Tree, files []string) []string {
	var out []string
	for _, f := range files {
		if ext := path.Ext(f); ext != ".yaml" && ext != ".yml" {
			continue
		}
		b, err := tree.ReadFile(f)
		if err != nil || !strings.Contains(string(b), "HelmRelease") {
			continue
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(b)), 4096)
		for {
			var o unstructured.Unstructured
			if err := dec.Decode(&o.Object); err != nil {
				break
			}
			if o.Object == nil || !(o.GetKind() == "HelmRelease" && strings.HasPrefix(o.GetAPIVersion(), "helm.toolkit.fluxcd.io/")) {
				continue
			}
			if kind, _, _ := unstructured.NestedString(o.Object, "spec", "chart", "spec", "sourceRef", "kind"); kind != "GitRepository" {
				continue
			}
			chart, _, _ := unstructured.NestedString(o.Object, "spec", "chart", "spec", "chart")
			if p := render.CleanPath(chart); p != "" && p != "." {
				out = append(out, p)
			}
			vf, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "chart", "spec", "valuesFiles")
			for _, v := range vf {
				if p := render.CleanPath(v); p != "" {
					out = append(out, p)
				}
			}
		}
	}
	return out
}
