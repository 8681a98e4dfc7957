package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/internal/kubetest"
)

// TestDriftOfADiscoveredFluxTarget: a Flux Kustomization on a kustomize
// overlay (no build fields, so its sources are what is built) is a target
// of its own; someone scales its Deployment, the change stays past the
// Kustomization's interval, and the drift pull request writes it into the
// overlay, as for a target app.yml names, no sooner than the
// Kustomization's interval and 30 s, though an app.yml glob gives it a
// shorter quiet period. An Argo CD Helm Application beside it, listed as not
// rendered, is not an error of every drift check.
func TestDriftOfADiscoveredFluxTarget(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 500*time.Millisecond, nil)
	d.stop()
	// No target of its own in app.yml: a glob gives the discovered one its
	// policy (a short quiet period; the Kustomization's interval still
	// bounds it from below, plus 30 s).
	d.cfg.Targets = []config.Target{{Repo: fullName, Path: "deploy/*", Cluster: "test", Policy: d.cfg.Targets[0].Policy}}
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
	chart := d.commit(d.main, map[string]any{"charts/cache/Chart.yaml": "apiVersion: v2\nname: cache\nversion: 0.1.0\n", "charts/cache/values.yaml": "replicas: 1\n"})
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

	d.scale(5, "kubectl")
	// Flux reverts a change within its interval: none is proposed before
	// the interval and 30 s have passed, whatever a glob's quiet period.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if p := d.openPulls(); len(p) != 0 {
			t.Fatalf("a drift pull request before the Kustomization's interval and 30 s passed: %+v", p)
		}
	}
	d.waitFor("a drift pull request", func() bool { return len(d.openPulls()) == 1 })
	pr := d.openPulls()[0]
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
	d.settle(3)
	if n := d.logs.count(`"level":"ERROR"`); n > 0 {
		t.Errorf("%d errors logged; a source listed as not rendered is no error of each check:\n%s", n, d.logs.lines(`"level":"ERROR"`))
	}
}
