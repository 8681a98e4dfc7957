// Package removal says which change of Git takes an object out of an
// overlay's render: its file deleted, its document removed from a file, a
// file or directory dropped from a kustomization's resources, the overlay
// itself removed. It reads the two trees only (the files each side's build
// reads), never the render: what it finds is where a reviewer looks.
package removal

import (
	"bytes"
	"path"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/render"
)

// generic are the reasons drift gives an object that leaves without a
// successor; they are the ones this package makes precise.
var generic = map[string]bool{
	drift.WhyNotRendered:     true,
	drift.WhyNothingRendered: true,
}

// Explain makes the reasons of t's deletions precise from the trees the
// overlay was rendered from: the file and the change of Git that removes
// each object, where one is found. Objects whose reason names their
// successor (a new namespace, a generated name) keep it.
func Explain(base, head *render.Tree, overlay string, t *drift.Target) {
	if base == nil || head == nil || t == nil {
		return
	}
	var e *explainer
	for _, cs := range [][]drift.Change{t.Changes, t.PR} {
		for i := range cs {
			c := &cs[i]
			if (c.Action != drift.ActionDelete && c.Action != drift.ActionKeep) || !generic[c.Why] {
				continue
			}
			if e == nil {
				e = newExplainer(base, head, overlay)
			}
			if why := e.why(c.Kind, c.Namespace, c.Name); why != "" {
				c.Why = why
			}
		}
	}
}

// explainer indexes the documents of the files the base's build reads.
type explainer struct {
	base, head *render.Tree
	overlay    string
	// gone says the head has no overlay directory where the base has one;
	// kustomization names the base's kustomization the head removes.
	gone          bool
	kustomization string
	// files are the base's build files by object: "Kind/name" → the
	// files and the namespace each document names ("" for none).
	files map[string][]docIn
	// inHead are the files the head's build reads.
	inHead map[string]bool
	// changedKust are the kustomizations of the base's build that the
	// head changes or removes.
	changedKust []string
}

func newExplainer(base, head *render.Tree, overlay string) *explainer {
	e := &explainer{base: base, head: head, overlay: overlay, files: map[string][]docIn{}, inHead: map[string]bool{}}
	e.gone = base.HasDir(overlay) && !head.HasDir(overlay)
	if !head.HasKustomization(overlay) {
		e.kustomization = render.KustomizationFile(base, overlay)
	}
	if !e.gone {
		for _, f := range head.ClosureFiles(overlay) {
			e.inHead[f] = true
		}
	}
	for _, f := range base.ClosureFiles(overlay) {
		if render.IsKustomizationName(path.Base(f)) {
			if !sameFile(base, head, f) {
				e.changedKust = append(e.changedKust, f)
			}
			continue
		}
		if !isYAML(f) {
			continue
		}
		b, err := base.ReadFile(f)
		if err != nil {
			continue
		}
		for _, d := range documents(b) {
			k := d.Kind + "/" + d.Metadata.Name
			e.files[k] = append(e.files[k], docIn{file: f, namespace: d.Metadata.Namespace})
		}
	}
	return e
}

// why says which change removes the object, or "" when none is found.
func (e *explainer) why(kind, namespace, name string) string {
	if e.gone {
		return "its overlay " + e.overlay + " is removed at head"
	}
	for _, in := range e.files[kind+"/"+name] {
		if in.namespace != "" && in.namespace != namespace {
			continue // another object of that name
		}
		f := in.file
		switch {
		case !e.head.Has(f):
			return "its file " + e.rel(f) + " is deleted at head"
		case !holds(e.head, f, kind, name):
			return "removed from " + e.rel(f) + " at head"
		case !e.inHead[f]:
			if len(e.changedKust) > 0 {
				return e.rel(f) + " is no longer in the overlay (the resources of " + e.rel(e.changedKust[0]) + " changed)"
			}
			return e.rel(f) + " is no longer in the overlay"
		}
	}
	if e.kustomization != "" {
		// A generated object, or one whose file is still there.
		return e.rel(e.kustomization) + " is removed from the overlay at head"
	}
	return ""
}

// rel names a file as the overlay's section reads it: relative to the
// overlay when under it, else from the repository's root.
func (e *explainer) rel(f string) string {
	if r, ok := strings.CutPrefix(f, e.overlay+"/"); ok && e.overlay != "." && e.overlay != "" {
		return r
	}
	return f
}

// holds says whether a tree's file holds a document of the kind and name.
func holds(t *render.Tree, file, kind, name string) bool {
	b, err := t.ReadFile(file)
	if err != nil {
		return false
	}
	for _, d := range documents(b) {
		if d.Kind == kind && d.Metadata.Name == name {
			return true
		}
	}
	return false
}

// docIn is a document of a file, by the namespace it names.
type docIn struct {
	file, namespace string
}

type document struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// documents reads the kind and name of each document of a YAML stream;
// documents that do not parse are skipped (the render says why).
func documents(b []byte) []document {
	var out []document
	for _, part := range bytes.Split(append([]byte("\n"), b...), []byte("\n---")) {
		var d document
		if err := yaml.Unmarshal(part, &d); err == nil && d.Kind != "" && d.Metadata.Name != "" {
			out = append(out, d)
		}
	}
	return out
}

func isYAML(f string) bool {
	return strings.HasSuffix(f, ".yaml") || strings.HasSuffix(f, ".yml") || strings.HasSuffix(f, ".json")
}

// sameFile says whether both trees hold f with the same content.
func sameFile(a, b *render.Tree, f string) bool {
	if !b.Has(f) {
		return false
	}
	ha, errA := a.Hash(f)
	hb, errB := b.Hash(f)
	return errA == nil && errB == nil && ha == hb
}
