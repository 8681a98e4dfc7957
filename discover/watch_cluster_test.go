package discover_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/internal/kubetest"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// reconcilerObjects are what a cluster running Flux and Argo CD holds. NS is
// the test's namespace.
const reconcilerObjects = `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: NS}
spec:
  interval: 1m
  url: ssh://git@github.com/acme/gitops.git
  ref: {branch: main}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: enterprise, namespace: NS}
spec:
  interval: 1m
  url: https://ghe.example.com/platform/fleet.git
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: NS}
spec:
  interval: 10m
  path: ./apps/production
  prune: true
  sourceRef: {kind: GitRepository, name: fleet}
  targetNamespace: shop
  patches:
  - patch: '{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 3}}'
  postBuild:
    substitute: {REGION: eu-west-1}
    substituteFrom:
    - {kind: ConfigMap, name: cluster-vars}
    - {kind: Secret, name: cluster-secrets}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: paused, namespace: NS}
spec:
  prune: false
  interval: 5m
  path: ./apps/staging
  sourceRef: {kind: GitRepository, name: fleet}
  suspend: true
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop, namespace: NS}
spec:
  project: default
  source:
    repoURL: git@github.com:acme/gitops.git
    path: apps/shop
    kustomize: {images: ["web=registry.example.com/web:2.0.0"]}
  destination: {server: https://kubernetes.default.svc}
  syncPolicy: {automated: {prune: true}}
  ignoreDifferences:
  - {group: apps, kind: Deployment, jsonPointers: [/spec/replicas]}
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: redis, namespace: NS}
spec:
  project: default
  source: {repoURL: https://charts.bitnami.com/bitnami, chart: redis, targetRevision: 18.0.0}
  destination: {server: https://kubernetes.default.svc}
  syncPolicy: {automated: {}}
`

func applyAll(t *testing.T, env *kubetest.Env, y string) {
	t.Helper()
	for _, doc := range strings.Split(strings.ReplaceAll(y, "NS", env.Namespace), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		kubetest.Apply(t, env.Setup, "kubectl", u)
	}
}

func TestWatcherFollowsFluxAndArgoCD(t *testing.T) {
	env := kubetest.New(t)
	kubetest.InstallCRDs(t, env, kubetest.ReconcilerCRDs(t)...)
	kubetest.ArgoCDDefaultProject(t, env, env.Namespace)
	applyAll(t, env, reconcilerObjects+`---
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm, namespace: NS}
data: {application.instanceLabelKey: argocd.example.com/app, application.resourceTrackingMethod: annotation}
`)
	w, err := discover.NewWatcher(env.Config, discover.Options{Flux: true, ArgoCD: true, Namespaces: []string{env.Namespace},
		Settings: discover.Settings{On: "prod", Host: "github.com", ArgoCDNamespace: env.Namespace}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	byObject := waitFound(t, w, 4)
	ns := env.Namespace

	apps := byObject["Kustomization "+ns+"/apps"]
	if apps == nil || apps.Repo != "acme/gitops" || apps.Path != "apps/production" || apps.Branch != "main" || apps.Cluster != "prod" ||
		!apps.Prune || apps.Interval != 10*time.Minute || apps.NotRendered != "" || apps.Suspended != "" ||
		apps.Tracking != (drift.Tracking{FluxName: "apps", FluxNamespace: ns}) || apps.Flux == nil {
		t.Errorf("Flux Kustomization with an SSH source: %+v", apps)
	}
	if paused := byObject["Kustomization "+ns+"/paused"]; paused == nil || !strings.Contains(paused.Suspended, "until reconciliation resumes") {
		t.Errorf("a suspended Kustomization says so: %+v", paused)
	}
	shop := byObject["Application "+ns+"/shop"]
	if shop == nil || shop.Repo != "acme/gitops" || shop.Path != "apps/shop" || shop.Cluster != "prod" || !shop.Prune ||
		shop.Kustomize == nil || len(shop.Kustomize.Images) != 1 || len(shop.Ignore) != 1 || shop.Tracking != (drift.Tracking{ArgoCDApp: "shop", ArgoCDInstanceLabel: "argocd.example.com/app", ArgoCDTrackingMethod: "annotation"}) {
		t.Errorf("Argo CD Application with kustomize images and ignoreDifferences: %+v", shop)
	}
	if redis := byObject["Application "+ns+"/redis"]; redis == nil || !strings.Contains(redis.NotRendered, "Helm chart redis") {
		t.Errorf("a Helm Application is listed as not rendered: %+v", redis)
	}

	// A new Application, and a GitRepository moving to GitHub Enterprise,
	// take effect without a restart.
	applyAll(t, env, `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: billing, namespace: NS}
spec:
  project: default
  source: {repoURL: https://github.com/acme/gitops, path: apps/billing, targetRevision: release}
  destination: {name: in-cluster}
  syncPolicy: {automated: {selfHeal: true}}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: NS}
spec:
  interval: 1m
  url: https://ghe.example.com/platform/fleet.git
  ref: {branch: main}
`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		byObject = index(w.Found())
		billing := byObject["Application "+ns+"/billing"]
		apps := byObject["Kustomization "+ns+"/apps"]
		if billing != nil && apps != nil && apps.NotRendered != "" {
			if billing.Repo != "acme/gitops" || billing.Branch != "release" || !billing.SelfHeal || billing.Suspended != "" {
				t.Errorf("the new Application: %+v", billing)
			}
			if !strings.Contains(apps.NotRendered, "not a repository on github.com") {
				t.Errorf("a source on another host: %q", apps.NotRendered)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("changes to the reconcilers' objects were not followed: %v", byObject)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if p := w.Problems(); len(p) > 0 {
		t.Errorf("problems: %v", p)
	}
}

func TestListReadsGitHubEnterpriseSources(t *testing.T) {
	env := kubetest.New(t)
	kubetest.InstallCRDs(t, env, kubetest.ReconcilerCRDs(t)...)
	applyAll(t, env, reconcilerObjects+`---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: platform, namespace: NS}
spec:
  interval: 10m
  prune: false
  path: ./clusters/prod
  sourceRef: {kind: GitRepository, name: enterprise}
`)
	found, problems, err := discover.List(context.Background(), env.Config, discover.Options{Flux: true, Namespaces: []string{env.Namespace},
		Settings: discover.Settings{On: "prod", Host: discover.HostOf("https://ghe.example.com/api/v3/")}})
	if err != nil || len(problems) > 0 {
		t.Fatal(err, problems)
	}
	byObject := index(found)
	if p := byObject["Kustomization "+env.Namespace+"/platform"]; p == nil || p.Repo != "platform/fleet" || p.Path != "clusters/prod" || p.Branch != "master" || p.NotRendered != "" {
		t.Errorf("a Kustomization of a GitHub Enterprise repository: %+v", p)
	}
	if a := byObject["Kustomization "+env.Namespace+"/apps"]; a == nil || a.Repo != "" || a.NotRendered == "" {
		t.Errorf("a github.com source is not served by a GitHub Enterprise App: %+v", a)
	}
	if _, ok := byObject["Application "+env.Namespace+"/shop"]; ok {
		t.Error("Argo CD was read though only Flux was asked for")
	}
}

func waitFound(t *testing.T, w *discover.Watcher, n int) map[string]*discover.Found {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if f := w.Found(); w.Synced() && len(f) >= n {
			return index(f)
		}
		if time.Now().After(deadline) {
			t.Fatalf("discovery found %d objects, want %d; problems %v", len(w.Found()), n, w.Problems())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func index(fs []*discover.Found) map[string]*discover.Found {
	out := map[string]*discover.Found{}
	for _, f := range fs {
		out[f.Object] = f
	}
	return out
}

// TestAnApplicationCountsOnlyAsItsAppProjectAllows: the watcher reads Argo
// CD's AppProjects and follows them: an Application whose project does not
// exist, or does not permit its destination, is listed as not rendered with
// why, and counts once a project permits it.
func TestAnApplicationCountsOnlyAsItsAppProjectAllows(t *testing.T) {
	env := kubetest.New(t)
	kubetest.InstallCRDs(t, env, kubetest.ReconcilerCRDs(t)...)
	applyAll(t, env, `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: team-app, namespace: NS}
spec:
  project: team
  destination: {server: 'https://kubernetes.default.svc', namespace: kube-system}
  source: {repoURL: 'https://github.com/acme/gitops', path: apps/team}
`)
	w, err := discover.NewWatcher(env.Config, discover.Options{ArgoCD: true, Namespaces: []string{env.Namespace},
		Settings: discover.Settings{On: "prod", Host: "github.com", ArgoCDNamespace: env.Namespace}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	name := "Application " + env.Namespace + "/team-app"
	wait := func(what string, ok func(*discover.Found) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if f := index(w.Found())[name]; w.Synced() && f != nil && ok(f) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v", what, index(w.Found())[name])
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	wait("a project that does not exist", func(f *discover.Found) bool {
		return strings.Contains(f.NotRendered, "its AppProject team does not exist")
	})
	project := `apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: team, namespace: NS}
spec:
  sourceRepos: ['https://github.com/acme/*']
  destinations: [{server: 'https://kubernetes.default.svc', namespace: 'team-*'}]
`
	applyAll(t, env, project)
	wait("a project that leaves out its destination", func(f *discover.Found) bool {
		return strings.Contains(f.NotRendered, "does not permit its destination")
	})
	applyAll(t, env, strings.Replace(project, "namespace: 'team-*'", "namespace: '*'", 1))
	wait("a project that permits it", func(f *discover.Found) bool { return f.NotRendered == "" && f.Repo == "acme/gitops" })
}

// TestWatcherCountsWhatItLeavesOut: reconciler objects in namespaces the
// options leave out are counted by namespace (and again as they come),
// said with the setting that brings them in; every namespace read leaves
// nothing out.
func TestWatcherCountsWhatItLeavesOut(t *testing.T) {
	env := kubetest.New(t)
	kubetest.InstallCRDs(t, env, kubetest.ReconcilerCRDs(t)...)
	tenant := env.Namespace + "-tenant"
	if _, err := env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.CoreV1().Namespaces().Delete(context.Background(), tenant, metav1.DeleteOptions{})
	})
	ks := func(name string) string {
		return "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: " + name + ", namespace: " + tenant + "}\nspec: {interval: 10m, path: ./" + name + ", prune: true, sourceRef: {kind: GitRepository, name: fleet}}\n"
	}
	applyAll(t, env, ks("media")+"---\n"+ks("games"))
	w, err := discover.NewWatcher(env.Config, discover.Options{Flux: true, Namespaces: []string{env.Namespace}, Recheck: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	count := func() int {
		counts, why := w.LeftOut()
		if why != "" {
			t.Fatal(why)
		}
		for _, l := range counts {
			if l.Kind == "Flux Kustomizations" {
				return l.Namespaces[tenant]
			}
		}
		return 0
	}
	kubetest.Eventually(t, 30*time.Second, "the tenant's Kustomizations to be counted", func() bool { return count() == 2 })
	applyAll(t, env, ks("music"))
	kubetest.Eventually(t, 30*time.Second, "a third to be counted", func() bool { return count() == 3 })
	counts, _ := w.LeftOut()
	if s := counts[0].Say("clusters.prod.discover.namespaces"); !strings.Contains(s, tenant+": 3") || !strings.Contains(s, "in namespaces clusters.prod.discover.namespaces leaves out") {
		t.Errorf("said as %q", s)
	}
	all, err := discover.CountLeftOut(context.Background(), env.Config, discover.Options{Flux: true})
	if err != nil || len(all) != 0 {
		t.Errorf("reading every namespace leaves out %v (%v)", all, err)
	}
}
