package render

import (
	"path"
	"strings"

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
