package scope

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/driftback/driftback/drift/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ErrOutOfScope is a read a comparison refused: it is outside the target's
// scope.
var ErrOutOfScope = errors.New("outside this target's scope")

// crdKind is read for the schemas of custom resources, whatever the scope:
// a definition holds no one's data.
var crdKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// scopedReader reads only what a scope covers. A read of a namespace or an
// object outside it is refused with ErrOutOfScope before it reaches the
// cluster; a list across namespaces reads the scope's namespaces, and a list
// of a cluster-scoped kind the scope's objects of that kind.
type scopedReader struct {
	live  object.LiveReader
	scope *Scope

	once       sync.Once
	namespaced map[schema.GroupKind]bool
	kindsErr   error
}

func NewReader(live object.LiveReader, scope *Scope) object.LiveReader {
	if scope == nil || live == nil {
		return live
	}
	return &scopedReader{live: live, scope: scope}
}

func (r *scopedReader) Kinds(ctx context.Context) ([]object.Kind, error) { return r.live.Kinds(ctx) }

// Lacks implements object.Partial for the reader it reads.
func (r *scopedReader) Lacks(gk schema.GroupKind) string { return object.Lacks(r.live, gk) }

// LacksIn implements object.NamespacePartial for the reader it reads.
func (r *scopedReader) LacksIn(gk schema.GroupKind, ns string) string {
	return object.LacksIn(r.live, gk, ns)
}

// isNamespaced says whether a kind is namespaced, as the cluster says.
func (r *scopedReader) isNamespaced(ctx context.Context, gk schema.GroupKind) (bool, error) {
	r.once.Do(func() { r.namespaced, r.kindsErr = object.NamespacedKinds(ctx, r.live, nil) })
	if r.kindsErr != nil {
		return false, r.kindsErr
	}
	ns, known := r.namespaced[gk]
	return !known || ns, nil
}

func (r *scopedReader) Get(ctx context.Context, refs []object.Ref) (map[string]*unstructured.Unstructured, error) {
	for _, ref := range refs {
		if ref.GroupKind() == crdKind {
			continue
		}
		namespaced, err := r.isNamespaced(ctx, ref.GroupKind())
		if err != nil {
			return nil, err
		}
		if !r.scope.covers(ref.GroupKind(), namespaced, ref.Namespace, ref.Name) {
			return nil, fmt.Errorf("%s: %w", ref, ErrOutOfScope)
		}
	}
	return r.live.Get(ctx, refs)
}

func (r *scopedReader) List(ctx context.Context, gk schema.GroupKind, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	if gk == crdKind {
		return r.live.List(ctx, gk, namespace, sel)
	}
	namespaced, err := r.isNamespaced(ctx, gk)
	if err != nil {
		return nil, err
	}
	switch {
	case namespaced && namespace != "":
		if !r.scope.CoversNamespace(namespace) {
			return nil, fmt.Errorf("%s in namespace %s: %w", gk, namespace, ErrOutOfScope)
		}
		return r.live.List(ctx, gk, namespace, sel)
	case namespaced && r.scope.AllNamespaces():
		return r.live.List(ctx, gk, "", sel)
	case namespaced:
		var out []*unstructured.Unstructured
		for _, ns := range slices.Sorted(maps.Keys(r.scope.Namespaces)) {
			objs, err := r.live.List(ctx, gk, ns, sel)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
		return out, nil
	case r.scope.WholeKind(gk):
		return r.live.List(ctx, gk, "", sel)
	}
	// A cluster-scoped kind the scope holds some objects of: those, by name.
	var refs []object.Ref
	for _, ref := range r.scope.ClusterObjects {
		if ref.GroupKind() == gk {
			refs = append(refs, ref)
		}
	}
	if len(refs) == 0 {
		return nil, nil
	}
	got, err := r.live.Get(ctx, refs)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, o := range got {
		if sel == nil || sel.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

// Unknown says why a count or a list is not given: reading it
// means reading outside the target's scope.
const Unknown = "outside this target's scope"
