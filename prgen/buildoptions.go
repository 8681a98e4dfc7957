package prgen

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/prgen/yamledit"
	"github.com/driftback/driftback/render"
)

// Build is the reconciler object whose own fields take part in a target's
// build: a Flux Kustomization (images, patches, targetNamespace, …) or an
// Argo CD Application (its kustomize options). A live change that one of
// those options sets is written into the object's manifest where it is in
// Git: an app-of-apps directory, a flux-system directory.
type Build struct {
	// Object is the reconciler object as the cluster has it.
	Object *unstructured.Unstructured
	// Options is the path of its build options: spec for a Kustomization,
	// spec.source.kustomize for an Application.
	Options []string
	// Tree is the tree the reconciler builds from a tree of Git's with
	// obj's options, and how it renders it.
	Tree func(tree *render.Tree, obj *unstructured.Unstructured) (*render.Tree, render.BuildOptions, error)
	// Finish does to the built objects what the reconciler does after the
	// build when it substitutes no variables (Flux's commonMetadata and
	// owner labels); nil for nothing. With variables, Variables.Substitute
	// does it.
	Finish func(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error)
	// Sources are the files the reconciler that applies the object (its
	// parent Kustomization, its app of apps) takes each object from, by
	// "Kind/namespace/name". The object's manifest, and its variables'
	// ConfigMaps, are written only there: never a copy in another
	// cluster's directory, an archive, or a decoy. Nil when no reconciler
	// driftback renders from the repository applies it: nothing is written
	// into them then.
	Sources map[string]string
}

// Strategies that write into the reconciler object's build options.
const (
	StrategyBuildImages   Strategy = "the reconciler's images"
	StrategyBuildReplicas Strategy = "the reconciler's replicas"
	StrategyBuildPatch    Strategy = "the reconciler's patch that sets it"
)

// optionFields are the build options driftback writes into.
var optionFields = []string{"images", "replicas", "patches"}

// setByOptions says whether the reconciler's build options set the field
// of the index-th object: rendered without them, it comes out otherwise.
// known is false when that cannot be told (without them the target does
// not render, or renders other objects).
func (p *planner) setByOptions(index int, fp fieldpath.Path) (set, known bool) {
	if p.in.Build == nil {
		return false, true
	}
	if p.bare == nil && p.bareErr == nil {
		bare := p.build.DeepCopy()
		for _, f := range optionFields {
			unstructured.RemoveNestedField(bare.Object, append(append([]string{}, p.in.Build.Options...), f)...)
		}
		_, p.bare, _, p.bareErr = p.renderAs(p.edits, p.values, bare)
		if p.bareErr == nil && len(p.bare) != len(p.objs) {
			p.bareErr = fmt.Errorf("without its options the target renders %d objects, not %d", len(p.bare), len(p.objs))
		}
	}
	if p.bareErr != nil || index >= len(p.bare) {
		return false, false
	}
	with, without := p.objs[index], p.bare[index]
	if with.GetKind() != without.GetKind() || with.GetName() != without.GetName() || with.GetNamespace() != without.GetNamespace() {
		return false, false
	}
	return !object.SameJSON(object.ValueAt(with.Object, fp), object.ValueAt(without.Object, fp)), true
}

// buildAttempts are the edits of the reconciler object's build options that
// could set a field: the images entry of a container's image, the replicas
// entry of a workload (Argo CD), an inline patch that sets it. None, and
// why, when its options set nothing of the kind or its manifest is not in
// Git as the cluster has it.
func (p *planner) buildAttempts(obj *unstructured.Unstructured, name string, fp fieldpath.Path, live any) ([]attempt, string) {
	if p.in.Build == nil {
		return nil, ""
	}
	var fields []string
	switch {
	case isImage(fp):
		fields = []string{"images", "patches"}
	case isReplicas(fp) && p.build.GetKind() == "Application":
		fields = []string{"replicas", "patches"}
	default:
		fields = []string{"patches"}
	}
	var set []string
	for _, field := range fields {
		if _, ok, _ := unstructured.NestedFieldNoCopy(p.build.Object, append(append([]string{}, p.in.Build.Options...), field)...); ok {
			set = append(set, field)
		}
	}
	if len(set) == 0 {
		return nil, ""
	}
	file, _, _, doc, why := p.buildManifest()
	if doc == nil {
		return nil, why
	}
	// Each attempt edits the manifest as parsed afresh: one that does not
	// verify leaves nothing behind in the next one's documents.
	fresh := func(field string, index int) (src []byte, docs []*yaml.RNode, list, item *yaml.RNode, err error) {
		_, src, docs, doc, why := p.buildManifest()
		if doc == nil {
			return nil, nil, nil, nil, errors.New(why)
		}
		if list, err = doc.Pipe(yaml.Lookup(append(append([]string{}, p.in.Build.Options...), field)...)); err != nil || list == nil {
			return nil, nil, nil, nil, fmt.Errorf("%s: no %s", file, field)
		}
		if index >= 0 {
			items, err := list.Elements()
			if err != nil || index >= len(items) {
				return nil, nil, nil, nil, fmt.Errorf("%s: no %s entry %d", file, field, index)
			}
			item = items[index]
		}
		return src, docs, list, item, nil
	}
	var out []attempt
	for _, field := range set {
		list, why := p.buildList(file, doc, field)
		if list == nil {
			if why != "" {
				return nil, why
			}
			continue
		}
		items, _ := list.Elements()
		reread := func(content []byte) (*unstructured.Unstructured, error) { return p.buildFrom(content, field) }
		switch field {
		case "images":
			s, ok := live.(string)
			if !ok {
				continue
			}
			out = append(out, attempt{strategy: StrategyBuildImages, file: file, build: reread, edit: func() ([]byte, error) {
				src, docs, list, _, err := fresh(field, -1)
				if err != nil {
					return nil, err
				}
				if p.build.GetKind() == "Application" {
					return editArgoImages(src, docs, list, s)
				}
				entries, err := list.Elements()
				if err != nil {
					return nil, err
				}
				return editImageEntries(src, docs, entries, s)
			}})
		case "replicas":
			for i, it := range items {
				if n, _ := it.GetString("name"); n == name || n == obj.GetName() {
					out = append(out, attempt{strategy: StrategyBuildReplicas, file: file, build: reread, edit: func() ([]byte, error) {
						src, docs, _, item, err := fresh(field, i)
						if err != nil {
							return nil, err
						}
						return yamledit.EditAt(src, docs, item, fieldpath.MakePathOrDie("count"), live)
					}})
				}
			}
		case "patches":
			for i, e := range items {
				if pf := e.Field("patch"); pf == nil || pf.Value.YNode().Kind != yaml.ScalarNode {
					continue
				}
				out = append(out, attempt{strategy: StrategyBuildPatch, file: file, build: reread, edit: func() ([]byte, error) {
					_, _, _, item, err := fresh(field, i)
					if err != nil {
						return nil, err
					}
					pf := item.Field("patch")
					ps := patchSource{file: file, inline: pf.Value.YNode(), content: []byte(pf.Value.YNode().Value), target: targetOf(item)}
					return p.editExistingPatch(ps, obj, name, fp, live)
				}})
			}
		}
	}
	return out, ""
}

// buildManifest finds the reconciler object's manifest in the repository,
// with the accepted edits; no document, and why, when it is not there.
func (p *planner) buildManifest() (file string, src []byte, docs []*yaml.RNode, doc *yaml.RNode, why string) {
	o := p.build
	id := o.GetNamespace() + "/" + o.GetName()
	if p.buildFile == "" {
		f, d, ds, b, err := p.findInGit(o.GetAPIVersion(), o.GetKind(), id)
		switch {
		case err != nil:
			return "", nil, nil, nil, err.Error()
		case d == nil:
			return "", nil, nil, nil, fmt.Sprintf("its %s %s sets it, and its manifest is not in this repository", o.GetKind(), id) + p.unknownParent()
		}
		p.buildFile = f
		return f, b, ds, d, ""
	}
	b, err := p.read(p.buildFile)
	if err != nil {
		return "", nil, nil, nil, err.Error()
	}
	ds, err := yamledit.ReadDocs(b)
	if err != nil {
		return "", nil, nil, nil, fmt.Sprintf("%s: %v", p.buildFile, err)
	}
	if d := p.buildDoc(ds); d != nil {
		return p.buildFile, b, ds, d, ""
	}
	return "", nil, nil, nil, fmt.Sprintf("%s no longer holds %s %s", p.buildFile, o.GetKind(), id)
}

// unknownParent says, for a reason, that no reconciler object driftback
// renders from this repository applies the target's own: a manifest here
// is not known to be the one the cluster reads.
func (p *planner) unknownParent() string {
	if b := p.in.Build; b != nil && b.Sources == nil {
		return " (no Kustomization or Application driftback renders from this repository applies it)"
	}
	return ""
}

// buildDoc is the reconciler object's document among docs.
func (p *planner) buildDoc(docs []*yaml.RNode) *yaml.RNode {
	o := p.build
	for _, d := range docs {
		if d.GetKind() == o.GetKind() && d.GetName() == o.GetName() && (d.GetNamespace() == "" || d.GetNamespace() == o.GetNamespace()) &&
			groupOf(d.GetApiVersion()) == groupOf(o.GetAPIVersion()) {
			return d
		}
	}
	return nil
}

// buildList is the list of one build option in the object's manifest. Git
// must set what the cluster has: else something between them (a parent
// overlay's patch) sets it, and an edit in the manifest would not be what
// the reconciler reads.
func (p *planner) buildList(file string, doc *yaml.RNode, field string) (*yaml.RNode, string) {
	at := append(append([]string{}, p.in.Build.Options...), field)
	n, err := doc.Pipe(yaml.Lookup(at...))
	if err != nil || n == nil || n.YNode().Kind != yaml.SequenceNode {
		return nil, fmt.Sprintf("its %s's %s is not in its manifest %s as a list", p.build.GetKind(), strings.Join(at, "."), file)
	}
	git, err := nodeValue(n)
	if err != nil {
		return nil, fmt.Sprintf("%s: %v", file, err)
	}
	cluster, _, _ := unstructured.NestedFieldNoCopy(p.build.Object, at...)
	if !object.SameJSON(git, cluster) {
		return nil, fmt.Sprintf("its %s's %s in %s is not what the cluster has: something between Git and the cluster sets it", p.build.GetKind(), strings.Join(at, "."), file)
	}
	return n, ""
}

// buildFrom is the reconciler object with the option field as the edited
// manifest content sets it.
func (p *planner) buildFrom(content []byte, field string) (*unstructured.Unstructured, error) {
	docs, err := yamledit.ReadDocs(content)
	if err != nil {
		return nil, err
	}
	doc := p.buildDoc(docs)
	if doc == nil {
		return nil, fmt.Errorf("the edit loses %s %s", p.build.GetKind(), p.build.GetName())
	}
	at := append(append([]string{}, p.in.Build.Options...), field)
	n, err := doc.Pipe(yaml.Lookup(at...))
	if err != nil || n == nil {
		return nil, fmt.Errorf("the edit loses %s", strings.Join(at, "."))
	}
	v, err := nodeValue(n)
	if err != nil {
		return nil, err
	}
	out := p.build.DeepCopy()
	if err := unstructured.SetNestedField(out.Object, v, at...); err != nil {
		return nil, err
	}
	return out, nil
}

// nodeValue is a YAML node as the apiserver's decoder reads it.
func nodeValue(n *yaml.RNode) (any, error) {
	j, err := n.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var v any
	err = utiljson.Unmarshal(j, &v)
	return v, err
}

// editArgoImages rewrites the Application's kustomize image for the live
// image's repository (`name[=newName][:tag][@digest]`, as `kustomize edit
// set image` reads it) with the live tag or digest; nil when none is for
// that repository.
func editArgoImages(src []byte, docs []*yaml.RNode, list *yaml.RNode, live string) ([]byte, error) {
	repo, tag, digest := splitImage(live)
	items, err := list.Elements()
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if it.YNode().Kind != yaml.ScalarNode {
			continue
		}
		entry := it.YNode().Value
		name, image, renamed := strings.Cut(entry, "=")
		if !renamed {
			image = entry
		}
		if base, _, _ := splitImage(image); base != repo {
			continue
		}
		out := repo
		if renamed {
			out = name + "=" + repo
		}
		if digest != "" {
			out += "@" + digest
		} else {
			out += ":" + tag
		}
		if b, ok := yamledit.SpliceScalar(src, it.YNode(), out); ok {
			return b, nil
		}
		if err := yamledit.ReplaceNode(it, out); err != nil {
			return nil, err
		}
		return yamledit.WriteDocs(docs)
	}
	return nil, nil
}
