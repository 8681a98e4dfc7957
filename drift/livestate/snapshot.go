package livestate

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/driftback/driftback/drift/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// Snapshot is a LiveReader for one round of comparisons (the targets of one
// pull request, the overlays of one `driftback diff`). NewSnapshot plans the
// reads the renders need and makes them up front: one list of a kind for the
// whole cluster when its objects are spread over several namespaces (one
// list per namespace when the credentials do not allow that), one list per
// namespace otherwise, one get for a lone object. Gets and lists are then
// served from what was read; a read it did not plan for goes to the cluster
// once and is kept. Objects returned are copies.
type Snapshot struct {
	live object.LiveReader

	mu sync.Mutex
	// read holds the objects of each kind read whole, by namespace ("" for a
	// cluster-scoped kind); a kind listed cluster-wide is under allNamespaces.
	read  map[schema.GroupKind]map[string][]*unstructured.Unstructured
	lists map[string][]*unstructured.Unstructured // other lists, by kind, namespace and selector
	gets  map[string]*unstructured.Unstructured   // lone gets by Ref.Key; nil: not found
	// refused holds, by kind and namespace, the error of a read the
	// credentials refused: a later read fails with it.
	refused map[schema.GroupKind]map[string]error
	// clusterScoped kinds are found by name whatever namespace a render gave.
	clusterScoped map[schema.GroupKind]bool
	// preferred is the version a list of each kind returns; a ref at another
	// version is read on its own, at its version.
	preferred map[schema.GroupKind]string
	stats     SnapshotStats
}

// SnapshotStats say how a snapshot read the cluster.
type SnapshotStats struct {
	// ClusterLists are lists of a kind over every namespace.
	ClusterLists int
	// NamespaceLists are lists of a kind in one namespace (or of a
	// cluster-scoped kind), planned or not.
	NamespaceLists int
	// Gets are reads of single objects.
	Gets int
	// Forbidden are kinds whose cluster-wide list was refused and read per
	// namespace instead.
	Forbidden int
}

// allNamespaces marks a kind listed over every namespace.
const allNamespaces = "\x00all"

// schemaPrefetcher reads the schemas of kinds ahead of a comparison
// (ClusterReader).
type schemaPrefetcher interface {
	PrefetchSchemas(ctx context.Context, gvks []schema.GroupVersionKind)
}

// NewSnapshot reads, with as few requests as it can, the live objects of
// objs (the renders of every target that will be compared with it, base and
// head). A namespaced object without a namespace is looked for in "default".
func NewSnapshot(ctx context.Context, live object.LiveReader, objs []*unstructured.Unstructured) (*Snapshot, error) {
	objs, err := object.Typed(objs)
	if err != nil {
		return nil, err
	}
	// The schemas the comparisons will ask for are read while the live
	// objects are.
	if p, ok := live.(schemaPrefetcher); ok {
		var gvks []schema.GroupVersionKind
		seen := map[schema.GroupVersionKind]bool{}
		for _, o := range objs {
			if gvk := o.GroupVersionKind(); !seen[gvk] {
				seen[gvk] = true
				gvks = append(gvks, gvk)
			}
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.PrefetchSchemas(ctx, gvks)
		}()
		defer func() { <-done }()
	}
	s := &Snapshot{
		live:    live,
		read:    map[schema.GroupKind]map[string][]*unstructured.Unstructured{},
		lists:   map[string][]*unstructured.Unstructured{},
		gets:    map[string]*unstructured.Unstructured{},
		refused: map[schema.GroupKind]map[string]error{},
	}
	scopes, err := object.NamespacedKinds(ctx, live, objs)
	if err != nil {
		return nil, err
	}
	s.clusterScoped = map[schema.GroupKind]bool{}
	for gk, namespaced := range scopes {
		if !namespaced {
			s.clusterScoped[gk] = true
		}
	}
	s.preferred = map[schema.GroupKind]string{}
	if kinds, err := live.Kinds(ctx); err == nil {
		for _, k := range kinds {
			s.preferred[k.GroupKind()] = k.Version
		}
	}
	type plan struct {
		ref        object.Ref // a lone object's
		namespaces map[string]int
		// optional reads are not the renders' own objects (always listed,
		// never read as a lone object): a failure to read them fails only
		// the comparisons that ask for them.
		optional bool
	}
	plans := map[schema.GroupKind]*plan{}
	for _, o := range objs {
		ref := object.RefOf(o)
		gk := ref.GroupKind()
		if !s.listable(ref) {
			continue // read on its own, at its version, when asked for
		}
		namespaced, known := scopes[gk]
		switch {
		case known && !namespaced:
			ref.Namespace = ""
		case ref.Namespace == "":
			ref.Namespace = "default"
		}
		p := plans[gk]
		if p == nil {
			p = &plan{ref: ref, namespaces: map[string]int{}}
			plans[gk] = p
		}
		p.namespaces[ref.Namespace]++
	}
	// Who autoscales the workloads is read with them: the autoscalers of
	// every namespace where Git gives a workload replicas.
	for _, o := range objs {
		if _, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas"); !ok || o.GetNamespace() == "" {
			continue
		}
		for _, gk := range object.AutoscalerKinds {
			if _, served := s.preferred[gk]; !served {
				continue
			}
			p := plans[gk]
			if p == nil {
				p = &plan{namespaces: map[string]int{}, optional: true}
				plans[gk] = p
			}
			p.namespaces[o.GetNamespace()]++
		}
	}
	// So are the admission rules they meet: the quotas and limit ranges of
	// their namespaces, the namespaces' labels, the cluster's policies.
	optional := func(gk schema.GroupKind, ns string) {
		if _, served := s.preferred[gk]; !served {
			return
		}
		p := plans[gk]
		if p == nil {
			p = &plan{namespaces: map[string]int{}, optional: true}
			plans[gk] = p
		}
		p.namespaces[ns]++
	}
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && !s.clusterScoped[o.GroupVersionKind().GroupKind()] {
			for _, gk := range object.AdmissionNamespacedKinds {
				optional(gk, ns)
			}
		}
	}
	if len(objs) > 0 {
		for _, gk := range object.AdmissionClusterKinds {
			if p := plans[gk]; p == nil || p.optional {
				optional(gk, "")
			}
		}
	}
	gks := make([]schema.GroupKind, 0, len(plans))
	for gk := range plans {
		gks = append(gks, gk)
	}
	sort.Slice(gks, func(i, j int) bool { return gks[i].String() < gks[j].String() })
	coverer, _ := live.(object.Coverer)
	for _, gk := range gks {
		p := plans[gk]
		if coverer != nil && coversAll(coverer, gk, p.namespaces) {
			continue // served from the caches as they are asked for
		}
		if !p.optional && len(p.namespaces) == 1 && p.namespaces[p.ref.Namespace] == 1 {
			if _, err := s.Get(ctx, []object.Ref{p.ref}); err != nil {
				return nil, err
			}
			continue
		}
		if len(p.namespaces) >= object.ClusterWideFrom {
			err := s.readWhole(ctx, gk, allNamespaces)
			if err == nil {
				continue
			}
			switch {
			case p.optional:
			case !apierrors.IsForbidden(err):
				return nil, err
			default:
				s.stats.Forbidden++
			}
		}
		nss := make([]string, 0, len(p.namespaces))
		for ns := range p.namespaces {
			nss = append(nss, ns)
		}
		sort.Strings(nss)
		for _, ns := range nss {
			err := s.readWhole(ctx, gk, ns)
			if p.optional {
				if apierrors.IsForbidden(err) {
					s.unreadable(gk, ns, err) // credentials without it: asked no more, and said
				}
				continue
			}
			if apierrors.IsForbidden(err) {
				// May get but not list (resourceNames): its objects are
				// read one by one when asked for.
				s.stats.Forbidden++
				continue
			}
			if err != nil && !p.optional {
				return nil, err
			}
		}
	}
	return s, nil
}

// listable says whether a list of the ref's kind returns it at the version
// it asks for.
func (s *Snapshot) listable(ref object.Ref) bool {
	v, ok := s.preferred[ref.GroupKind()]
	return !ok || ref.Version == "" || ref.Version == v
}

func coversAll(c object.Coverer, gk schema.GroupKind, namespaces map[string]int) bool {
	for ns := range namespaces {
		if !c.Covers(gk, ns) {
			return false
		}
	}
	return true
}

// readWhole lists every object of a kind in a namespace, or in all of them.
func (s *Snapshot) readWhole(ctx context.Context, gk schema.GroupKind, ns string) error {
	listNS := ns
	if ns == allNamespaces {
		listNS = ""
	}
	objs, err := s.live.List(ctx, gk, listNS, nil)
	if err != nil {
		if ns == allNamespaces {
			return fmt.Errorf("list %s in every namespace: %w", gk, err)
		}
		return fmt.Errorf("list %s in %q: %w", gk, ns, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ns == allNamespaces {
		s.stats.ClusterLists++
	} else {
		s.stats.NamespaceLists++
	}
	byNS := s.read[gk]
	if byNS == nil {
		byNS = map[string][]*unstructured.Unstructured{}
		s.read[gk] = byNS
	}
	if ns == allNamespaces {
		byNS[allNamespaces] = nil
		for _, o := range objs {
			byNS[o.GetNamespace()] = append(byNS[o.GetNamespace()], o)
		}
		return nil
	}
	byNS[ns] = objs
	return nil
}

// unreadable records that a kind cannot be read in ns: a read of it there
// fails with err, never reads as empty.
func (s *Snapshot) unreadable(gk schema.GroupKind, ns string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused[gk] == nil {
		s.refused[gk] = map[string]error{}
	}
	s.refused[gk][ns] = err
}

// whole returns the objects of a kind in ns ("" for every namespace) when
// the snapshot read them all.
func (s *Snapshot) whole(gk schema.GroupKind, ns string) ([]*unstructured.Unstructured, bool) {
	byNS, ok := s.read[gk]
	if !ok {
		return nil, false
	}
	if _, all := byNS[allNamespaces]; all {
		if ns != "" {
			return byNS[ns], true
		}
		var out []*unstructured.Unstructured
		for _, objs := range byNS {
			out = append(out, objs...)
		}
		return out, true
	}
	objs, ok := byNS[ns]
	return objs, ok
}

// Stats says how many requests of each sort the snapshot made.
func (s *Snapshot) Stats() SnapshotStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Get implements LiveReader.
func (s *Snapshot) Get(ctx context.Context, refs []object.Ref) (map[string]*unstructured.Unstructured, error) {
	out := map[string]*unstructured.Unstructured{}
	var missing []object.Ref
	s.mu.Lock()
	for _, ref := range refs {
		ns := ref.Namespace
		if s.clusterScoped[ref.GroupKind()] {
			ns = ""
		}
		if err := s.refused[ref.GroupKind()][ns]; err != nil {
			s.mu.Unlock()
			return nil, err
		}
		if objs, ok := s.whole(ref.GroupKind(), ns); ok && s.listable(ref) {
			for _, o := range objs {
				if o.GetName() == ref.Name && (ns == "" || o.GetNamespace() == ns) {
					out[ref.Key()] = o.DeepCopy()
					break
				}
			}
			continue
		}
		if o, ok := s.gets[ref.Key()]; ok {
			if o != nil {
				out[ref.Key()] = o.DeepCopy()
			}
			continue
		}
		missing = append(missing, ref)
	}
	s.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	got, err := s.live.Get(ctx, missing)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Gets += len(missing)
	for _, ref := range missing {
		o := got[ref.Key()]
		s.gets[ref.Key()] = o
		if o != nil {
			out[ref.Key()] = o.DeepCopy()
		}
	}
	return out, nil
}

// List implements LiveReader.
func (s *Snapshot) List(ctx context.Context, gk schema.GroupKind, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	s.mu.Lock()
	if err := s.refused[gk][namespace]; err != nil {
		s.mu.Unlock()
		return nil, err
	}
	objs, ok := s.whole(gk, namespace)
	if !ok {
		key := gk.String() + "\x00" + namespace + "\x00"
		if sel != nil {
			key += sel.String()
		}
		objs, ok = s.lists[key]
		if !ok {
			s.mu.Unlock()
			listed, err := s.live.List(ctx, gk, namespace, sel)
			if err != nil {
				return nil, err
			}
			s.mu.Lock()
			s.lists[key] = listed
			if namespace == "" {
				s.stats.ClusterLists++
			} else {
				s.stats.NamespaceLists++
			}
			objs = listed
		}
	}
	s.mu.Unlock()
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if sel == nil || sel.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o.DeepCopy())
		}
	}
	return out, nil
}

// Kinds implements LiveReader.
func (s *Snapshot) Kinds(ctx context.Context) ([]object.Kind, error) { return s.live.Kinds(ctx) }

// Lacks implements object.Partial for the reader it reads.
func (s *Snapshot) Lacks(gk schema.GroupKind) string { return object.Lacks(s.live, gk) }

// LacksIn implements object.NamespacePartial for the reader it reads.
func (s *Snapshot) LacksIn(gk schema.GroupKind, ns string) string {
	return object.LacksIn(s.live, gk, ns)
}

// TypeConverter implements SchemaSource when the cluster reader does.
func (s *Snapshot) TypeConverter(ctx context.Context, gvks []schema.GroupVersionKind) (managedfields.TypeConverter, error) {
	src, ok := s.live.(object.SchemaSource)
	if !ok {
		return object.BuiltinTypeConverter(), nil
	}
	return src.TypeConverter(ctx, gvks)
}
