package drift

import (
	"fmt"
	"sync"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/crddefaults"
)

// crdGroupKind identifies CustomResourceDefinitions.
var crdGroupKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// crdSchemas finds, for the custom resources of one comparison, the
// structural schema the apiserver defaults them with: the CRD in the renders
// when they carry it (a sync applies it first; the head's before the base's),
// else the live CRD, read once by name.
type crdSchemas struct {
	rendered map[schema.GroupKind]*unstructured.Unstructured

	mu   sync.Mutex
	read map[schema.GroupKind]map[string]*structuralschema.Structural
}

func newCRDSchemas(renders ...[]*unstructured.Unstructured) *crdSchemas {
	s := &crdSchemas{rendered: map[schema.GroupKind]*unstructured.Unstructured{}, read: map[schema.GroupKind]map[string]*structuralschema.Structural{}}
	for _, objs := range renders {
		for _, o := range objs {
			if o.GroupVersionKind().GroupKind() != crdGroupKind {
				continue
			}
			gk := definedKind(o)
			if _, ok := s.rendered[gk]; !ok {
				s.rendered[gk] = o
			}
		}
	}
	return s
}

// definedKind is the kind a CRD defines.
func definedKind(crd *unstructured.Unstructured) schema.GroupKind {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	return schema.GroupKind{Group: group, Kind: kind}
}

// crdSchema returns the structural schema of gvk's version, nil when the CRD is
// not known or its version has no schema. The error says why a CRD that
// should be known could not be read.
func (c *comparer) crdSchema(gvk schema.GroupVersionKind) (*structuralschema.Structural, error) {
	s := c.crds
	gk := gvk.GroupKind()
	s.mu.Lock()
	defer s.mu.Unlock()
	if versions, ok := s.read[gk]; ok {
		return versions[gvk.Version], nil
	}
	crd := s.rendered[gk]
	if crd == nil && c.live != nil {
		var err error
		if crd, err = c.liveCRD(gk); err != nil {
			return nil, err
		}
	}
	var versions map[string]*structuralschema.Structural
	if crd != nil {
		var err error
		if versions, err = crddefaults.SchemasFromUnstructured(crd); err != nil {
			return nil, fmt.Errorf("the schema of CustomResourceDefinition %s: %w", crd.GetName(), err)
		}
	}
	s.read[gk] = versions
	return versions[gvk.Version], nil
}

// liveCRD reads the CRD that defines gk: by name when discovery gives the
// kind's plural, from the list of CRDs otherwise (a dump read from disk).
func (c *comparer) liveCRD(gk schema.GroupKind) (*unstructured.Unstructured, error) {
	kinds, err := c.live.Kinds(c.ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range kinds {
		if k.GroupKind() != gk || k.Resource == "" {
			continue
		}
		ref := object.Ref{Group: crdGroupKind.Group, Version: "v1", Kind: crdGroupKind.Kind, Name: k.Resource + "." + gk.Group}
		got, err := c.live.Get(c.ctx, []object.Ref{ref})
		if err != nil {
			return nil, fmt.Errorf("read CustomResourceDefinition %s: %w", ref.Name, err)
		}
		return got[ref.Key()], nil
	}
	crds, err := c.live.List(c.ctx, crdGroupKind, "", nil)
	if err != nil {
		return nil, fmt.Errorf("list CustomResourceDefinitions: %w", err)
	}
	for _, crd := range crds {
		if definedKind(crd) == gk {
			return crd, nil
		}
	}
	return nil, nil
}
