package render

import (
	"path"
	"sort"
)

// Discover returns the overlays of a tree: every directory holding a
// kustomization file that no other kustomization references (as a resource,
// base or component), sorted.
func Discover(t *Tree) []string {
	var dirs []string
	for _, f := range t.Files() {
		if isKustomizationName(path.Base(f)) && findKustomization(t, path.Dir(f)) == f {
			dirs = append(dirs, path.Dir(f))
		}
	}
	referenced := map[string]bool{}
	for _, d := range dirs {
		k, err := t.kustomization(findKustomization(t, d))
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
