package drift_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/kubetest"
)

const (
	benchObjects    = 2000
	benchNamespaces = 10
)

// BenchmarkDiff compares 2,000 desired objects (Deployments, Services and
// ConfigMaps over 10 namespaces) with a real apiserver holding them, 10% of
// them changed by hand, in read-only and dry-run mode; it reports the API
// requests each mode makes. Each run builds its reader afresh (cold); the
// warm cases keep one: a reader that has read the kinds and schemas before
// (the lists still go to the apiserver), and the drift loop's watch caches
// (nothing does).
func BenchmarkDiff(b *testing.B) {
	env := kubetest.New(b)
	desired, drifted := benchCluster(b, clusterOn(b, env))
	countChanged := func(b *testing.B, target *drift.Target) {
		b.Helper()
		if len(target.Errors) > 0 {
			b.Fatalf("errors: %v", target.Errors[:min(3, len(target.Errors))])
		}
		changed := 0
		for _, ch := range target.Changes {
			if ch.Action != drift.ActionUnchanged {
				changed++
			}
		}
		if changed != drifted {
			b.Fatalf("%d objects changed, want %d", changed, drifted)
		}
	}
	counted := func(requests *atomic.Int64) *rest.Config {
		cfg := rest.CopyConfig(env.Config)
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.URL.Query().Get("watch") != "true" {
					requests.Add(1)
				}
				return rt.RoundTrip(r)
			})
		}
		return cfg
	}
	var namespaces []string
	for _, o := range desired {
		if o.GetKind() == "Namespace" {
			namespaces = append(namespaces, o.GetName())
		}
	}
	warm := []struct {
		name   string
		reader func(b *testing.B, cfg *rest.Config) object.LiveReader
	}{
		{"read-only-warm-reader", func(b *testing.B, cfg *rest.Config) object.LiveReader {
			r, err := livestate.NewClusterReader(cfg)
			if err != nil {
				b.Fatal(err)
			}
			return r
		}},
		{"read-only-watch-caches", func(b *testing.B, cfg *rest.Config) object.LiveReader {
			ctx, cancel := context.WithCancel(context.Background())
			b.Cleanup(cancel)
			w, err := livestate.NewWatcher(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			// The kinds the drift loop watches for these objects: theirs, and
			// the autoscalers of Deployments that Git gives replicas.
			kinds := []schema.GroupKind{{Kind: "Namespace"}, {Group: "apps", Kind: "Deployment"}, {Kind: "Service"}, {Kind: "ConfigMap"}, {Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}}
			if err := w.Watch(ctx, kinds, namespaces); err != nil {
				b.Fatal(err)
			}
			return w
		}},
	}
	for _, c := range warm {
		b.Run(c.name, func(b *testing.B) {
			var requests atomic.Int64
			reader := c.reader(b, counted(&requests))
			// Warm it: discovery, schemas, the converter and its field managers.
			if _, err := drift.Compare(context.Background(), reader, drift.Input{Path: "bench", Head: desired}, drift.DefaultOptions()); err != nil {
				b.Fatal(err)
			}
			requests.Store(0)
			for b.Loop() {
				target, err := drift.Compare(context.Background(), reader, drift.Input{Path: "bench", Head: desired}, drift.DefaultOptions())
				if err != nil {
					b.Fatal(err)
				}
				countChanged(b, target)
			}
			b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/op")
			b.ReportMetric(benchObjects, "objects")
		})
	}
	for _, mode := range []drift.Mode{drift.ModeReadOnly, drift.ModeDryRun} {
		b.Run(string(mode), func(b *testing.B) {
			var requests atomic.Int64
			cfg := counted(&requests)
			for b.Loop() {
				reader, err := livestate.NewClusterReader(cfg)
				if err != nil {
					b.Fatal(err)
				}
				opts := drift.DefaultOptions()
				opts.Mode = mode
				if mode == drift.ModeDryRun {
					if opts.DryRun, err = livestate.NewServerDryRun(cfg); err != nil {
						b.Fatal(err)
					}
				}
				target, err := drift.Compare(context.Background(), reader, drift.Input{Path: "bench", Head: desired}, opts)
				if err != nil {
					b.Fatal(err)
				}
				countChanged(b, target)
			}
			b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/op")
			b.ReportMetric(benchObjects, "objects")
		})
	}
}

// benchCluster applies the desired objects as the GitOps applier and edits
// every tenth one by hand; it returns the objects and how many drifted.
func benchCluster(b *testing.B, c *cluster) ([]*unstructured.Unstructured, int) {
	b.Helper()
	env := c.env
	var desired []*unstructured.Unstructured
	var namespaces []string
	for i := range benchNamespaces {
		ns := fmt.Sprintf("%s-%d", env.Namespace, i)
		namespaces = append(namespaces, ns)
		desired = append(desired, obj(b, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n"))
	}
	for i := 0; len(desired) < benchObjects; i++ {
		ns := namespaces[i%benchNamespaces]
		var y string
		switch i % 4 {
		case 0:
			y = inNS(fmt.Sprintf(webDeploymentNamed, i, i, i, i), ns)
		case 1:
			y = fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-%d\n  namespace: %s\nspec:\n  clusterIP: None\n  selector: {app: app-%d}\n  ports: [{name: http, port: 80, targetPort: 8080}]\n", i, ns, i)
		default:
			y = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg-%d\n  namespace: %s\ndata:\n  a: \"%d\"\n  b: some-setting\n", i, ns, i)
		}
		desired = append(desired, obj(b, y))
	}
	applyAll(b, c, desired[:benchNamespaces], "kustomize-controller")
	applyAll(b, c, desired[benchNamespaces:], "kustomize-controller")
	drifted := 0
	var edits []*unstructured.Unstructured
	for i, o := range desired[benchNamespaces:] {
		if i%10 == 0 {
			edits = append(edits, o)
			drifted++
		}
	}
	if err := parallel(len(edits), func(i int) error {
		o := edits[i]
		if o.GetKind() == "Deployment" {
			return c.tryScale(o, "kubectl", 9)
		}
		return c.tryEdit(o, "kubectl-edit", func(u *unstructured.Unstructured) {
			switch u.GetKind() {
			case "ConfigMap":
				_ = unstructured.SetNestedField(u.Object, "changed-by-hand", "data", "b")
			case "Service":
				_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"app": "other"}, "spec", "selector")
			}
		})
	}); err != nil {
		b.Fatal(err)
	}
	return desired, drifted
}

const webDeploymentNamed = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%d
  namespace: NS
spec:
  replicas: 2
  selector:
    matchLabels: {app: app-%d}
  template:
    metadata:
      labels: {app: app-%d}
    spec:
      containers:
      - name: main
        image: registry.example.com/app-%d:1.0.0
        resources:
          requests: {cpu: 100m, memory: 64Mi}
`

func applyAll(b *testing.B, c *cluster, objs []*unstructured.Unstructured, manager string) {
	b.Helper()
	if err := parallel(len(objs), func(i int) error { return c.tryApply(objs[i], manager) }); err != nil {
		b.Fatal(err)
	}
}

// parallel runs f for 0..n-1 on a few goroutines and returns the first error.
func parallel(n int, f func(int) error) error {
	var wg sync.WaitGroup
	var next atomic.Int64
	var once sync.Once
	var first error
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	wg.Wait()
	return first
}
