package prepare

import (
	"bytes"
	"path"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/driftback/driftback/render"
)

// maxReconcilerFile bounds the files read when looking for reconciler objects:
// a manifest declaring Kustomizations or Applications is small.
const maxReconcilerFile = 1 << 20

// Paths returns the directories holding a kustomization file that a
// Flux Kustomization (spec.path) or an Argo CD Application (spec.source.path,
// spec.sources[].path) written in the tree names, sorted. Such a directory is
// deployed on its own even when another overlay also uses it as a base.
// Files that do not parse, and templates, are skipped: this only adds
// overlays.
func Paths(t *render.Tree) []string {
	return written(t, func(string, bool) bool { return true })
}

// PostBuildPaths returns the directories a Flux Kustomization written in
// the tree builds with postBuild (substitute or substituteFrom): where a
// ${…} in what they render is Flux's to substitute, sorted.
func PostBuildPaths(t *render.Tree) []string {
	return written(t, func(kind string, postBuild bool) bool { return kind == "Kustomization" && postBuild })
}

// written returns the paths named by the reconciler objects written in the
// tree that keep says to count (by kind, and whether it has postBuild).
func written(t *render.Tree, keep func(kind string, postBuild bool) bool) []string {
	seen := map[string]bool{}
	for _, f := range t.Files() {
		if ext := path.Ext(f); ext != ".yaml" && ext != ".yml" {
			continue
		}
		if n, err := t.Size(f); err != nil || n > maxReconcilerFile {
			continue
		}
		b, err := t.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte("kind:")) {
			continue
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var obj struct {
				APIVersion string `yaml:"apiVersion"`
				Kind       string `yaml:"kind"`
				Spec       struct {
					Path      string `yaml:"path"`
					PostBuild any    `yaml:"postBuild"`
					Source    struct {
						Path string `yaml:"path"`
					} `yaml:"source"`
					Sources []struct {
						Path string `yaml:"path"`
					} `yaml:"sources"`
				} `yaml:"spec"`
			}
			if err := dec.Decode(&obj); err != nil {
				break // the end, or a document that is not one of ours
			}
			group := strings.SplitN(obj.APIVersion, "/", 2)[0]
			var paths []string
			switch {
			case obj.Kind == "Kustomization" && group == "kustomize.toolkit.fluxcd.io":
				paths = append(paths, obj.Spec.Path)
			case obj.Kind == "Application" && group == "argoproj.io":
				paths = append(paths, obj.Spec.Source.Path)
				for _, s := range obj.Spec.Sources {
					paths = append(paths, s.Path)
				}
			}
			if !keep(obj.Kind, obj.Spec.PostBuild != nil) {
				continue
			}
			for _, p := range paths {
				if p = render.CleanPath(p); p != "" && t.HasKustomization(p) {
					seen[p] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
