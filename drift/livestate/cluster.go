package livestate

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/lru"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// ClusterReader reads a live cluster through client-go with get and list
// only. Objects of one kind in one namespace are read with one list.
type ClusterReader struct {
	dyn    dynamic.Interface
	disc   discovery.CachedDiscoveryInterface
	mapper *restmapper.DeferredDiscoveryRESTMapper

	mu      sync.Mutex
	kinds   []object.Kind
	kindsAt time.Time
	schemas map[string]*schemaDoc // group-version path → its schemas
	// converters are built from sets of schemas, by their documents' paths
	// and the kinds' schemas.
	converters *lru.Cache[managedfields.TypeConverter]
	// fetches reads each OpenAPI v3 document, and their list, once at a
	// time.
	fetches singleflight.Group
	// paths are the OpenAPI v3 documents the cluster serves, and when read.
	paths   map[string]openapi.GroupVersion
	pathsAt time.Time
	// capsVersion and capsAPIs are the cluster's Capabilities, read at capsAt.
	capsVersion string
	capsAPIs    []string
	capsAt      time.Time
}

// maxConverters bounds the converters kept, the least recently used going
// first; each holds a schema and its field managers. Targets with the same
// kinds share one.
const maxConverters = 64

// discoveryTTL bounds how long kinds and schemas are reused: a CRD installed or
// changed since shows up within it.
const discoveryTTL = time.Minute

// NewClusterReader returns a reader for the cluster cfg reaches. A cfg
// without client rate limits gets driftback's (see Configure).
func NewClusterReader(cfg *rest.Config) (*ClusterReader, error) {
	cfg = Configure(cfg, ClientLimits{})
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cached := memory.NewMemCacheClient(dc)
	return &ClusterReader{
		dyn:        dyn,
		disc:       cached,
		mapper:     restmapper.NewDeferredDiscoveryRESTMapper(cached),
		schemas:    map[string]*schemaDoc{},
		converters: lru.New[managedfields.TypeConverter](maxConverters),
	}, nil
}

// mapping finds the resource of a kind; ok is false when the cluster does not
// serve it (a CRD not installed yet).
func (r *ClusterReader) mapping(gk schema.GroupKind, version string) (*meta.RESTMapping, bool, error) {
	var versions []string
	if version != "" {
		versions = []string{version}
	}
	m, err := r.mapper.RESTMapping(gk, versions...)
	if meta.IsNoMatchError(err) {
		r.mapper.Reset() // the kind may have appeared since discovery was read
		m, err = r.mapper.RESTMapping(gk, versions...)
	}
	if meta.IsNoMatchError(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return m, true, nil
}

func (r *ClusterReader) resource(m *meta.RESTMapping, namespace string) dynamic.ResourceInterface {
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return r.dyn.Resource(m.Resource).Namespace(namespace)
	}
	return r.dyn.Resource(m.Resource)
}

// Get implements LiveReader: one GET for a lone object, one LIST for several
// objects of a kind in a namespace.
func (r *ClusterReader) Get(ctx context.Context, refs []object.Ref) (map[string]*unstructured.Unstructured, error) {
	type bucket struct {
		gk      schema.GroupKind
		version string
		ns      string
		names   map[string]object.Ref
	}
	buckets := map[string]*bucket{}
	var order []string
	for _, ref := range refs {
		k := ref.GroupKind().String() + "/" + ref.Namespace
		b, ok := buckets[k]
		if !ok {
			b = &bucket{gk: ref.GroupKind(), version: ref.Version, ns: ref.Namespace, names: map[string]object.Ref{}}
			buckets[k] = b
			order = append(order, k)
		}
		b.names[ref.Name] = ref
	}
	sort.Strings(order)
	out := map[string]*unstructured.Unstructured{}
	for _, k := range order {
		b := buckets[k]
		m, ok, err := r.mapping(b.gk, b.version)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.gk, err)
		}
		if !ok {
			continue // the kind does not exist yet, so neither do its objects
		}
		res := r.resource(m, b.ns)
		var objs []*unstructured.Unstructured
		if len(b.names) > 1 {
			objs, err = listAll(ctx, res, "")
			// Credentials that may get named objects but list none
			// (resourceNames) read them one by one.
			if err != nil && !apierrors.IsForbidden(err) {
				return nil, fmt.Errorf("list %s in %q: %w", b.gk, b.ns, err)
			}
		}
		if len(b.names) == 1 || err != nil {
			for name, ref := range b.names {
				o, err := res.Get(ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("%s: %w", ref, err)
				}
				out[ref.Key()] = o
			}
			continue
		}
		for _, o := range objs {
			if ref, ok := b.names[o.GetName()]; ok {
				out[ref.Key()] = o
			}
		}
	}
	return out, nil
}

func listAll(ctx context.Context, res dynamic.ResourceInterface, selector string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	opts := metav1.ListOptions{LabelSelector: selector, Limit: 500}
	for {
		l, err := res.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
		if l.GetContinue() == "" {
			return out, nil
		}
		opts.Continue = l.GetContinue()
	}
}

// List implements LiveReader.
func (r *ClusterReader) List(ctx context.Context, gk schema.GroupKind, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	m, ok, err := r.mapping(gk, "")
	if err != nil || !ok {
		return nil, err
	}
	s := ""
	if sel != nil {
		s = sel.String()
	}
	return listAll(ctx, r.resource(m, namespace), s)
}

// Kinds implements LiveReader: every kind that can be listed, at its
// preferred version.
func (r *ClusterReader) Kinds(context.Context) ([]object.Kind, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kinds != nil && time.Since(r.kindsAt) < discoveryTTL {
		return r.kinds, nil
	}
	r.disc.Invalidate()
	lists, err := r.disc.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		return nil, err
	}
	// A partial failure (one aggregated API down) still lists the rest.
	status := map[string]bool{}
	var kinds []object.Kind
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, res := range l.APIResources {
			if strings.HasSuffix(res.Name, "/status") {
				status[gv.Group+"/"+strings.TrimSuffix(res.Name, "/status")] = true
			}
		}
		for _, res := range l.APIResources {
			if strings.Contains(res.Name, "/") || !hasVerb(res.Verbs, "list") {
				continue
			}
			kinds = append(kinds, object.Kind{
				GroupVersionKind: gv.WithKind(res.Kind),
				Namespaced:       res.Namespaced,
				Status:           status[gv.Group+"/"+res.Name],
				Watch:            hasVerb(res.Verbs, "watch"),
				Resource:         res.Name,
			})
		}
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].String() < kinds[j].String() })
	// A partial failure (an aggregated API down) is not kept for long.
	r.kinds, r.kindsAt = kinds, time.Now()
	if err != nil {
		r.kindsAt = time.Now().Add(-discoveryTTL + 5*time.Second)
	}
	return kinds, nil
}

func hasVerb(verbs metav1.Verbs, v string) bool {
	for _, x := range verbs {
		if x == v {
			return true
		}
	}
	return false
}

// openAPIPaths returns the cluster's OpenAPI v3 documents by path, read
// again after discoveryTTL, or at once when one of want is missing (a CRD
// may have appeared since).
func (r *ClusterReader) openAPIPaths(want map[string]bool) (map[string]openapi.GroupVersion, error) {
	r.mu.Lock()
	paths, at := r.paths, r.pathsAt
	r.mu.Unlock()
	fresh := paths != nil && time.Since(at) < discoveryTTL
	for p := range want {
		if _, ok := paths[p]; !ok {
			fresh = false
		}
	}
	if fresh {
		return paths, nil
	}
	v, err, _ := r.fetches.Do("\x00paths", func() (any, error) {
		paths, err := r.disc.OpenAPIV3().Paths()
		if err != nil {
			return nil, fmt.Errorf("openapi v3 paths: %w", err)
		}
		r.mu.Lock()
		r.paths, r.pathsAt = paths, time.Now()
		r.mu.Unlock()
		return paths, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(map[string]openapi.GroupVersion), nil
}

// TypeConverter implements SchemaSource from the cluster's OpenAPI v3
// documents, fetching only the group-versions of the given kinds (and keeping
// them), and parsing only the schemas those kinds reach; kinds the cluster
// publishes no schema for merge as deduced types. Documents not kept are
// fetched at once, each once however many callers ask for it, and without
// holding the reader's lock.
func (r *ClusterReader) TypeConverter(ctx context.Context, gvks []schema.GroupVersionKind) (managedfields.TypeConverter, error) {
	paths, err := r.readSchemas(ctx, gvks)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// The converter of a set of schemas is built once and shared, with
	// the field managers built on it, until a document is read again: the
	// key names each document with when it was read, and the kinds'
	// schemas.
	var key []string
	docs := map[string]*schemaDoc{}
	for _, p := range paths {
		doc, ok := r.schemas[p]
		if !ok {
			continue // not served: deduced types (readSchemas read the others again when stale)
		}
		docs[p] = doc
		key = append(key, p+"@"+strconv.FormatInt(doc.at.UnixNano(), 36))
		for _, gvk := range gvks {
			if name, ok := doc.kinds[gvk]; ok {
				key = append(key, p+"#"+name)
			}
		}
	}
	slices.Sort(key)
	k := strings.Join(slices.Compact(key), " ")
	if c, ok := r.converters.Get(k); ok {
		return c, nil
	}
	all := map[string]*spec.Schema{}
	for _, p := range paths { // in order: a name two documents define is the later one's
		doc, ok := docs[p]
		if !ok {
			continue
		}
		if err := doc.schemas(doc.reach(gvks), all); err != nil {
			return nil, fmt.Errorf("openapi v3 %s: %w", p, err)
		}
	}
	tc, err := managedfields.NewTypeConverter(all, false)
	if err != nil {
		return nil, fmt.Errorf("build the apply schema: %w", err)
	}
	c := object.NewFallbackConverter(tc)
	r.converters.Add(k, c, 1)
	return c, nil
}

// PrefetchSchemas reads the OpenAPI v3 documents of the given kinds that
// are not kept, so that a comparison asking for them later does not wait
// (a Snapshot asks while it reads the live objects). An error is left for
// TypeConverter to report.
func (r *ClusterReader) PrefetchSchemas(ctx context.Context, gvks []schema.GroupVersionKind) {
	_, _ = r.readSchemas(ctx, gvks)
}

// readSchemas keeps the documents of the given kinds, and returns their
// paths, sorted.
func (r *ClusterReader) readSchemas(ctx context.Context, gvks []schema.GroupVersionKind) ([]string, error) {
	want := map[string]bool{}
	for _, gvk := range gvks {
		if gvk.Group == "" {
			want["api/"+gvk.Version] = true
		} else {
			want["apis/"+gvk.Group+"/"+gvk.Version] = true
		}
	}
	paths, err := r.openAPIPaths(want)
	if err != nil {
		return nil, err
	}
	var key []string
	for p := range want {
		key = append(key, p)
	}
	sort.Strings(key)
	var stale []string
	r.mu.Lock()
	for _, p := range key {
		if cached, ok := r.schemas[p]; !ok || time.Since(cached.at) > discoveryTTL {
			if _, served := paths[p]; served {
				stale = append(stale, p)
			}
		}
	}
	r.mu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	for _, p := range stale {
		g.Go(func() error {
			ch := r.fetches.DoChan(p, func() (any, error) { return nil, r.fetchSchemas(p, paths[p]) })
			select {
			case res := <-ch:
				return res.Err
			case <-gctx.Done():
				return gctx.Err()
			}
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return key, nil
}

// fetchSchemas reads the schemas of one OpenAPI v3 document and keeps them.
func (r *ClusterReader) fetchSchemas(p string, gv openapi.GroupVersion) error {
	b, err := gv.Schema("application/json")
	if err != nil {
		return fmt.Errorf("openapi v3 %s: %w", p, err)
	}
	doc, err := splitSchemas(b)
	if err != nil {
		return fmt.Errorf("openapi v3 %s: %w", p, err)
	}
	doc.at = time.Now()
	r.mu.Lock()
	r.schemas[p] = doc
	r.mu.Unlock()
	return nil
}
