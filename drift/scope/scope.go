// Package scope bounds what a comparison reads from the cluster: a target's
// namespaces, its cluster-scoped kinds and objects, and a reader that refuses
// what lies outside them (a tenant's pull request reads its own namespaces,
// not the cluster).
package scope

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/driftback/driftback/drift/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Scope is what a comparison may read from the cluster: the namespaces of a
// target, and its cluster-scoped objects by name (or, as the operator widens
// it, whole cluster-scoped kinds). An object outside it is compared in Git
// only, so a change cannot bring another team's (or the control plane's)
// live values into a pull request. The zero value covers nothing; a nil
// *Scope covers everything.
type Scope struct {
	// Namespaces are the namespaces whose objects may be read; "*" is all.
	Namespaces map[string]bool
	// ClusterKinds are the cluster-scoped kinds whose objects may all be
	// read; Kind "*" is all.
	ClusterKinds map[schema.GroupKind]bool
	// ClusterObjects are the cluster-scoped objects that may be read, by
	// their Ref's key.
	ClusterObjects map[string]object.Ref
}

// AnyKind and AnyNamespace widen a Scope to everything of their sort.
var (
	AnyKind      = schema.GroupKind{Kind: "*"}
	AnyNamespace = "*"
)

// Of is the scope of a render: the namespaces of its namespaced objects
// (objects without one land in "default") and its cluster-scoped objects.
// Which kinds are namespaced comes from live (nil: the render's CRDs and the
// built-in list).
func Of(ctx context.Context, live object.LiveReader, objs []*unstructured.Unstructured) (*Scope, error) {
	objs, err := object.Typed(objs)
	if err != nil {
		return nil, err
	}
	namespaced, err := object.NamespacedKinds(ctx, live, objs)
	if err != nil {
		return nil, err
	}
	r := &Scope{Namespaces: map[string]bool{}, ClusterKinds: map[schema.GroupKind]bool{}, ClusterObjects: map[string]object.Ref{}}
	for _, o := range objs {
		gk := o.GroupVersionKind().GroupKind()
		if ns, known := namespaced[gk]; known && !ns {
			r.ClusterObjects[clusterKey(gk, o.GetName())] = object.RefOf(o)
			continue
		}
		n := o.GetNamespace()
		if n == "" {
			n = "default"
		}
		r.Namespaces[n] = true
	}
	return r, nil
}

// Widen adds namespaces and cluster-scoped kinds ("Kind.group", "Kind" for
// the core group, "*" for all) to the scope.
func (r *Scope) Widen(namespaces, kinds []string) error {
	if r.Namespaces == nil {
		r.Namespaces = map[string]bool{}
	}
	if r.ClusterKinds == nil {
		r.ClusterKinds = map[schema.GroupKind]bool{}
	}
	for _, n := range namespaces {
		r.Namespaces[n] = true
	}
	for _, k := range kinds {
		gk, err := ParseKind(k)
		if err != nil {
			return err
		}
		r.ClusterKinds[gk] = true
	}
	return nil
}

// ParseKind reads "Kind.group", "Kind" (the core group) or "*".
func ParseKind(s string) (schema.GroupKind, error) {
	s = strings.TrimSpace(s)
	if s == "*" {
		return AnyKind, nil
	}
	gk := schema.ParseGroupKind(s)
	if gk.Kind == "" || strings.ContainsAny(s, " /") {
		return schema.GroupKind{}, fmt.Errorf("%q is not a kind: write Kind.group (ClusterRole.rbac.authorization.k8s.io), Kind for the core group (Namespace), or *", s)
	}
	return gk, nil
}

// covers says whether an object of a kind (namespaced or not) in a namespace
// is Within the scope.
func (r *Scope) covers(gk schema.GroupKind, namespaced bool, namespace, name string) bool {
	if r == nil {
		return true
	}
	if !namespaced {
		_, named := r.ClusterObjects[clusterKey(gk, name)]
		return r.WholeKind(gk) || named
	}
	return r.Namespaces[AnyNamespace] || r.Namespaces[namespace]
}

// WholeKind says every object of a cluster-scoped kind is Within the scope.
func (r *Scope) WholeKind(gk schema.GroupKind) bool {
	return r == nil || r.ClusterKinds[AnyKind] || r.ClusterKinds[gk]
}

// AllNamespaces says every namespace is Within the scope.
func (r *Scope) AllNamespaces() bool { return r == nil || r.Namespaces[AnyNamespace] }

// CoversNamespace says a namespace's objects are Within the scope.
func (r *Scope) CoversNamespace(ns string) bool { return r.AllNamespaces() || r.Namespaces[ns] }

func clusterKey(gk schema.GroupKind, name string) string {
	return object.Ref{Group: gk.Group, Kind: gk.Kind, Name: name}.Key()
}

// Split divides a render into the objects Within the scope and those outside,
// with namespaces defaulted as the apiserver would.
func (r *Scope) Split(ctx context.Context, live object.LiveReader, objs []*unstructured.Unstructured) (in, out []*unstructured.Unstructured, err error) {
	if r == nil {
		return objs, nil, nil
	}
	namespaced, err := object.NamespacedKinds(ctx, live, objs)
	if err != nil {
		return nil, nil, err
	}
	for _, o := range objs {
		if r.Within(o, namespaced) {
			in = append(in, o)
		} else {
			out = append(out, o)
		}
	}
	return in, out, nil
}

func (r *Scope) Within(o *unstructured.Unstructured, namespaced map[schema.GroupKind]bool) bool {
	gk := o.GroupVersionKind().GroupKind()
	ns, known := namespaced[gk]
	n := o.GetNamespace()
	if n == "" {
		n = "default"
	}
	return r.covers(gk, !known || ns, n, o.GetName())
}

// String lists the scope for a log line or a message.
func (r *Scope) String() string {
	if r == nil {
		return "everything"
	}
	var ns, kinds, objects []string
	for n := range r.Namespaces {
		ns = append(ns, n)
	}
	for k := range r.ClusterKinds {
		kinds = append(kinds, k.String())
	}
	for o := range r.ClusterObjects {
		objects = append(objects, o)
	}
	sort.Strings(ns)
	sort.Strings(kinds)
	sort.Strings(objects)
	return fmt.Sprintf("namespaces [%s], cluster-scoped kinds [%s], cluster-scoped objects [%s]", strings.Join(ns, " "), strings.Join(kinds, " "), strings.Join(objects, " "))
}
