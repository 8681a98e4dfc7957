package render_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftback/driftback/render"
)

// affectedRepo has two overlays on a shared base, one that also uses a
// component, and an overlay with its own patch and generator input.
var affectedRepo = map[string]any{
	"README.md":                             "# gitops\n",
	"base/web/kustomization.yaml":           "resources:\n- deploy.yaml\n",
	"base/web/deploy.yaml":                  "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n",
	"base/web/unused.yaml":                  "not referenced\n",
	"components/metrics/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n- path: scrape.yaml\n  target:\n    kind: Deployment\n",
	"components/metrics/scrape.yaml":        "- op: add\n  path: /metadata/annotations\n  value: {scrape: \"true\"}\n",
	"envs/dev/kustomization.yaml":           "resources:\n- ../../base/web\n",
	"envs/staging/kustomization.yaml":       "resources:\n- ../../base/web\ncomponents:\n- ../../components/metrics\n",
	"envs/prod/kustomization.yaml":          "resources:\n- ../../base/web\npatches:\n- path: replicas.yaml\nconfigMapGenerator:\n- name: cfg\n  files:\n  - settings=config/settings.ini\n",
	"envs/prod/replicas.yaml":               "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n",
	"envs/prod/config/settings.ini":         "a=1\n",
	"standalone/kustomization.yaml":         "resources:\n- cm.yaml\n",
	"standalone/cm.yaml":                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
	// A kustomization that does not parse (argocd-example-apps had one):
	// what it reads is unknown.
	"unparsed/kustomization.yaml":   "resources: [all.yaml]\npatches: overlays/deploy.yaml\n",
	"unparsed/overlays/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n",
}

func TestDiscover(t *testing.T) {
	repo := newGitRepo(t)
	tr, err := render.GitTree(repo.repo, repo.commit("init", clone(affectedRepo)))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"envs/dev", "envs/prod", "envs/staging", "standalone", "unparsed"}
	if diff := cmp.Diff(want, render.Discover(tr)); diff != "" {
		t.Errorf("Discover (-want +got):\n%s", diff)
	}
}

// TestAffected proves a change selects exactly the overlays whose dependency
// closure, at base or head, contains a changed path.
func TestAffected(t *testing.T) {
	cases := []struct {
		name   string
		change map[string]any // nil value deletes
		want   []string
	}{
		{"a base shared by several overlays", map[string]any{"base/web/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web2\n"},
			[]string{"envs/dev", "envs/prod", "envs/staging"}},
		{"a component", map[string]any{"components/metrics/scrape.yaml": "[]\n"}, []string{"envs/staging"}},
		{"a patch file", map[string]any{"envs/prod/replicas.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 4\n"},
			[]string{"envs/prod"}},
		{"a generator input file", map[string]any{"envs/prod/config/settings.ini": "a=2\n"}, []string{"envs/prod"}},
		{"an unrelated file", map[string]any{"README.md": "# changed\n", "base/web/unused.yaml": "still unused\n"}, nil},
		{"a deleted file", map[string]any{"components/metrics/scrape.yaml": nil}, []string{"envs/staging"}},
		{"a deleted overlay", map[string]any{"standalone": nil}, []string{"standalone"}},
		{"a new overlay", map[string]any{"envs/qa/kustomization.yaml": "resources:\n- ../../base/web\n"}, []string{"envs/qa"}},
		{"a file below a kustomization that does not parse", map[string]any{"unparsed/overlays/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web2\n"},
			[]string{"unparsed"}},
		{"a kustomization that starts using a file", map[string]any{"envs/dev/kustomization.yaml": "resources:\n- ../../base/web\n- ../../standalone/cm.yaml\n"},
			[]string{"envs/dev"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			repo := newGitRepo(t)
			base, err := render.GitTree(repo.repo, repo.commit("base", clone(affectedRepo)))
			if err != nil {
				t.Fatal(err)
			}
			head, err := render.GitTree(repo.repo, repo.commit("head", clone(tc.change)))
			if err != nil {
				t.Fatal(err)
			}
			changed, err := render.Changed(base, head)
			if err != nil {
				t.Fatal(err)
			}
			candidates := union(render.Discover(base), render.Discover(head))
			got := render.Affected(base, head, candidates, changed)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Affected with changed %v (-want +got):\n%s", changed, diff)
			}
		})
	}
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func union(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range append(a, b...) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
