package prgen

import (
	"fmt"
	"reflect"

	"sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/prgen/yamledit"
)

// StrategyTransformer writes a label or an annotation where the overlay's
// kustomization sets it for all its objects.
const StrategyTransformer Strategy = "the kustomization's labels or annotations"

// transformerEntry is where the overlay's kustomization sets a label or an
// annotation on every object: kustomize applies its labels and annotations
// after patches, so a patch cannot change what it sets.
type transformerEntry struct {
	// field names it as a person reads the kustomization: "labels",
	// "commonLabels", "commonAnnotations".
	field string
	// at is the value's path in the kustomization document.
	at fieldpath.Path
	// selectors says it sets selectors too (commonLabels, labels with
	// includeSelectors).
	selectors bool
}

// transformerSets finds the entry of the overlay's own kustomization that
// sets the label or annotation at fp (.metadata.labels.KEY or
// .metadata.annotations.KEY); ok is false for any other field, or when no
// entry sets it.
func (p *planner) transformerSets(kust string, fp fieldpath.Path) (transformerEntry, bool) {
	if len(fp) != 3 || fp[0].FieldName == nil || *fp[0].FieldName != "metadata" || fp[1].FieldName == nil || fp[2].FieldName == nil {
		return transformerEntry{}, false
	}
	kind, key := *fp[1].FieldName, *fp[2].FieldName
	b, err := p.read(kust)
	if err != nil {
		return transformerEntry{}, false
	}
	docs, err := yamledit.ReadDocs(b)
	if err != nil || len(docs) == 0 {
		return transformerEntry{}, false
	}
	doc := docs[0]
	has := func(path ...string) bool {
		n, err := doc.Pipe(yaml.Lookup(path...))
		return err == nil && n != nil
	}
	switch kind {
	case "annotations":
		if has("commonAnnotations", key) {
			return transformerEntry{field: "commonAnnotations", at: fieldpath.MakePathOrDie("commonAnnotations", key)}, true
		}
	case "labels":
		// The last entry that sets the key wins, as kustomize applies them
		// in order.
		found, entry := false, transformerEntry{}
		if has("commonLabels", key) {
			found, entry = true, transformerEntry{field: "commonLabels", at: fieldpath.MakePathOrDie("commonLabels", key), selectors: true}
		}
		if labels, err := doc.Pipe(yaml.Lookup("labels")); err == nil && labels != nil {
			items, _ := labels.Elements()
			for i, it := range items {
				if n, err := it.Pipe(yaml.Lookup("pairs", key)); err == nil && n != nil {
					sel, _ := it.Pipe(yaml.Lookup("includeSelectors"))
					found, entry = true, transformerEntry{field: "labels", at: fieldpath.MakePathOrDie("labels", i, "pairs", key),
						selectors: sel != nil && sel.YNode().Value == "true"}
				}
			}
		}
		return entry, found
	}
	return transformerEntry{}, false
}

// transformerWhy says why the entry cannot take the live value, or "": it
// sets every object of the overlay, so each object it sets must have the
// same live value (a change to some is not the entry's); and an entry that
// sets selectors would change the selectors of workloads, which Kubernetes
// refuses.
func (p *planner) transformerWhy(kust string, e transformerEntry, fp fieldpath.Path, path string, live, git any) string {
	where := fmt.Sprintf("`%s:` in %s", e.field, kust)
	if e.selectors {
		return "set by " + where + ", which sets selectors too: a new value there changes workloads' selectors, which Kubernetes refuses; change it there by hand with new workloads"
	}
	changed := map[string]bool{}
	for _, ch := range p.in.Drift {
		for _, f := range ch.Fields {
			if f.Path == path && reflect.DeepEqual(f.Live, live) {
				changed[refString(ch)] = true
			}
		}
	}
	var others int
	for _, o := range p.objs {
		if v := object.ValueAt(o.Object, fp); reflect.DeepEqual(v, git) && !changed[objectString(o)] {
			others++
		}
	}
	if others > 0 {
		return fmt.Sprintf("set by %s for every object of the overlay, and %d of them keep Git's value live: change it there to change them all", where, others)
	}
	return ""
}

// editTransformer sets the entry's value in the kustomization.
func (p *planner) editTransformer(kust string, e transformerEntry, live any) ([]byte, error) {
	b, err := p.read(kust)
	if err != nil {
		return nil, err
	}
	docs, err := yamledit.ReadDocs(b)
	if err != nil || len(docs) == 0 {
		return nil, fmt.Errorf("%s: %v", kust, err)
	}
	return yamledit.EditAt(b, docs, docs[0], e.at, live)
}

// setAlike are the objects other than the index-th whose field at fp holds
// Git's value: those an entry that sets every object sets too.
func (p *planner) setAlike(index int, fp fieldpath.Path, git any) []int {
	var out []int
	for j, o := range p.objs {
		if j != index && reflect.DeepEqual(object.ValueAt(o.Object, fp), git) {
			out = append(out, j)
		}
	}
	return out
}
