package render

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
)

// closure is everything one overlay's build reads from the repository.
type closure struct {
	overlay string
	// files are the existing files the build reads, sorted: kustomization files,
	// resources, patches, generator inputs and the like.
	files []string
	// missing are referenced paths that do not exist; a change that adds one of
	// them affects the overlay too.
	missing []string
	// dirs are the kustomization directories the build enters, the overlay first.
	dirs []string
	// pluginFiles are the generator, transformer and validator configs the
	// build reads, for blaming a plugin error.
	pluginFiles []string
	problems    []*Problem
}

// closureOf walks the kustomizations reachable from overlay and validates every
// reference on the way: nothing may leave the repository, be fetched or go
// through a symlink.
func closureOf(t *Tree, overlay string) *closure {
	c := &closure{overlay: overlay}
	files := map[string]bool{}
	missing := map[string]bool{}
	visited := map[string]bool{}
	problem := func(file string, line int, reason Reason, format string, args ...any) {
		c.problems = append(c.problems, &Problem{Overlay: overlay, File: file, Line: line, Reason: reason,
			Message: fmt.Sprintf(format, args...)})
	}

	var visit func(dir, from string, line int)
	visit = func(dir, from string, line int) {
		if visited[dir] {
			return
		}
		visited[dir] = true
		kf := KustomizationFile(t, dir)
		if kf == "" {
			missing[dir] = true
			switch why := t.Skipped(dir); {
			case why != "":
				problem(from, line, ReasonSymlink, "%s %s", dir, why)
			case from == "" && t.Has(dir):
				problem("", 0, ReasonNotFound, "a file, not a directory with a kustomization")
			case from == "" && !t.isDir(dir):
				problem("", 0, ReasonNotFound, "no such directory")
			case from == "":
				problem("", 0, ReasonNotFound, "no kustomization file (kustomization.yaml, kustomization.yml or Kustomization) in this directory")
			default:
				problem(from, line, ReasonNotFound, "%s: no kustomization.yaml in this directory", dir)
			}
			return
		}
		c.dirs = append(c.dirs, dir)
		files[kf] = true
		k, err := t.kustomization(kf)
		if err != nil {
			problem(kf, 0, ReasonInvalid, "%v", err)
			return
		}
		for _, p := range k.problems {
			q := *p
			q.Overlay = overlay
			c.problems = append(c.problems, &q)
		}
		for _, r := range k.refs {
			switch {
			case t.Has(r.value) && r.kind != refDir:
				files[r.value] = true
				if r.plugin {
					c.pluginFiles = append(c.pluginFiles, r.value)
				}
			case t.isDir(r.value) && r.kind != refFile:
				visit(r.value, kf, r.line)
			case t.Skipped(r.value) != "":
				problem(kf, r.line, ReasonSymlink, "%s entry %q: %s %s", r.field, r.raw, r.value, t.Skipped(r.value))
			default:
				missing[r.value] = true
				problem(kf, r.line, ReasonNotFound, "%s entry %q: %s does not exist in the repository", r.field, r.raw, r.value)
			}
		}
	}
	visit(overlay, "", 0)
	c.files = sortedKeys(files)
	c.missing = sortedKeys(missing)
	return c
}

// touches reports whether a change to path p can change the overlay's render.
// problemsWith are the problems for b: helmCharts is one without EnableHelm.
func (c *closure) problemsWith(b BuildOptions) []*Problem {
	return slices.DeleteFunc(slices.Clone(c.problems), func(p *Problem) bool { return b.EnableHelm && p.Reason == ReasonHelm })
}

func (c *closure) touches(p string) bool {
	if i := sort.SearchStrings(c.files, p); i < len(c.files) && c.files[i] == p {
		return true
	}
	for _, m := range c.missing {
		if p == m || strings.HasPrefix(p, m+"/") {
			return true
		}
	}
	// A kustomization file appearing in a directory the build enters changes it.
	for _, d := range c.dirs {
		if path.Dir(p) == d && IsKustomizationName(path.Base(p)) {
			return true
		}
		// A closure that could not be read whole (a kustomization that does
		// not parse) may read any file below its directories: a change
		// there is its, so that its error is reported, never "nothing".
		if len(c.problems) > 0 && (d == "." || strings.HasPrefix(p, d+"/")) {
			return true
		}
	}
	return false
}

// IsKustomizationName reports whether a file name is one kustomize reads as
// a directory's kustomization.
func IsKustomizationName(n string) bool {
	for _, k := range kustomizationNames {
		if n == k {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
