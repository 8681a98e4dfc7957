package drift_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/driftback/driftback/drift"
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
// metadata in 25 namespaces: hundreds of first lists. At client-go's default
// limits (5 a second) they would outlast the sync timeout.
func TestWatcherStartsOverManyKindsAndNamespaces(t *testing.T) {
	env := kubetest.New(t)
	nss := namespaces(t, env, 25)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := drift.NewWatcher(ctx, env.Config)
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
}

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
		w, err := drift.NewWatcher(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		w.SyncTimeout = time.Second
		err = w.Watch(ctx, watchedKinds, nss)
		var se *drift.WatchSyncError
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
		w, err := drift.NewWatcher(ctx, kubetest.Impersonate(env.Config, env.Namespace, "nobody"))
		if err != nil {
			t.Fatal(err)
		}
		w.SyncTimeout = 3 * time.Second
		err = w.Watch(ctx, []schema.GroupKind{{Kind: "ConfigMap"}}, nss[:1])
		var se *drift.WatchSyncError
		if !errors.As(err, &se) || se.Cause == nil {
			t.Fatalf("err = %v, want a WatchSyncError with its cause", err)
		}
		if !strings.Contains(err.Error(), "refused (can driftback list and watch it?)") {
			t.Errorf("a refusal reported as %q", err)
		}
	})
}
