package livestate_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/rest"

	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/internal/kubetest"
)

// requestCounter counts a client's requests by path.
type requestCounter struct {
	mu     sync.Mutex
	byPath map[string]int
	next   http.RoundTripper
}

func (c *requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.byPath[req.URL.Path]++
	c.mu.Unlock()
	return c.next.RoundTrip(req)
}

// counted is the environment's configuration with its requests counted.
func counted(env *kubetest.Env) (*rest.Config, *requestCounter) {
	counter := &requestCounter{byPath: map[string]int{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		counter.next = rt
		return counter
	})
	return cfg, counter
}

func (c *requestCounter) count(prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for p, k := range c.byPath {
		if strings.HasPrefix(p, prefix) {
			n += k
		}
	}
	return n
}

// TestSchemasAreReadOnceWhileTheLiveObjectsAre: a comparison's OpenAPI
// documents are read while its snapshot reads the live objects, each
// document once however many comparisons ask for it at the same time, and
// the comparisons that follow do not read them again.
func TestSchemasAreReadOnceWhileTheLiveObjectsAre(t *testing.T) {
	env := kubetest.New(t)
	cfg, counter := counted(env)
	r, err := livestate.NewClusterReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	objs := []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": env.Namespace}}},
		{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "b", "namespace": env.Namespace}}},
	}
	ctx := context.Background()
	snap, err := livestate.NewSnapshot(ctx, r, objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"/openapi/v3/api/v1", "/openapi/v3/apis/apps/v1"} {
		if n := counter.count(doc); n != 1 {
			t.Errorf("%s read %d times by the snapshot, want once", doc, n)
		}
	}
	before := counter.count("/openapi/v3")
	gvks := []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}, {Group: "apps", Version: "v1", Kind: "Deployment"}}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := snap.TypeConverter(ctx, gvks); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := counter.count("/openapi/v3") - before; n != 0 {
		t.Errorf("the comparisons read %d OpenAPI documents again, want none", n)
	}

	// A fresh reader asked by many comparisons at once reads and parses
	// each document once: they share one converter.
	counter.byPath = map[string]int{}
	fresh, err := livestate.NewClusterReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	converters := make([]managedfields.TypeConverter, 8)
	for i := range converters {
		wg.Go(func() {
			c, err := fresh.TypeConverter(ctx, gvks)
			if converters[i] = c; err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, doc := range []string{"/openapi/v3/api/v1", "/openapi/v3/apis/apps/v1"} {
		if n := counter.count(doc); n != 1 {
			t.Errorf("%s read %d times by 8 comparisons at once, want once", doc, n)
		}
	}
	for i, c := range converters[1:] {
		if c != converters[0] {
			t.Fatalf("comparison %d got a converter of its own: the documents were parsed more than once", i+1)
		}
	}
}

// TestAWatchersSnapshotReadsSchemasAhead: serve's readers (a Watcher's
// caches) read the schemas while the snapshot reads, as the command
// line's do.
func TestAWatchersSnapshotReadsSchemasAhead(t *testing.T) {
	env := kubetest.New(t)
	cfg, counter := counted(env)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := livestate.NewWatcher(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	objs := []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "b", "namespace": env.Namespace}}},
	}
	if _, err := livestate.NewSnapshot(ctx, w, objs); err != nil {
		t.Fatal(err)
	}
	if n := counter.count("/openapi/v3/apis/apps/v1"); n != 1 {
		t.Errorf("apps/v1's schemas read %d times by the snapshot, want once", n)
	}
}
