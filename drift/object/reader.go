package object

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// LiveReader reads the live state of a cluster. Implementations only read:
// get, list and watch.
type LiveReader interface {
	// Get returns the live objects among refs, keyed by Ref.Key; an object that
	// does not exist is absent from the map.
	Get(ctx context.Context, refs []Ref) (map[string]*unstructured.Unstructured, error)
	// List returns the live objects of a kind in a namespace ("" for every
	// namespace, or for a cluster-scoped kind) whose labels match sel (nil
	// matches everything).
	List(ctx context.Context, gk schema.GroupKind, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error)
	// Kinds returns the kinds that can be listed.
	Kinds(ctx context.Context) ([]Kind, error)
}

// SchemaSource gives the structural schema server-side apply merges with.
type SchemaSource interface {
	// TypeConverter returns a converter that knows at least the given kinds.
	TypeConverter(ctx context.Context, gvks []schema.GroupVersionKind) (managedfields.TypeConverter, error)
}

// Kind is a listable kind of the cluster.
type Kind struct {
	schema.GroupVersionKind
	Namespaced bool
	// Status says the kind has a status subresource, whose fields apply never sets.
	Status bool
	// Watch says the kind can be watched.
	Watch bool
	// Resource is the kind's plural resource name ("deployments"); empty
	// when the reader does not know it.
	Resource string
}

// Coverer is a LiveReader that already holds some objects (a Watcher's
// caches): a snapshot reads nothing up front that it covers.
type Coverer interface {
	Covers(gk schema.GroupKind, namespace string) bool
}

// ClusterWideFrom is the number of namespaces from which a kind is listed
// once for the whole cluster rather than once per namespace. Below it, per
// namespace lists cost few requests and never read other tenants' objects.
const ClusterWideFrom = 3

// Partial is a LiveReader that holds some kinds only (a folder of dumps): of
// a kind it lacks nothing is known, not even that there is none.
type Partial interface {
	// Lacks says why nothing is known of a kind's objects ("the dump has
	// no PersistentVolumeClaims"); "" when the reader holds them.
	Lacks(gk schema.GroupKind) string
}

// Lacks says why live knows nothing of gk's objects; "" for a reader that
// holds every kind it serves.
func Lacks(live LiveReader, gk schema.GroupKind) string {
	if p, ok := live.(Partial); ok {
		return p.Lacks(gk)
	}
	return ""
}

// IsPartial says live holds some kinds only (a dump): what it does not
// list may still exist.
func IsPartial(live LiveReader) bool {
	return Lacks(live, schema.GroupKind{Group: "probe.driftback.io", Kind: "NoSuchKind"}) != ""
}

// NamespacePartial is a Partial reader that read namespaced kinds in some
// namespaces only.
type NamespacePartial interface {
	// LacksIn says why nothing is known of gk's objects in namespace;
	// "" when the reader holds them there.
	LacksIn(gk schema.GroupKind, namespace string) string
}

// LacksIn is Lacks for one namespace ("" for a cluster-scoped object).
func LacksIn(live LiveReader, gk schema.GroupKind, namespace string) string {
	if p, ok := live.(NamespacePartial); ok && namespace != "" {
		return p.LacksIn(gk, namespace)
	}
	return Lacks(live, gk)
}
