package livestate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"
	"slices"
	"sort"
	"time"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/tools/cache"
)

// cached is what a watch cache holds of one object. Informers keep what they
// are given; as unstructured maps a small ConfigMap with its managedFields
// takes about 5 KB, nearly all of it the maps' own overhead (every field set
// of managedFields is a map). Here an object watched in full is kept as its
// JSON, decoded again on each read, with the metadata that the drift loop
// scans on every check alongside it in a compact form whose repeated strings
// (namespaces, label keys and values, managers) are interned. A kind watched
// for metadata only keeps that compact form alone.
//
// The object is kept whole, not cut down to the fields Git sets: a pull
// request's head may set a field the default branch does not, and a live
// value there is exactly the change the comment must say the pull request
// overwrites.
type cached struct {
	meta objectMeta
	// body is the object's JSON without its status, its client-side-apply
	// copy, its resourceVersion and its managedFields; fields is its
	// managedFields as JSON. Both are nil for a metadata-only watch.
	body, fields []byte
}

// objectMeta is the metadata a watch keeps of every object: what keys it in
// the informer, what tells a person's object from a controller's, and who
// wrote it and when, without the field sets.
type objectMeta struct {
	name, uid, resourceVersion string
	namespace                  unique.Handle[string]
	generation                 int64
	// created and deleting are Unix seconds (the API's precision), 0 when
	// not set.
	created, deleting   int64
	labels, annotations []pair // sorted by key
	owners              []metav1.OwnerReference
	writers             []writer
}

type pair struct{ key, value unique.Handle[string] }

// writer is one managedFields entry without its field set.
type writer struct {
	manager, operation, apiVersion, subresource unique.Handle[string]
	time                                        int64 // Unix seconds, 0 when not set
	// fields hashes the field set, so that a manager taking over fields
	// within the second of its last write still reads as a change.
	fields uint64
}

func intern(s string) unique.Handle[string] { return unique.Make(s) }

func pairsOf(m map[string]string) []pair {
	if len(m) == 0 {
		return nil
	}
	out := make([]pair, 0, len(m))
	for k, v := range m {
		out = append(out, pair{intern(k), intern(v)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key.Value() < out[j].key.Value() })
	return out
}

func mapOf(ps []pair) map[string]string {
	if ps == nil {
		return nil
	}
	m := make(map[string]string, len(ps))
	for _, p := range ps {
		m[p.key.Value()] = p.value.Value()
	}
	return m
}

func unix(t *metav1.Time) int64 {
	if t == nil || t.IsZero() {
		return 0
	}
	return t.Unix()
}

func timeOf(sec int64) *metav1.Time {
	if sec == 0 {
		return nil
	}
	t := metav1.NewTime(time.Unix(sec, 0))
	return &t
}

func newObjectMeta(m metav1.Object) objectMeta {
	out := objectMeta{
		name: m.GetName(), namespace: intern(m.GetNamespace()), uid: string(m.GetUID()),
		resourceVersion: m.GetResourceVersion(), generation: m.GetGeneration(),
		labels: pairsOf(m.GetLabels()), annotations: pairsOf(m.GetAnnotations()),
		owners: m.GetOwnerReferences(),
	}
	created := m.GetCreationTimestamp()
	out.created, out.deleting = unix(&created), unix(m.GetDeletionTimestamp())
	if mf := m.GetManagedFields(); len(mf) > 0 {
		out.writers = make([]writer, len(mf))
		for i, e := range mf {
			out.writers[i] = writer{manager: intern(e.Manager), operation: intern(string(e.Operation)),
				apiVersion: intern(e.APIVersion), subresource: intern(e.Subresource), time: unix(e.Time)}
			if e.FieldsV1 != nil {
				h := fnv.New64a()
				h.Write(e.FieldsV1.Raw) // a hash.Hash writes without error
				out.writers[i].fields = h.Sum64()
			}
		}
	}
	return out
}

// objectMeta returns the metadata as the API writes it, but for what a watch
// does not keep: managedFields name their managers and times, not their
// fields; finalizers, generateName and the deletion grace period are left
// out, and empty label and annotation maps read as none.
func (m *objectMeta) objectMeta() metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.name, Namespace: m.namespace.Value(), UID: types.UID(m.uid), ResourceVersion: m.resourceVersion,
		Generation: m.generation, Labels: mapOf(m.labels), Annotations: mapOf(m.annotations),
		DeletionTimestamp: timeOf(m.deleting),
	}
	for _, o := range m.owners {
		out.OwnerReferences = append(out.OwnerReferences, *o.DeepCopy())
	}
	if t := timeOf(m.created); t != nil {
		out.CreationTimestamp = *t
	}
	for _, w := range m.writers {
		out.ManagedFields = append(out.ManagedFields, metav1.ManagedFieldsEntry{
			Manager: w.manager.Value(), Operation: metav1.ManagedFieldsOperationType(w.operation.Value()),
			APIVersion: w.apiVersion.Value(), Time: timeOf(w.time), FieldsType: "FieldsV1", Subresource: w.subresource.Value(),
		})
	}
	return out
}

// GetObjectMeta lets the informer key and version an entry (meta.Accessor).
func (c *cached) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: c.meta.name, Namespace: c.meta.namespace.Value(), ResourceVersion: c.meta.resourceVersion}
}

// cacheObject is the transform of a full watch: it drops what comparisons
// never read (the status and the client-side-apply copy of the whole object)
// and encodes the rest. It is idempotent, as informers require.
func cacheObject(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // already cached
	}
	unstructured.RemoveNestedField(u.Object, "status")
	if a := u.GetAnnotations(); a[lastApplied] != "" {
		delete(a, lastApplied)
		u.SetAnnotations(a)
	}
	c := &cached{meta: newObjectMeta(u)}
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		if mf, ok := md["managedFields"]; ok {
			b, err := json.Marshal(mf)
			if err != nil {
				return nil, fmt.Errorf("%s %s/%s: encode managedFields: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
			}
			c.fields = b
			delete(md, "managedFields")
		}
		delete(md, "resourceVersion")
	}
	b, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: encode: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	c.body = b
	return c, nil
}

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// cacheMetadata is the transform of a metadata-only watch: who wrote an
// object but not which fields, and no client-side-apply copy.
func cacheMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil // already cached
	}
	delete(m.Annotations, lastApplied)
	return &cached{meta: newObjectMeta(m)}, nil
}

// object decodes a fully watched object; each call returns a new copy.
func (c *cached) object() (*unstructured.Unstructured, error) {
	if c.body == nil {
		return nil, fmt.Errorf("%s/%s: only the metadata is watched", c.meta.namespace.Value(), c.meta.name)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(c.body); err != nil {
		return nil, fmt.Errorf("%s/%s: decode the cached object: %w", c.meta.namespace.Value(), c.meta.name, err)
	}
	md, ok := u.Object["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		u.Object["metadata"] = md
	}
	if c.meta.resourceVersion != "" {
		md["resourceVersion"] = c.meta.resourceVersion
	}
	if c.fields != nil {
		var mf []any
		if err := utiljson.Unmarshal(c.fields, &mf); err != nil {
			return nil, fmt.Errorf("%s/%s: decode the cached managedFields: %w", c.meta.namespace.Value(), c.meta.name, err)
		}
		md["managedFields"] = mf
	}
	return u, nil
}

func (c *cached) labelSet() labels.Set { return mapOf(c.meta.labels) }

// namespaceIndex indexes entries by namespace without building metadata.
func namespaceIndex(obj any) ([]string, error) {
	if c, ok := obj.(*cached); ok {
		return []string{c.meta.namespace.Value()}, nil
	}
	return cache.MetaNamespaceIndexFunc(obj)
}

// changedByWriter reports whether an update changed more than the status:
// controllers rewrite status all the time (every pod's, every rollout's), and
// waking the drift loop for each would keep it checking without pause.
func changedByWriter(old, cur any) bool {
	a, ok1 := old.(*cached)
	b, ok2 := cur.(*cached)
	if !ok1 || !ok2 {
		return true
	}
	// Kinds without a generation (ConfigMaps, Secrets, Services) change in
	// place: everything but the bookkeeping is compared.
	if !bytes.Equal(a.body, b.body) {
		return true
	}
	if a.meta.generation != b.meta.generation || !slices.Equal(a.meta.labels, b.meta.labels) ||
		!slices.Equal(a.meta.annotations, b.meta.annotations) || !reflect.DeepEqual(a.meta.owners, b.meta.owners) {
		return true
	}
	return !slices.Equal(notStatus(a.meta.writers), notStatus(b.meta.writers))
}

var statusSubresource = intern("status")

// notStatus are the writers of everything but the status.
func notStatus(ws []writer) []writer {
	var out []writer
	for _, w := range ws {
		if w.subresource != statusSubresource {
			out = append(out, w)
		}
	}
	return out
}
