package drift_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/internal/kubetest"
)

const watchObjects = 20000

// BenchmarkWatchCache measures the memory the drift loop's watch caches hold
// for 20,000 ConfigMaps (each with a few keys, labels, managedFields and a
// client-side-apply annotation, as kubectl apply leaves them) in watched
// namespaces: watched in full, as for a kind Git renders, and metadata only,
// as for the other kinds in a target's namespaces. It reports the live heap
// the caches add and the whole test process's resident set once they are full.
func BenchmarkWatchCache(b *testing.B) {
	env := kubetest.New(b)
	ctx := context.Background()
	namespaces := []string{env.Namespace}
	for i := 1; i < 4; i++ {
		ns := fmt.Sprintf("%s-%d", env.Namespace, i)
		if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		namespaces = append(namespaces, ns)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	next := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Labels: map[string]string{"app": "shop", "tier": "web"},
						Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 300)}},
					Data: map[string]string{"LOG_LEVEL": "info", "FEATURE": "on", "ENDPOINT": "https://api.example.com/v1/" + strconv.Itoa(i)},
				}
				if _, err := env.Client.CoreV1().ConfigMaps(namespaces[i%len(namespaces)]).Create(ctx, cm, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range watchObjects {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"full", "metadata"} {
		b.Run(mode, func(b *testing.B) {
			var heap, rss float64
			for b.Loop() {
				wctx, cancel := context.WithCancel(ctx)
				heap0, _ := memoryInUse()
				w, err := drift.NewWatcher(wctx, env.Config)
				if err != nil {
					b.Fatal(err)
				}
				if mode == "full" {
					err = w.Watch(wctx, []schema.GroupKind{{Kind: "ConfigMap"}}, namespaces)
				} else {
					err = w.WatchMetadata(wctx, namespaces)
				}
				if err != nil {
					b.Fatal(err)
				}
				if n := len(w.InNamespaces(namespaces)); n < watchObjects {
					b.Fatalf("the caches hold %d objects, want %d", n, watchObjects)
				}
				heap1, rss1 := memoryInUse()
				heap, rss = heap1-heap0, rss1
				runtime.KeepAlive(w)
				cancel()
			}
			b.ReportMetric(heap/(1<<20), "heap-MiB")
			b.ReportMetric(rss/(1<<20), "rss-MiB")
			b.ReportMetric(heap/watchObjects, "heap-B/object")
		})
	}
}

// memoryInUse returns the live heap after a collection and the resident set.
func memoryInUse() (heap, rss float64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				rss = kb * 1024
			}
		}
	}
	return float64(m.HeapAlloc), rss
}
