package render

import "testing"

// FuzzKustomizationPrecheck: the checks every kustomization file goes
// through before kustomize sees it answer for any content, with a problem
// or a list of references, never a panic.
func FuzzKustomizationPrecheck(f *testing.F) {
	for _, s := range []string{
		"resources:\n- ../base\n- cm.yaml\npatches:\n- path: p.yaml\n",
		"resources:\n- https://example.com/x.yaml\n- github.com/o/r//d?ref=v1\n",
		"helmCharts:\n- name: x\n",
		"resources: {a: b}\n",
		"resources:\n- [nested]\n",
		"a: &a [*a, *a]\nresources: *a\n",
		"components:\n- ../../../../etc\n",
		"configMapGenerator:\n- name: x\n  files: [../../secret]\n",
		"\t- bad\n",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		tree := memTree(map[string]string{"app/kustomization.yaml": content, "app/cm.yaml": "kind: ConfigMap\n"})
		k, err := parseKustomization(tree, "app/kustomization.yaml")
		if err != nil {
			t.Fatalf("the pre-check failed rather than reporting a problem: %v", err)
		}
		for _, p := range k.problems {
			if p.File == "" || p.Reason == "" || p.Message == "" {
				t.Fatalf("a problem without its file, reason or message: %+v", p)
			}
		}
	})
}
