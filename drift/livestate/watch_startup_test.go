package livestate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/internal/kubetest"
)

// namespaces creates n namespaces for a test and returns their names.
func namespaces(t *testing.T, env *kubetest.Env, n int) []string {
	t.Helper()
	var out []string
	for i := range n {
		name := fmt.Sprintf("%s-%02d", env.Namespace, i)
		if _, err := env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		out = append(out, name)
	}
	return out
}

var watchedKinds = []schema.GroupKind{
	{Group: "apps", Kind: "Deployment"}, {Group: "apps", Kind: "StatefulSet"}, {Kind: "ConfigMap"}, {Kind: "Secret"},
	{Kind: "Service"}, {Kind: "ServiceAccount"}, {Group: "rbac.authorization.k8s.io", Kind: "Role"},
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}, {Group: "networking.k8s.io", Kind: "NetworkPolicy"},
	{Group: "batch", Kind: "CronJob"}, {Group: "policy", Kind: "PodDisruptionBudget"},
}

// TestWatcherStartsOverManyKindsAndNamespaces proves the drift loop's watcher,
// built as the product builds it (its own client limits, its own sync
// timeout), fills its caches for 11 kinds in full and every other kind as
// metadata in 25 namespaces: hundreds of first lists. This apiserver would
// stream them in watches, which client-go does not rate-limit; so, as an
// apiserver without streaming (before Kubernetes 1.32, or with WatchList
// off) answers, the streaming watches are refused here and the informers
// list. At client-go's default limits (5 a second, bursts of 10) those lists
// outlast the sync timeout; the product's let more than a hundred go in one
// second, which the test counts.
func TestWatcherStartsOverManyKindsAndNamespaces(t *testing.T) {
	env := kubetest.New(t)
	nss := namespaces(t, env, 25)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var lists []time.Time
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTrip(func(r *http.Request) (*http.Response, error) {
			q := r.URL.Query()
			if q.Get("sendInitialEvents") == "true" {
				body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"sendInitialEvents is not supported","reason":"BadRequest","code":400}`
				return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/json"}},
					Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
			}
			if q.Get("watch") != "true" {
				mu.Lock()
				lists = append(lists, time.Now())
				mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	})
	w, err := livestate.NewWatcher(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Watch(ctx, watchedKinds, nss); err != nil {
		t.Fatal(err)
	}
	if err := w.WatchMetadata(ctx, nss); err != nil {
		t.Fatal(err)
	}
	full, meta := w.Watches()
	if full != len(watchedKinds)*len(nss) || meta < 5*len(nss) {
		t.Errorf("%d full and %d metadata watches, want %d full and metadata of the other kinds in each namespace", full, meta, len(watchedKinds)*len(nss))
	}
	mu.Lock()
	defer mu.Unlock()
	busiest := 0
	for i, start := range lists {
		n := 0
		for _, at := range lists[i:] {
			if at.Sub(start) < time.Second {
				n++
			}
		}
		busiest = max(busiest, n)
	}
	if busiest < 100 {
		t.Errorf("at most %d lists in one second of %d: the client's limits are client-go's defaults, not the product's", busiest, len(lists))
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestWatcherReportsWhyItDidNotStart proves a watch whose first list does not
// complete is reported for what it is: a refusal names RBAC, and lists held
// back by the client's own rate limit say so (not "can driftback list it?").
func TestWatcherReportsWhyItDidNotStart(t *testing.T) {
	env := kubetest.New(t)
	nss := namespaces(t, env, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	t.Run("a slow apiserver", func(t *testing.T) {
		// Every request takes 3 s to start answering: the first lists are
		// still going when the watcher stops waiting, and none failed.
		cfg := rest.CopyConfig(env.Config)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.URL.Query().Has("watch") || r.URL.Query().Has("limit") || r.URL.Query().Has("resourceVersion") {
					select {
					case <-time.After(3 * time.Second):
					case <-r.Context().Done():
						return nil, r.Context().Err()
					}
				}
				return rt.RoundTrip(r)
			})
		})
		w, err := livestate.NewWatcher(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		w.SyncTimeout = time.Second
		err = w.Watch(ctx, watchedKinds, nss)
		var se *livestate.WatchSyncError
		if !errors.As(err, &se) {
			t.Fatalf("err = %v, want a WatchSyncError", err)
		}
		if se.Cause != nil || !strings.Contains(err.Error(), "no list failed") || strings.Contains(err.Error(), "refused") {
			t.Errorf("a slow start-up reported as %q", err)
		}
		if se.Pending != len(watchedKinds)*len(nss) || se.Started != se.Pending {
			t.Errorf("pending %d of %d, want all %d", se.Pending, se.Started, len(watchedKinds)*len(nss))
		}
	})
	t.Run("refused by RBAC", func(t *testing.T) {
		w, err := livestate.NewWatcher(ctx, kubetest.Impersonate(env.Config, env.Namespace, "nobody"))
		if err != nil {
			t.Fatal(err)
		}
		w.SyncTimeout = 3 * time.Second
		err = w.Watch(ctx, []schema.GroupKind{{Kind: "ConfigMap"}}, nss[:1])
		var se *livestate.WatchSyncError
		if !errors.As(err, &se) || se.Cause == nil {
			t.Fatalf("err = %v, want a WatchSyncError with its cause", err)
		}
		if !strings.Contains(err.Error(), "refused (can driftback list and watch it?)") {
			t.Errorf("a refusal reported as %q", err)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
