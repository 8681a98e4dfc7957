package livestate_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/internal/kubetest"
)

// BenchmarkWatchCache measures the memory the drift loop's watch caches hold
// for 20,000 and then 100,000 ConfigMaps (each with a few keys, labels,
// managedFields and a client-side-apply annotation, as kubectl apply leaves
// them) in watched namespaces: watched in full, as for a kind Git renders,
// and metadata only, as for the other kinds in a target's namespaces. It
// reports the live heap the caches add, the resident set they add (measured
// after returning freed memory to the system before and after), the whole
// test process's resident set once they are full, and the time to fill.
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
	created := 0
	for _, size := range []int{20000, 100000} {
		createConfigMaps(b, env, namespaces, created, size)
		created = size
		for _, mode := range []string{"full", "metadata"} {
			b.Run(fmt.Sprintf("%d/%s", size, mode), func(b *testing.B) {
				var heap, rss, rssAdded, fill float64
				for b.Loop() {
					wctx, cancel := context.WithCancel(ctx)
					heap0, rss0 := memoryInUse()
					start := time.Now()
					w, err := livestate.NewWatcher(wctx, env.Config)
					if err != nil {
						b.Fatal(err)
					}
					w.SyncTimeout = 10 * time.Minute
					if mode == "full" {
						err = w.Watch(wctx, []schema.GroupKind{{Kind: "ConfigMap"}}, namespaces)
					} else {
						err = w.WatchMetadata(wctx, namespaces)
					}
					if err != nil {
						b.Fatal(err)
					}
					fill = time.Since(start).Seconds()
					if n := len(w.InNamespaces(namespaces)); n < size {
						b.Fatalf("the caches hold %d objects, want %d", n, size)
					}
					heap1, rss1 := memoryInUse()
					heap, rss, rssAdded = heap1-heap0, rss1, rss1-rss0
					runtime.KeepAlive(w)
					cancel()
				}
				b.ReportMetric(heap/(1<<20), "heap-MiB")
				b.ReportMetric(heap/float64(size), "heap-B/object")
				b.ReportMetric(rssAdded/(1<<20), "rss-added-MiB")
				b.ReportMetric(rss/(1<<20), "rss-MiB")
				b.ReportMetric(fill, "fill-s")
			})
		}
	}
}

// createConfigMaps creates the benchmark's ConfigMaps numbered from to to,
// spread over the namespaces.
func createConfigMaps(b *testing.B, env *kubetest.Env, namespaces []string, from, to int) {
	b.Helper()
	kubetest.CreateMany(b, from, to, func(i int) error {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%06d", i), Labels: map[string]string{"app": "shop", "tier": "web"},
				Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 300)}},
			Data: map[string]string{"LOG_LEVEL": "info", "FEATURE": "on", "ENDPOINT": "https://api.example.com/v1/" + strconv.Itoa(i)},
		}
		_, err := env.Client.CoreV1().ConfigMaps(namespaces[i%len(namespaces)]).Create(context.Background(), cm, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"})
		return err
	})
}

// memoryInUse returns the live heap after a collection and the resident set
// once freed memory is returned to the system.
func memoryInUse() (heap, rss float64) {
	runtime.GC()
	debug.FreeOSMemory()
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
