package argocd

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// DropHooks removes Argo CD's hooks from the resource files the
// kustomization in dir lists (an Argo CD directory source's, as
// reconcile/prepare writes it), in a render's in-memory copy, and names
// what it removed.
func DropHooks(fs filesys.FileSystem, dir string) ([]string, error) {
	file := path.Join(dir, "kustomization.yaml")
	b, err := fs.ReadFile(file)
	if err != nil {
		return nil, nil // krusty says what is missing
	}
	k, err := yaml.Parse(string(b))
	if err != nil {
		return nil, nil // krusty reports it in its own words
	}
	list, err := k.Pipe(yaml.Lookup("resources"))
	if err != nil || list == nil {
		return nil, nil
	}
	var hooks []string
	for _, n := range list.YNode().Content {
		f := path.Join(dir, n.Value)
		if fs.IsDir(f) {
			continue
		}
		b, err := fs.ReadFile(f)
		if err != nil {
			continue // krusty says what is missing
		}
		nodes, err := (&kio.ByteReader{Reader: bytes.NewReader(b), OmitReaderAnnotations: true}).Read()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", strings.TrimPrefix(f, "/"), err)
		}
		var keep []*yaml.RNode
		for _, o := range nodes {
			if !IsHook(o.GetAnnotations()) {
				keep = append(keep, o)
				continue
			}
			name := o.GetName()
			if name == "" {
				if g, _ := o.Pipe(yaml.Lookup("metadata", "generateName")); g != nil {
					name = yaml.GetValue(g) + "*"
				}
			}
			hooks = append(hooks, o.GetKind()+" "+name)
		}
		if len(keep) == len(nodes) {
			continue
		}
		var out bytes.Buffer
		if err := (kio.ByteWriter{Writer: &out}).Write(keep); err != nil {
			return nil, fmt.Errorf("%s: %w", strings.TrimPrefix(f, "/"), err)
		}
		if err := fs.WriteFile(f, out.Bytes()); err != nil {
			return nil, err
		}
	}
	return hooks, nil
}
