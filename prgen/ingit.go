package prgen

import (
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/driftback/driftback/prgen/yamledit"
	"github.com/driftback/driftback/render"
)

// maxManifestFile bounds the files searched for an object's manifest.
const maxManifestFile = 1 << 20

// inGit is one document of the repository, with its file's documents and
// text.
type inGit struct {
	file string
	doc  *yaml.RNode
	docs []*yaml.RNode
	src  []byte
}

// findInGit finds the document of kind, in apiVersion's group, with
// namespace/name in the repository's YAML files (a document without a
// namespace takes the one its kustomization gives). Where several have that
// name (a Kustomization flux-system/apps per cluster directory), the one
// prefer chooses; if it chooses none or several, driftback does not.
func (p *planner) findInGit(apiVersion, kind, id string, prefer func(*yaml.RNode) bool) (file string, doc *yaml.RNode, docs []*yaml.RNode, src []byte, err error) {
	f, err := choose(p.allInGit(apiVersion, kind, id), prefer, kind+" "+id)
	if err != nil || f == nil {
		return "", nil, nil, nil, err
	}
	return f.file, f.doc, f.docs, f.src, nil
}

// choose is the one of all, or of those prefer chooses; nil when all is
// empty.
func choose(all []inGit, prefer func(*yaml.RNode) bool, what string) (*inGit, error) {
	switch len(all) {
	case 0:
		return nil, nil
	case 1:
		return &all[0], nil
	}
	var preferred []inGit
	for _, f := range all {
		if prefer != nil && prefer(f.doc) {
			preferred = append(preferred, f)
		}
	}
	if len(preferred) == 1 {
		return &preferred[0], nil
	}
	var files []string
	for _, f := range all {
		files = append(files, f.file)
	}
	return nil, fmt.Errorf("%s is in Git %d times (%s): driftback does not choose", what, len(all), strings.Join(files, ", "))
}

// allInGit are the documents of kind, in apiVersion's group, with
// namespace/name in the repository's YAML files; the one of the file its
// reconciler applies it from, when that is known (Build.Sources) and holds
// it once, its namespace given there by a kustomization or not.
func (p *planner) allInGit(apiVersion, kind, id string) []inGit {
	ns, name, _ := strings.Cut(id, "/")
	if b := p.in.Build; b != nil && b.Sources[kind+"/"+id] != "" {
		f := b.Sources[kind+"/"+id]
		if src, err := p.read(f); err == nil {
			if ds, err := yamledit.ReadDocs(src); err == nil {
				var in []inGit
				for _, d := range ds {
					if d.GetKind() == kind && d.GetName() == name && groupOf(d.GetApiVersion()) == groupOf(apiVersion) {
						in = append(in, inGit{f, d, ds, src})
					}
				}
				if len(in) == 1 {
					return in
				}
			}
		}
	}
	var all []inGit
	for _, f := range p.in.Tree.Files() {
		if ext := path.Ext(f); ext != ".yaml" && ext != ".yml" {
			continue
		}
		if n, err := p.in.Tree.Size(f); err != nil || n > maxManifestFile {
			continue
		}
		b, err := p.read(f)
		if err != nil || !strings.Contains(string(b), name) {
			continue
		}
		ds, err := yamledit.ReadDocs(b)
		if err != nil {
			continue
		}
		for _, d := range ds {
			if d.GetKind() == kind && d.GetName() == name && (d.GetNamespace() == "" || d.GetNamespace() == ns) && groupOf(d.GetApiVersion()) == groupOf(apiVersion) {
				all = append(all, inGit{f, d, ds, b})
			}
		}
	}
	return all
}

// sameSource chooses, among documents of a reconciler object's name, the
// one that builds what the cluster's builds: the same path, variables and
// build options (one Kustomization flux-system/apps per cluster directory,
// sharing a path with other variables), or the same repository, path,
// kustomize options and destination (Argo CD).
func sameSource(obj *unstructured.Unstructured) func(*yaml.RNode) bool {
	want := buildIdentity(obj.Object)
	return func(d *yaml.RNode) bool {
		v, err := nodeValue(d)
		m, ok := v.(map[string]any)
		return err == nil && ok && sameJSON(buildIdentity(m), want)
	}
}

// buildIdentity is what of a reconciler object decides what it builds.
func buildIdentity(m map[string]any) map[string]any {
	out := map[string]any{}
	for _, f := range [][]string{{"spec", "postBuild"}, {"spec", "images"}, {"spec", "patches"}, {"spec", "targetNamespace"},
		{"spec", "source", "kustomize"}, {"spec", "destination"}} {
		if v, ok, _ := unstructured.NestedFieldNoCopy(m, f...); ok {
			out[strings.Join(f, ".")] = v
		}
	}
	if p, ok, _ := unstructured.NestedString(m, "spec", "path"); ok {
		out["spec.path"] = render.CleanPath(p)
	}
	if p, ok, _ := unstructured.NestedString(m, "spec", "source", "path"); ok {
		out["spec.source.path"] = render.CleanPath(p)
	}
	if r, ok, _ := unstructured.NestedString(m, "spec", "source", "repoURL"); ok {
		out["spec.source.repoURL"] = strings.TrimSuffix(r, ".git")
	}
	return out
}
