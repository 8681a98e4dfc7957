package render

import (
	"bytes"
	"path"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sort"
)

// Discover returns the overlays of a tree: every directory holding a
// kustomization file that no other kustomization references (as a resource,
// base or component), sorted.
func Discover(t *Tree) []string {
	var dirs []string
	for _, f := range t.Files() {
		if IsKustomizationName(path.Base(f)) && KustomizationFile(t, path.Dir(f)) == f {
			dirs = append(dirs, path.Dir(f))
		}
	}
	referenced := map[string]bool{}
	for _, d := range dirs {
		k, err := t.kustomization(KustomizationFile(t, d))
		if err != nil {
			continue // unreadable: it cannot reference anything
		}
		for _, r := range k.refs {
			if r.kind != refFile && r.value != d {
				referenced[r.value] = true
			}
		}
	}
	var out []string
	for _, d := range dirs {
		if !referenced[d] {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// Affected returns the overlays among candidates whose dependency closure, at
// base or at head, contains one of the changed paths. Either tree may be nil
// (an overlay that exists on one side only). The order of candidates is kept.
func Affected(base, head *Tree, candidates, changed []string) []string {
	var out []string
	for _, o := range candidates {
		hit := false
		for _, t := range []*Tree{base, head} {
			if t == nil || hit {
				continue
			}
			c := t.closure(o)
			for _, p := range changed {
				if c.touches(p) {
					hit = true
					break
				}
			}
		}
		if hit {
			out = append(out, o)
		}
	}
	return out
}

// maxReconcilerFile bounds the files read when looking for reconciler objects:
// a manifest declaring Kustomizations or Applications is small.
const maxReconcilerFile = 1 << 20

// ReconcilerPaths returns the directories holding a kustomization file that a
// Flux Kustomization (spec.path) or an Argo CD Application (spec.source.path,
// spec.sources[].path) written in the tree names, sorted. Such a directory is
// deployed on its own even when another overlay also uses it as a base.
// Files that do not parse, and templates, are skipped: this only adds
// overlays.
func ReconcilerPaths(t *Tree) []string {
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
					Path   string `yaml:"path"`
					Source struct {
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
			for _, p := range paths {
				if p = CleanPath(p); p != "" && t.HasKustomization(p) {
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

// Bases returns the directories among changedDirs' kustomizations that are
// used by another kustomization and are not in overlays, with the overlays of
// overlays that use them: what a default comparison compares only through
// another overlay. A Component is never deployed on its own and is left out,
// and so is a kustomization below the directory of the overlay using it (a
// part of that overlay).
func Bases(t *Tree, overlays []string, changed []string) map[string][]string {
	in := map[string]bool{}
	for _, o := range overlays {
		in[o] = true
	}
	out := map[string][]string{}
	for _, f := range t.Files() {
		if !IsKustomizationName(path.Base(f)) || KustomizationFile(t, path.Dir(f)) != f {
			continue
		}
		d := path.Dir(f)
		if in[d] || len(overlays) == 0 {
			continue
		}
		if k, err := t.kustomization(f); err != nil || k.kind == "Component" {
			continue
		}
		if len(Affected(t, nil, []string{d}, changed)) == 0 {
			continue
		}
		for _, o := range overlays {
			if o == d || strings.HasPrefix(d, o+"/") || o == "." {
				continue // a part of the overlay's own directory
			}
			for _, e := range t.closure(o).dirs {
				if e == d {
					out[d] = append(out[d], o)
					break
				}
			}
		}
	}
	return out
}
