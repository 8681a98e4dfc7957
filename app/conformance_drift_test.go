package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/internal/githubfake"
	"github.com/driftback/driftback/internal/kubetest"
)

// TestDriftOfADiscoveredFluxTarget: a Flux Kustomization on a kustomize
// overlay (no build fields, so its sources are what is built) is a target
// of its own; someone scales its Deployment, the change stays past the
// Kustomization's interval, and the drift pull request writes it into the
// overlay, as for a target app.yml names, no sooner than the
// Kustomization's interval and 30 s, though an app.yml glob gives it a
// shorter quiet period. An Argo CD Helm Application beside it renders a
// Deployment that someone scales too: that drift is on the dashboard with
// why, in no pull request and no error of any drift check.
func TestDriftOfADiscoveredFluxTarget(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 500*time.Millisecond, nil)
	d.stop()
	// No target of its own in app.yml: a glob gives the discovered one its
	// policy (a short quiet period; the Kustomization's interval still
	// bounds it from below, plus 30 s).
	d.cfg.Targets = []config.Target{{Repo: fullName, Path: "deploy/*", Cluster: "test", Policy: d.cfg.Targets[0].Policy},
		{Repo: fullName, Path: "charts/*", Cluster: "test", Policy: d.cfg.Targets[0].Policy}}
	// Argo CD in a namespace of its own, with its default project, as its
	// install makes it.
	argoNS := d.env.Namespace + "-argocd"
	if _, err := d.env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: argoNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cl := d.cfg.Clusters["test"]
	cl.Discover = &config.Discover{Flux: true, ArgoCD: true, Namespaces: []string{d.env.Namespace, argoNS}, ArgoCDNamespace: argoNS}
	d.cfg.Clusters["test"] = cl
	d.start()
	kubetest.InstallCRDs(t, d.env, kubetest.ReconcilerCRDs(t)...)
	kubetest.ArgoCDDefaultProject(t, d.env, argoNS)
	host, _, _ := strings.Cut(string(discover.HostOf(d.gh.URL())), ":")
	d.apply(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: NS}
spec: {interval: 1m, url: 'https://` + host + `/acme/gitops', ref: {branch: main}}`)
	d.apply(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: prod, namespace: NS}
spec: {interval: 1s, path: ./deploy/prod, prune: true, sourceRef: {kind: GitRepository, name: fleet}}`)
	chart := d.commit(d.main, map[string]any{"charts/cache/Chart.yaml": "apiVersion: v2\nname: cache\nversion: 0.1.0\n", "charts/cache/values.yaml": "replicas: 1\n",
		"charts/cache/templates/deployment.yaml": cacheDeployment("{{ .Values.replicas }}")})
	d.push(map[string]plumbing.Hash{"refs/heads/main": chart})
	d.apply(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: cache, namespace: ` + argoNS + `}
spec:
  project: default
  source: {repoURL: 'https://` + host + `/acme/gitops', path: charts/cache}
  destination: {server: 'https://kubernetes.default.svc', namespace: NS}
  syncPolicy: {automated: {prune: true}}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.srv.App.targets.Run(ctx)
	eventually(t, func() bool {
		ts, _ := d.srv.App.targetsOf(fullName)
		found := 0
		for _, tg := range ts {
			if tg.Found != nil {
				found++
			}
		}
		return found == 2
	}, "the Kustomization and the Application to be discovered")
	d.run()
	var live map[string]any
	if err := yaml.Unmarshal([]byte(d.ns(strings.Replace(cacheDeployment("1"), "metadata:\n  name: cache\n", "metadata:\n  name: cache\n  namespace: NS\n  labels: {app.kubernetes.io/instance: cache}\n", 1))), &live); err != nil {
		t.Fatal(err)
	}
	kubetest.Apply(t, d.env.Config, "argocd-controller", &unstructured.Unstructured{Object: live})

	d.scale(5, "kubectl")
	d.patch("Deployment", "cache", "kubectl", `{"spec":{"replicas":3}}`)
	// Flux reverts a change within its interval: none is proposed before
	// the interval and 30 s have passed, whatever a glob's quiet period.
	web := "Deployment/" + d.env.Namespace + "/web"
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if p := pullAbout(d.openPulls(), web); p != nil {
			t.Fatalf("a drift pull request before the Kustomization's interval and 30 s passed: %+v", p)
		}
	}
	d.waitFor("a drift pull request", func() bool { return pullAbout(d.openPulls(), web) != nil })
	pr := *pullAbout(d.openPulls(), web)
	for _, want := range []string{"Deployment/" + d.env.Namespace + "/web", ".spec.replicas", "`5`"} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("body lacks %q:\n%s", want, pr.Body)
		}
	}
	tip := d.branchNamed(pr.HeadRef)
	if got := replicasOf(d.renderedWeb(tip)); got != 5 {
		t.Errorf("the branch %s renders replicas %d, want the live 5", pr.HeadRef, got)
	}
	if files := d.changedFiles(tip); len(files) != 1 || !strings.Contains(files["deploy/prod/kustomization.yaml"], "count: 5") {
		t.Errorf("the commit changes %v, want the overlay's replicas count", keys(files))
	}
	// The Application's chart renders the cache Deployment: its scale is
	// proposed as a manual edit with why, never written into the chart's
	// templates.
	cache := "Deployment/" + d.env.Namespace + "/cache"
	d.waitFor("the chart's drift", func() bool { return pullAbout(d.openPulls(), cache) != nil })
	cachePR := *pullAbout(d.openPulls(), cache)
	if !strings.Contains(cachePR.Body, "`.spec.replicas` is `3` live: Argo CD renders it from a Helm chart") {
		t.Errorf("the chart's drift pull request does not say why it writes nothing:\n%s", cachePR.Body)
	}
	if files := d.changedFiles(d.branchNamed(cachePR.HeadRef)); len(files) != 0 {
		t.Errorf("the chart's drift changes %v", keys(files))
	}
	d.settle(3)
	if n := d.logs.count(`"level":"ERROR"`); n > 0 {
		t.Errorf("%d errors logged; a chart's drift is no error of each check:\n%s", n, d.logs.lines(`"level":"ERROR"`))
	}
}

// pullAbout is the pull request among pulls whose body names what, or nil.
func pullAbout(pulls []githubfake.Pull, what string) *githubfake.Pull {
	for i := range pulls {
		if strings.Contains(pulls[i].Body, what) {
			return &pulls[i]
		}
	}
	return nil
}

// cacheDeployment is the cache chart's Deployment, with replicas.
func cacheDeployment(replicas string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: cache
spec:
  replicas: ` + replicas + `
  selector: {matchLabels: {app: cache}}
  template:
    metadata: {labels: {app: cache}}
    spec:
      containers: [{name: cache, image: redis:7}]
`
}
