package charts

import (
	"context"
	"fmt"
	"path"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/render"
)

// KustomizeChart is a helmCharts entry of a kustomization that kustomize
// pulls (`helm pull`) when its chartHome lacks it: one with a repo and a
// version.
type KustomizeChart struct {
	Name, Version, Repo string
	// Home is its chartHome as the kustomization writes it ("charts").
	Home string
}

// Dir is where kustomize looks for the chart, under the kustomization's
// directory dir: <chartHome>/<name>-<version>/<name>.
func (c KustomizeChart) Dir(dir string) string {
	return path.Join(dir, c.Home, c.Name+"-"+c.Version, c.Name)
}

// KustomizeCharts are the entries of a kustomization (as a map) that name a
// repository and a version.
func KustomizeCharts(k map[string]any) []KustomizeChart {
	home := "charts"
	if g, ok := k["helmGlobals"].(map[string]any); ok && str(g["chartHome"]) != "" {
		home = str(g["chartHome"])
	}
	var out []KustomizeChart
	entries, _ := k["helmCharts"].([]any)
	if gen, ok := k["helmChartInflationGenerator"].([]any); ok {
		for _, g := range gen {
			if m, ok := g.(map[string]any); ok {
				entries = append(entries, map[string]any{"name": m["chartName"], "version": m["chartVersion"], "repo": m["chartRepoUrl"]})
			}
		}
	}
	for _, e := range entries {
		m, _ := e.(map[string]any)
		c := KustomizeChart{Name: str(m["name"]), Version: str(m["version"]), Repo: str(m["repo"]), Home: home}
		if c.Name != "" && c.Version != "" && c.Repo != "" && !path.IsAbs(home) {
			out = append(out, c)
		}
	}
	return out
}

// Pulled are the charts the kustomizations an overlay reads name with a
// repository and a version, and its tree lacks, fetched by f (nil: none)
// from repositories trust allows, where kustomize's `helm pull` would put
// them (the files, by path in the tree); and why each that is not.
func Pulled(ctx context.Context, tree *render.Tree, overlay string, f *Fetcher, trust *Trust) (map[string][]byte, []string) {
	fetch := func(ctx context.Context, repo string, src Source) (*Chart, string) {
		switch {
		case f == nil:
			return nil, "charts are not fetched here; vendor it in the kustomization's chartHome"
		case !trust.Allows(repo):
			return nil, "the repository is not trusted yet: it is fetched from once the default branch names it, or app.yml's helm.repositories lists it"
		}
		c, err := f.Fetch(ctx, src)
		if err != nil {
			return nil, "it could not be fetched: " + err.Error()
		}
		return c, ""
	}
	files := map[string][]byte{}
	var problems []string
	for _, f := range tree.ClosureFiles(overlay) {
		if !render.IsKustomizationName(path.Base(f)) {
			continue
		}
		b, err := tree.ReadFile(f)
		if err != nil || !strings.Contains(string(b), "helm") {
			continue
		}
		var k map[string]any
		if yaml.Unmarshal(b, &k) != nil {
			continue // kustomize says what is wrong
		}
		for _, c := range KustomizeCharts(k) {
			dir := path.Clean(c.Dir(path.Dir(f)))
			if tree.HasDir(dir) {
				continue // vendored: kustomize pulls nothing
			}
			src := Source{URL: c.Repo, Chart: c.Name, Version: c.Version}
			if strings.HasPrefix(c.Repo, "oci://") {
				src.URL, src.Chart = strings.TrimSuffix(c.Repo, "/")+"/"+c.Name, ""
			}
			chart, why := fetch(ctx, c.Repo, src)
			if why != "" {
				problems = append(problems, fmt.Sprintf("%s: helmCharts %s %s from %s: %s", f, c.Name, c.Version, c.Repo, why))
				continue
			}
			for name, content := range chart.Files {
				files[path.Join(dir, name)] = content
			}
		}
	}
	return files, problems
}
