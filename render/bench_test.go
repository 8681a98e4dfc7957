package render_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/reconcile/prepare"
	"github.com/driftback/driftback/render"
)

const (
	benchOverlays = 200
	benchBases    = 10
	// Each overlay renders 20 objects: 10 from its base, 10 of its own.
	benchObjectsPerOverlay = 20
)

// benchRepo generates a GitOps repository of 200 overlays over 10 shared bases
// and returns it with two commits: the second changes one shared base.
func benchRepo(b *testing.B) (repo *gitRepo, first, second string) {
	b.Helper()
	files := map[string]any{}
	for i := range benchBases {
		var res []string
		for j := range 10 {
			name := fmt.Sprintf("svc%d-%d", i, j)
			res = append(res, name+".yaml")
			files[fmt.Sprintf("bases/b%d/%s.yaml", i, name)] = fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %s
  labels:
    app: %s
spec:
  replicas: 2
  selector:
    matchLabels:
      app: %s
  template:
    metadata:
      labels:
        app: %s
    spec:
      containers:
      - name: main
        image: registry.example.com/%s:1.0.0
        ports:
        - containerPort: 8080
        resources:
          requests:
            cpu: 100m
            memory: 64Mi
`, name, name, name, name, name)
		}
		files[fmt.Sprintf("bases/b%d/kustomization.yaml", i)] = "resources:\n- " + strings.Join(res, "\n- ") + "\n"
	}
	for o := range benchOverlays {
		var own []string
		for j := range 10 {
			n := fmt.Sprintf("cfg-%d", j)
			own = append(own, n+".yaml")
			files[fmt.Sprintf("overlays/o%03d/%s.yaml", o, n)] = fmt.Sprintf(
				"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  overlay: o%03d\n  index: %q\n", n, o, fmt.Sprint(j))
		}
		files[fmt.Sprintf("overlays/o%03d/kustomization.yaml", o)] = fmt.Sprintf(`namespace: team-%03d
namePrefix: o%03d-
commonLabels:
  overlay: o%03d
resources:
- ../../bases/b%d
- %s
images:
- name: registry.example.com/svc%d-0
  newTag: 1.0.%d
replicas:
- name: svc%d-1
  count: 3
`, o, o, o, o%benchBases, strings.Join(own, "\n- "), o%benchBases, o, o%benchBases)
	}
	repo = newGitRepo(b)
	first = repo.commit("generated", files)
	second = repo.commit("change one shared base", map[string]any{
		"bases/b3/svc3-0.yaml": strings.Replace(files["bases/b3/svc3-0.yaml"].(string), "replicas: 2", "replicas: 5", 1),
	})
	return repo, first, second
}

func benchOverlayList() []string {
	out := make([]string, benchOverlays)
	for i := range out {
		out[i] = fmt.Sprintf("overlays/o%03d", i)
	}
	return out
}

// BenchmarkRender measures rendering 200 overlays × 20 objects: cold (no
// cache) and warm (cache filled at the previous commit), for "nothing changed"
// and "one shared base changed".
func BenchmarkRender(b *testing.B) {
	repo, first, second := benchRepo(b)
	overlays := benchOverlayList()
	tree := func(rev string) *render.Tree {
		t, err := render.GitTree(repo.repo, rev)
		if err != nil {
			b.Fatal(err)
		}
		return t
	}
	run := func(b *testing.B, r *render.Renderer, t *render.Tree) (rendered int) {
		res, err := r.Render(context.Background(), t, overlays)
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range res.Overlays {
			if err := o.Err(); err != nil {
				b.Fatalf("%s: %v", o.Path, err)
			}
			if !o.Cached {
				rendered++
			}
		}
		return rendered
	}
	cases := []struct {
		name    string
		warm    string // commit whose renders fill the cache first; "" for cold
		at      string
		fresh   int // overlays that must render, not come from the cache
		origins bool
	}{
		{"nothing-changed/cold", "", first, benchOverlays, false},
		{"nothing-changed/cold-with-origins", "", first, benchOverlays, true},
		{"nothing-changed/warm", first, first, 0, false},
		{"one-base-changed/cold", "", second, benchOverlays, false},
		{"one-base-changed/warm", first, second, benchOverlays / benchBases, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				r := render.New(render.Options{Cache: render.NewCache(512 << 20), Origins: c.origins})
				if c.warm != "" {
					run(b, r, tree(c.warm))
				}
				t := tree(c.at) // a fresh tree: nothing parsed is reused
				start := time.Now()
				b.StartTimer()
				if n := run(b, r, t); n != c.fresh {
					b.Fatalf("%d overlays rendered, want %d", n, c.fresh)
				}
				elapsed += time.Since(start)
			}
			if c.fresh > 0 {
				b.ReportMetric(float64(c.fresh*benchObjectsPerOverlay*b.N)/elapsed.Seconds(), "objects/s")
			}
			b.ReportMetric(float64(c.fresh), "overlays-rendered")
		})
	}
}

// BenchmarkKubectlKustomize is the baseline: the same 200 overlays rendered by
// `kubectl kustomize`, one process each, as CI scripts commonly do: one after
// another, and as many at once as there are cores (driftback renders with a
// child per core, so this is the like-for-like figure). kubectl comes from
// `make bench`; without it on PATH the baseline is skipped with a note.
func BenchmarkKubectlKustomize(b *testing.B) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		b.Skip("kubectl is not on PATH (make bench builds it): the kubectl kustomize baseline is not measured")
	}
	repo, _, _ := benchRepo(b)
	overlays := benchOverlayList()
	for _, c := range []struct {
		name     string
		parallel int
	}{{"serial", 1}, {fmt.Sprintf("%d-at-once", runtime.NumCPU()), runtime.NumCPU()}} {
		b.Run(c.name, func(b *testing.B) {
			var elapsed time.Duration
			for b.Loop() {
				start := time.Now()
				var next atomic.Int64
				var wg sync.WaitGroup
				errs := make(chan error, c.parallel)
				for range c.parallel {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := int(next.Add(1)) - 1; i < len(overlays); i = int(next.Add(1)) - 1 {
							if out, err := exec.Command(kubectl, "kustomize", filepath.Join(repo.dir, overlays[i])).CombinedOutput(); err != nil {
								errs <- fmt.Errorf("kubectl kustomize %s: %v\n%s", overlays[i], err, out)
								return
							}
						}
					}()
				}
				wg.Wait()
				close(errs)
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(benchOverlays*benchObjectsPerOverlay*b.N)/elapsed.Seconds(), "objects/s")
		})
	}
}

// BenchmarkFluxBuild measures what building a target as kustomize-controller
// does costs over plain kustomize, the way serve renders a target (one
// overlay per render): Flux's generator on a skeleton of the directory, the
// build with files loadable from the whole repository, then postBuild
// substitution, commonMetadata and owner labels. Cold cache, 20 overlays of
// the benchmark repository.
func BenchmarkFluxBuild(b *testing.B) {
	repo, first, _ := benchRepo(b)
	overlays := benchOverlayList()[:20]
	tree, err := render.GitTree(repo.repo, first)
	if err != nil {
		b.Fatal(err)
	}
	ks := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": "apps", "namespace": "flux-system"},
		"spec": map[string]any{"targetNamespace": "shop", "images": []any{map[string]any{"name": "nginx", "newTag": "1.27"}},
			"commonMetadata": map[string]any{"labels": map[string]any{"team": "shop"}},
			"postBuild":      map[string]any{"substitute": map[string]any{"CLUSTER_NAME": "prod-eu-1"}}},
	}}
	vars := prepare.FluxVariables{Values: map[string]string{"CLUSTER_NAME": "prod-eu-1"}}
	for _, flux := range []bool{false, true} {
		name := "plain-kustomize"
		if flux {
			name = "as-kustomize-controller"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				r := render.New(render.Options{})
				for _, o := range overlays {
					t, opts := tree, render.BuildOptions{}
					if flux {
						if t, err = prepare.FluxTree(tree, o, ks); err != nil {
							b.Fatal(err)
						}
						opts.LoadAnywhere = true
					}
					res, err := r.RenderWith(context.Background(), t, []string{o}, opts)
					if err != nil {
						b.Fatal(err)
					}
					objs, err := res.Overlays[0].Objects()
					if err != nil || res.Overlays[0].Err() != nil {
						b.Fatal(err, res.Overlays[0].Err())
					}
					if flux {
						if _, err := prepare.FluxFinish(objs, ks, vars); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N*len(overlays)), "ms/overlay")
		})
	}
}
