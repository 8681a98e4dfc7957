package livestate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/kubetest"
)

// TestRelistHoldsOneCopyAndWakesNoOne: when a watch expires, or the
// apiserver goes away and comes back so that every watch must list again,
// the caches hold what they held before and no more memory, and the
// unchanged objects the relist brings back wake no drift check.
func TestRelistHoldsOneCopyAndWakesNoOne(t *testing.T) {
	env := kubetest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace
	const n = 2000
	// The shared apiserver runs no namespace controller: the objects are
	// deleted here, so other tests' cluster-wide lists do not page over them.
	t.Cleanup(func() {
		if err := env.Client.CoreV1().ConfigMaps(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Errorf("delete the ConfigMaps: %v", err)
		}
	})
	kubetest.CreateMany(t, 0, n, func(i int) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i), Labels: map[string]string{"app": "shop"}},
			Data: map[string]string{"LOG_LEVEL": "info", "ENDPOINT": fmt.Sprintf("https://api.example.com/%d", i)}}
		_, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"})
		return err
	})

	breaker := kubetest.NewWatchBreaker()
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(breaker.Wrap)
	before := liveHeap()
	w, err := NewWatcher(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	configMaps := schema.GroupKind{Kind: "ConfigMap"}
	if err := w.Watch(ctx, []schema.GroupKind{configMaps}, []string{ns}); err != nil {
		t.Fatal(err)
	}
	if err := w.WatchMetadata(ctx, []string{ns}); err != nil {
		t.Fatal(err)
	}
	contents := func() map[string]string {
		out := map[string]string{}
		objs, err := w.List(ctx, configMaps, ns, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			b, err := o.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			out[o.GetName()] = string(b)
		}
		for _, p := range w.InNamespaces([]string{ns}) {
			out[p.Ref().String()] = string(p.Metadata.UID) + " " + p.Metadata.ResourceVersion
		}
		return out
	}
	want := contents()
	if len(want) < n {
		t.Fatalf("the caches hold %d objects, want at least %d", len(want), n)
	}
	filled := liveHeap()
	held := filled - before
	full, meta := w.Watches()
	watches := breaker.OpenWatches()
	path := "/api/v1/namespaces/" + ns + "/configmaps"

	for i, c := range []struct {
		name string
		down time.Duration
	}{
		{"a watch expires", 0},
		{"the apiserver restarts", 2 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			lists, wakes := breaker.Lists(path), w.wakes.Load()
			breaker.Break(c.down)
			kubetest.Eventually(t, time.Minute, "the watches to list again and resume", func() bool {
				return breaker.Lists(path) > lists && breaker.OpenWatches() >= watches
			})
			// Events arrive in order: once a ConfigMap created now is in
			// the cache, the relist before it has been taken in.
			marker := fmt.Sprintf("marker-%d", i)
			if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: marker}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			ref := object.Ref{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: marker}
			kubetest.Eventually(t, time.Minute, "the marker in the cache", func() bool {
				got, err := w.Get(ctx, []object.Ref{ref})
				return err == nil && got[ref.Key()] != nil
			})
			// Handlers run after the store is updated, in the order of the
			// events: once the marker's wake is counted, any the relist
			// caused before it are too.
			kubetest.Eventually(t, time.Minute, "the marker's wake", func() bool { return w.wakes.Load() > wakes })
			if got := w.wakes.Load() - wakes; got != 1 {
				t.Errorf("%d drift checks woken, want 1 (the new ConfigMap): the relist's unchanged objects woke the loop", got)
			}
			got := contents()
			delete(got, marker)
			delete(got, ref.String())
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("the caches after the relist (-before +after):\n%s", d)
			}
			if f, m := w.Watches(); f != full || m != meta {
				t.Errorf("watches after the relist: %d full, %d metadata; before: %d, %d", f, m, full, meta)
			}
			now := liveHeap() - before
			t.Logf("the caches held %.1f MiB, %.1f MiB after the relist", held/(1<<20), now/(1<<20))
			if now > 1.25*held+(1<<20) {
				t.Errorf("after the relist the watcher holds %.1f MiB, %.1f MiB before: the relist kept a second copy", now/(1<<20), held/(1<<20))
			}
			// The next case starts from the state before this one.
			woken := w.wakes.Load()
			if err := env.Client.CoreV1().ConfigMaps(ns).Delete(ctx, marker, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			kubetest.Eventually(t, time.Minute, "the marker gone from the cache and its wake counted", func() bool {
				got, err := w.Get(ctx, []object.Ref{ref})
				return err == nil && got[ref.Key()] == nil && w.wakes.Load() > woken
			})
		})
	}
}
