package prgen

import (
	"fmt"
	"path"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/driftback/driftback/prgen/yamledit"
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

// findInGit finds the one document of kind, in apiVersion's group, with
// namespace/name where allInGit looks; of several, driftback does not
// choose.
func (p *planner) findInGit(apiVersion, kind, id string) (file string, doc *yaml.RNode, docs []*yaml.RNode, src []byte, err error) {
	f, err := choose(p.allInGit(apiVersion, kind, id), nil, kind+" "+id)
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
// namespace/name in the repository's YAML files. For a target its
// reconciler builds (Input.Build), only the file the reconciler that
// applies the object takes it from counts (Build.Sources), its namespace
// given there by a kustomization or not: a copy elsewhere (another
// cluster's directory, an archive, a decoy) is not what the cluster reads.
func (p *planner) allInGit(apiVersion, kind, id string) []inGit {
	ns, name, _ := strings.Cut(id, "/")
	matches := func(d *yaml.RNode) bool {
		return d.GetKind() == kind && d.GetName() == name && groupOf(d.GetApiVersion()) == groupOf(apiVersion)
	}
	if b := p.in.Build; b != nil {
		f := b.Sources[kind+"/"+id]
		if f == "" {
			return nil
		}
		src, err := p.read(f)
		if err != nil {
			return nil
		}
		ds, err := yamledit.ReadDocs(src)
		if err != nil {
			return nil
		}
		var in []inGit
		for _, d := range ds {
			if matches(d) {
				in = append(in, inGit{f, d, ds, src})
			}
		}
		return in
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
			if matches(d) && (d.GetNamespace() == "" || d.GetNamespace() == ns) {
				all = append(all, inGit{f, d, ds, b})
			}
		}
	}
	return all
}
