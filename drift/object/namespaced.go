package object

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NamespacedKinds says which kinds are namespaced: from the cluster when there is one,
// from CRDs in the renders, and from the built-in list.
func NamespacedKinds(ctx context.Context, live LiveReader, objs []*unstructured.Unstructured) (map[schema.GroupKind]bool, error) {
	namespaced := map[schema.GroupKind]bool{}
	for gk := range clusterScoped {
		namespaced[gk] = false
	}
	for _, gk := range builtinNamespaced() {
		namespaced[gk] = true
	}
	for gk, cluster := range CRDScopes(objs) {
		namespaced[gk] = !cluster
	}
	if live != nil {
		kinds, err := live.Kinds(ctx)
		if err != nil {
			return nil, fmt.Errorf("discover kinds: %w", err)
		}
		for _, k := range kinds {
			namespaced[k.GroupKind()] = k.Namespaced
		}
	}
	return namespaced, nil
}

// builtinNamespaced are the built-in kinds that are not cluster-scoped.
var builtinNamespaced = sync.OnceValue(func() []schema.GroupKind {
	var out []schema.GroupKind
	for gvk := range BuiltinScheme().AllKnownTypes() {
		if _, cluster := clusterScoped[gvk.GroupKind()]; !cluster {
			out = append(out, gvk.GroupKind())
		}
	}
	return out
})

// Place puts a render's objects where the apiserver stores them when a
// reconciler applies them: a namespaced object that names no namespace in
// namespace (Argo CD's destination.namespace; "default" when empty, as the
// apiserver does), a cluster-scoped one without a namespace. Which kinds are
// namespaced comes from live, else the render's CRDs and the built-in kinds.
// A kind the cluster does not serve counts as namespaced, as Argo CD counts
// it; without a cluster (live nil) an object of a kind no one knows keeps the
// namespace it names, or none: a ClusterIssuer is not put in "default".
//
// The objects it moves are copies; the others are returned as they are, and
// nil stays nil. Scope, snapshot and comparison all see the placed objects,
// so an object is never read in one namespace and compared in another.
func Place(ctx context.Context, live LiveReader, objs []*unstructured.Unstructured, namespace string) ([]*unstructured.Unstructured, error) {
	if objs == nil {
		return nil, nil
	}
	objs, err := Typed(objs)
	if err != nil {
		return nil, err
	}
	namespaced, err := NamespacedKinds(ctx, live, objs)
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o
		if ns := PlacedNamespace(o, namespaced, namespace, live != nil); ns != o.GetNamespace() {
			out[i] = o.DeepCopy()
			out[i].SetNamespace(ns)
		}
	}
	return out, nil
}

// PlacedNamespace is the namespace an object is stored in; unknownNamespaced
// says a kind namespaced does not list is namespaced (the cluster was asked).
func PlacedNamespace(o *unstructured.Unstructured, namespaced map[schema.GroupKind]bool, def string, unknownNamespaced bool) string {
	if def == "" {
		def = "default"
	}
	ns, known := namespaced[o.GroupVersionKind().GroupKind()]
	switch {
	case known && !ns:
		return ""
	case !known && !unknownNamespaced:
		return o.GetNamespace()
	case o.GetNamespace() == "":
		return def
	}
	return o.GetNamespace()
}
