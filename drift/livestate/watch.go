package livestate

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/driftback/driftback/drift/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Watcher keeps a cluster's objects in informer caches: whole objects for
// the kinds the targets render, and only the metadata of every other kind in
// the targets' namespaces (enough to see an object a person created there).
// It is a LiveReader and a SchemaSource that reads its caches, falling back to
// the API server for kinds it does not watch. It only gets, lists and watches.
type Watcher struct {
	reader *ClusterReader
	dyn    dynamic.Interface
	meta   metadata.Interface
	// qps and burst are the client's rate limits, for reports.
	qps   float32
	burst int
	// SyncTimeout bounds the wait for a new informer's first list (default 1m).
	SyncTimeout time.Duration

	mu       sync.Mutex
	ctx      context.Context
	full     map[string]*watched // by resource and namespace
	metaOnly map[string]*watched
	changed  chan struct{}
	// wakes counts the changes signalled, for tests.
	wakes atomic.Int64
}

type watched struct {
	gk        schema.GroupKind
	resource  schema.GroupVersionResource
	namespace string // "" for a cluster-scoped kind or every namespace
	// clusterScoped objects are keyed by name alone, whatever namespace a
	// render gave them.
	clusterScoped bool
	informer      cache.SharedIndexInformer
	stop          context.CancelFunc

	errMu   sync.Mutex
	lastErr error // the last list or watch failure, for the start-up report
}

func (wt *watched) setErr(err error) {
	wt.errMu.Lock()
	wt.lastErr = err
	wt.errMu.Unlock()
}

func (wt *watched) err() error {
	wt.errMu.Lock()
	defer wt.errMu.Unlock()
	return wt.lastErr
}

// NewWatcher returns a watcher of the cluster cfg reaches. Its informers run
// until ctx ends. A cfg without client rate limits gets driftback's.
func NewWatcher(ctx context.Context, cfg *rest.Config) (*Watcher, error) {
	cfg = Configure(cfg, ClientLimits{})
	// Discovery, gets and lists are bounded (some take no context); watches
	// are long requests and are not.
	bounded := rest.CopyConfig(cfg)
	if bounded.Timeout == 0 {
		bounded.Timeout = 30 * time.Second
	}
	reader, err := NewClusterReader(bounded)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Watcher{
		reader: reader, dyn: dyn, meta: mc, ctx: ctx, SyncTimeout: time.Minute, qps: cfg.QPS, burst: cfg.Burst,
		full: map[string]*watched{}, metaOnly: map[string]*watched{},
		changed: make(chan struct{}, 1),
	}, nil
}

// Changed receives a value after watched objects change; changes in a burst
// are coalesced into one.
func (w *Watcher) Changed() <-chan struct{} { return w.changed }

func (w *Watcher) notify() {
	w.wakes.Add(1)
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// Watch makes sure every given kind is watched in full in each namespace (a
// cluster-scoped kind cluster-wide), and waits until the caches hold the
// current state. Kinds the cluster does not serve are skipped: their objects
// do not exist yet.
func (w *Watcher) Watch(ctx context.Context, kinds []schema.GroupKind, namespaces []string) error {
	var waits []*watched
	for _, gk := range kinds {
		m, ok, err := w.reader.mapping(gk, "")
		if err != nil {
			return fmt.Errorf("%s: %w", gk, err)
		}
		if !ok {
			continue
		}
		nss := namespaces
		clusterScoped := m.Scope.Name() != meta.RESTScopeNameNamespace
		if clusterScoped {
			nss = []string{""}
		}
		for _, ns := range nss {
			wt, _ := w.start(gk, m.Resource, ns, false, clusterScoped)
			if wt != nil {
				waits = append(waits, wt) // a watch that is not synced yet is waited for again
			}
		}
	}
	return w.wait(ctx, waits)
}

// WatchMetadata watches the metadata of every namespaced kind that can be
// watched in the given namespaces, except the kinds watched in full and
// bookkeeping kinds (events, endpoints, leases, controller revisions).
func (w *Watcher) WatchMetadata(ctx context.Context, namespaces []string) error {
	kinds, err := w.reader.Kinds(ctx)
	if err != nil {
		return err
	}
	var waits []*watched
	for _, k := range kinds {
		if !k.Namespaced || !k.Watch || bookkeeping[k.GroupKind()] {
			continue
		}
		m, ok, err := w.reader.mapping(k.GroupKind(), k.Version)
		if err != nil || !ok {
			continue
		}
		for _, ns := range namespaces {
			if w.watchedFull(m.Resource, ns) {
				continue
			}
			if wt, _ := w.start(k.GroupKind(), m.Resource, ns, true, false); wt != nil {
				waits = append(waits, wt)
			}
		}
	}
	return w.wait(ctx, waits)
}

// bookkeeping kinds change all the time and are never a person's objects.
var bookkeeping = map[schema.GroupKind]bool{
	{Kind: "Event"}:                                    true,
	{Group: "events.k8s.io", Kind: "Event"}:            true,
	{Kind: "Endpoints"}:                                true,
	{Group: "discovery.k8s.io", Kind: "EndpointSlice"}: true,
	{Group: "coordination.k8s.io", Kind: "Lease"}:      true,
	{Group: "apps", Kind: "ControllerRevision"}:        true,
}

func key(r schema.GroupVersionResource, ns string) string { return r.String() + "|" + ns }

func (w *Watcher) watchedFull(r schema.GroupVersionResource, ns string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, a := w.full[key(r, ns)]
	_, b := w.full[key(r, "")]
	return a || b
}

// start starts an informer unless one runs; started is false when it did.
func (w *Watcher) start(gk schema.GroupKind, r schema.GroupVersionResource, ns string, metaOnly, clusterScoped bool) (*watched, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.full
	if metaOnly {
		set = w.metaOnly
	}
	if wt, ok := set[key(r, ns)]; ok {
		return wt, false
	}
	indexers := cache.Indexers{cache.NamespaceIndex: namespaceIndex}
	var inf cache.SharedIndexInformer
	if metaOnly {
		inf = metadatainformer.NewFilteredMetadataInformer(w.meta, r, ns, 0, indexers, nil).Informer()
		_ = inf.SetTransform(cacheMetadata) // fails only once the informer runs; it has not started
	} else {
		inf = dynamicinformer.NewFilteredDynamicInformer(w.dyn, r, ns, 0, indexers, nil).Informer()
		_ = inf.SetTransform(cacheObject) // as above
	}
	notify := func(any) { w.notify() }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: notify, DeleteFunc: notify,
		UpdateFunc: func(old, cur any) {
			if changedByWriter(old, cur) {
				w.notify()
			}
		},
	}); err != nil {
		return nil, false // only when stopped, which a new informer is not
	}
	ctx, stop := context.WithCancel(w.ctx)
	wt := &watched{gk: gk, resource: r, namespace: ns, clusterScoped: clusterScoped, informer: inf, stop: stop}
	// Kept to say why a first list did not complete; the informer retries.
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		wt.setErr(err)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}) // fails only once the informer runs; it has not started
	set[key(r, ns)] = wt
	go inf.Run(ctx.Done())
	return wt, true
}

func (w *Watcher) wait(ctx context.Context, waits []*watched) error {
	if len(waits) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.SyncTimeout)
	defer cancel()
	for i, wt := range waits {
		if wt.informer.HasSynced() {
			continue
		}
		if !cache.WaitForCacheSync(ctx.Done(), wt.informer.HasSynced) {
			// A watch whose list failed is stopped, so the next check starts
			// it again; one still listing (a slow start) goes on, and the
			// next check waits for it again. An unfilled cache is never read.
			pending := 0
			var cause error
			for _, other := range waits[i:] {
				if other.informer.HasSynced() {
					continue
				}
				pending++
				if err := other.err(); err != nil {
					if cause == nil {
						cause = err
					}
					w.forget(other)
				}
			}
			return w.syncError(wt, pending, len(waits), cause)
		}
	}
	return nil
}

// WatchSyncError says why watches did not fill their caches in time: a
// refusal (RBAC), another failure of their lists, or none (the lists were
// still going: a slow apiserver, or the client's own rate limit).
type WatchSyncError struct {
	// Kind and Namespace name the first watch that did not fill ("" for
	// cluster-wide).
	Kind      schema.GroupKind
	Namespace string
	// Pending of Started watches had not filled.
	Pending, Started int
	// Cause is the last failure of the first list, or nil when none failed.
	Cause error
	// Timeout is how long the watches were waited for; QPS and Burst are the
	// client's rate limits.
	Timeout time.Duration
	QPS     float32
	Burst   int
}

func (e *WatchSyncError) Error() string {
	where := "cluster-wide"
	if e.Namespace != "" {
		where = "in " + e.Namespace
	}
	head := fmt.Sprintf("watch %s %s: the first list did not complete in %s", e.Kind, where, e.Timeout)
	switch {
	case e.Cause != nil && apierrors.IsForbidden(e.Cause):
		return fmt.Sprintf("%s: refused (can driftback list and watch it?): %v", head, e.Cause)
	case e.Cause != nil && apierrors.IsTooManyRequests(e.Cause):
		return fmt.Sprintf("%s: the apiserver is throttling the lists (429, API Priority and Fairness): %v", head, e.Cause)
	case e.Cause != nil:
		return fmt.Sprintf("%s: %v", head, e.Cause)
	}
	return fmt.Sprintf("%s: no list failed; %d of %d watches were still filling (a slow or busy apiserver, or the client's rate limit of %g requests/s, burst %d, where the apiserver streams no initial lists)",
		head, e.Pending, e.Started, e.QPS, e.Burst)
}

// Unwrap returns the cause.
func (e *WatchSyncError) Unwrap() error { return e.Cause }

func (w *Watcher) syncError(wt *watched, pending, started int, cause error) error {
	return &WatchSyncError{Kind: wt.gk, Namespace: wt.namespace, Pending: pending, Started: started,
		Cause: cause, Timeout: w.SyncTimeout, QPS: w.qps, Burst: w.burst}
}

// forget stops a watch and removes it.
func (w *Watcher) forget(wt *watched) {
	wt.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, set := range []map[string]*watched{w.full, w.metaOnly} {
		if set[key(wt.resource, wt.namespace)] == wt {
			delete(set, key(wt.resource, wt.namespace))
		}
	}
}

// find returns the synced full informer holding objects of gk in ns.
func (w *Watcher) find(gk schema.GroupKind, ns string) *watched {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out *watched
	for _, wt := range w.full {
		if wt.gk == gk && (wt.namespace == ns || wt.namespace == "") && wt.informer.HasSynced() {
			out = wt
		}
	}
	return out
}

// Get implements LiveReader from the caches; objects of kinds not watched
// are read from the API server.
func (w *Watcher) Get(ctx context.Context, refs []object.Ref) (map[string]*unstructured.Unstructured, error) {
	out := map[string]*unstructured.Unstructured{}
	var rest []object.Ref
	for _, ref := range refs {
		wt := w.find(ref.GroupKind(), ref.Namespace)
		if wt == nil {
			rest = append(rest, ref)
			continue
		}
		k := ref.Name
		if ref.Namespace != "" && !wt.clusterScoped {
			k = ref.Namespace + "/" + ref.Name
		}
		item, ok, err := wt.informer.GetIndexer().GetByKey(k)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
		if !ok {
			continue
		}
		c, isCached := item.(*cached)
		if !isCached {
			return nil, fmt.Errorf("%s: the cache holds a %T", ref, item)
		}
		obj, err := c.object()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
		out[ref.Key()] = obj
	}
	if len(rest) > 0 {
		more, err := w.reader.Get(ctx, rest)
		if err != nil {
			return nil, err
		}
		for k, v := range more {
			out[k] = v
		}
	}
	return out, nil
}

// Covers says the watcher serves objects of gk in namespace ("" for a
// cluster-scoped kind) from a filled cache, with no request to the cluster.
func (w *Watcher) Covers(gk schema.GroupKind, namespace string) bool {
	return w.find(gk, namespace) != nil
}

// List implements LiveReader from the caches when the kind is watched there.
func (w *Watcher) List(ctx context.Context, gk schema.GroupKind, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	wt := w.find(gk, namespace)
	if wt == nil || (namespace == "" && wt.namespace != "") {
		return w.reader.List(ctx, gk, namespace, sel)
	}
	var items []any
	if namespace == "" {
		items = wt.informer.GetIndexer().List()
	} else {
		var err error
		if items, err = wt.informer.GetIndexer().ByIndex(cache.NamespaceIndex, namespace); err != nil {
			return nil, err
		}
	}
	var out []*unstructured.Unstructured
	for _, it := range items {
		c, ok := it.(*cached)
		if !ok {
			return nil, fmt.Errorf("%s: the cache holds a %T", gk, it)
		}
		if sel != nil && !sel.Empty() && !sel.Matches(c.labelSet()) {
			continue
		}
		u, err := c.object()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", gk, err)
		}
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].GetNamespace()+"/"+out[i].GetName() < out[j].GetNamespace()+"/"+out[j].GetName()
	})
	return out, nil
}

// Kinds implements LiveReader.
func (w *Watcher) Kinds(ctx context.Context) ([]object.Kind, error) { return w.reader.Kinds(ctx) }

// TypeConverter implements SchemaSource.
func (w *Watcher) TypeConverter(ctx context.Context, gvks []schema.GroupVersionKind) (managedfields.TypeConverter, error) {
	return w.reader.TypeConverter(ctx, gvks)
}

// PrefetchSchemas reads ahead the schemas of the given kinds (a Snapshot
// asks while it reads the live objects).
func (w *Watcher) PrefetchSchemas(ctx context.Context, gvks []schema.GroupVersionKind) {
	w.reader.PrefetchSchemas(ctx, gvks)
}

// Present is an object seen in a namespace: its kind and metadata. The
// managedFields name their managers only, without fields.
type Present struct {
	GroupVersionKind schema.GroupVersionKind
	Metadata         metav1.ObjectMeta
}

// Ref returns the object's identity.
func (p Present) Ref() object.Ref {
	return object.Ref{Group: p.GroupVersionKind.Group, Version: p.GroupVersionKind.Version, Kind: p.GroupVersionKind.Kind,
		Namespace: p.Metadata.Namespace, Name: p.Metadata.Name}
}

// InNamespaces lists every object the watcher holds in the namespaces, from
// full and metadata-only caches alike, sorted by identity.
func (w *Watcher) InNamespaces(namespaces []string) []Present {
	want := map[string]bool{}
	for _, ns := range namespaces {
		want[ns] = true
	}
	w.mu.Lock()
	var all []*watched
	for _, wt := range w.full {
		all = append(all, wt)
	}
	for _, wt := range w.metaOnly {
		all = append(all, wt)
	}
	w.mu.Unlock()
	seen := map[string]bool{}
	var out []Present
	for _, wt := range all {
		for _, it := range wt.informer.GetIndexer().List() {
			c, ok := it.(*cached)
			if !ok || !want[c.meta.namespace.Value()] {
				continue
			}
			p := Present{GroupVersionKind: wt.resource.GroupVersion().WithKind(wt.gk.Kind), Metadata: c.meta.objectMeta()}
			k := p.Ref().Key()
			if !seen[k] {
				seen[k] = true
				out = append(out, p)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref().Key() < out[j].Ref().Key() })
	return out
}

// Watches counts the informers running, full and metadata-only.
func (w *Watcher) Watches() (full, metadataOnly int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.full), len(w.metaOnly)
}
