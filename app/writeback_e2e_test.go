package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/render/reconciler"
)

// plainAPI is a Deployment in a plain directory of manifests, as `flux
// bootstrap` cluster directories hold them: no kustomization of its own.
const plainAPI = `# The API tier, applied by Flux from this directory.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: NS
spec:
  replicas: 2 # two for the PDB
  selector:
    matchLabels: {app: api}
  template:
    metadata:
      labels: {app: api}
    spec:
      containers:
      - name: api
        image: registry.example.com/api:2.0.0
`

// fluxKustomization is the Kustomization of a discovered Flux target.
func fluxKustomization(ns, name, path string) string {
	return `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec: {interval: 1s, path: ./` + path + `, prune: true, sourceRef: {kind: GitRepository, name: fleet}}`
}

// TestAPlainFluxDirectoryIsWrittenBack: a Flux Kustomization on a plain
// directory of manifests (Flux generates its kustomization), discovered in
// the cluster. Someone scales its Deployment: the drift pull request edits
// the manifest that holds it, comment kept, and nothing else; the branch,
// built as Flux builds it, renders the live value.
func TestAPlainFluxDirectoryIsWrittenBack(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 500*time.Millisecond, nil)
	d.stop()
	d.cfg.Targets = []config.Target{{Repo: fullName, Path: "clusters/*", Cluster: "test", Policy: d.cfg.Targets[0].Policy}}
	cl := d.cfg.Clusters["test"]
	cl.Discover = &config.Discover{Flux: true, Namespaces: []string{d.env.Namespace}}
	d.cfg.Clusters["test"] = cl
	d.start()
	kubetest.InstallCRDs(t, d.env, kubetest.ReconcilerCRDs(t)...)
	commit := d.commit(d.main, map[string]any{"clusters/prod/api.yaml": plainAPI})
	d.push(map[string]plumbing.Hash{"refs/heads/main": commit})
	host, _, _ := strings.Cut(string(discover.HostOf(d.gh.URL())), ":")
	d.apply(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: NS}
spec: {interval: 1m, url: 'https://` + host + `/acme/gitops', ref: {branch: main}}`)
	d.apply(fluxKustomization(d.env.Namespace, "prod-apps", "clusters/prod"))
	d.applyFlux(commit, "clusters/prod")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.srv.App.targets.Run(ctx)
	eventually(t, func() bool {
		ts, _ := d.srv.App.targetsOf(fullName)
		for _, tg := range ts {
			if tg.Found != nil && tg.Path == "clusters/prod" {
				return true
			}
		}
		return false
	}, "the Kustomization to be discovered")
	d.run()

	if _, err := d.env.Client.AppsV1().Deployments(d.env.Namespace).Patch(context.Background(), "api", types.MergePatchType,
		[]byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	d.waitFor("a drift pull request", func() bool { return len(d.openPulls()) == 1 })
	pr := d.openPulls()[0]
	tip := d.branchNamed(pr.HeadRef)
	files := d.changedFiles(tip)
	if len(files) != 1 || !strings.Contains(files["clusters/prod/api.yaml"], "replicas: 4 # two for the PDB") {
		t.Fatalf("the commit changes %v, want the manifest's replicas with its comment:\n%s", keys(files), files["clusters/prod/api.yaml"])
	}
	if got := d.fluxReplicas(tip, "clusters/prod"); got != 4 {
		t.Errorf("the branch, built as Flux builds it, renders %d replicas, want the live 4", got)
	}
}

// applyFlux builds a plain directory at a commit as Flux does and applies it
// as kustomize-controller.
func (d *driftWorld) applyFlux(commit plumbing.Hash, dir string) {
	d.t.Helper()
	kubetest.Apply(d.t, d.env.Config, "kustomize-controller", d.fluxBuild(commit, dir)...)
}

// fluxBuild renders a plain directory at a commit with Flux's generator.
func (d *driftWorld) fluxBuild(commit plumbing.Hash, dir string) []*unstructured.Unstructured {
	d.t.Helper()
	tree, err := render.GitTree(d.local, commit.String())
	if err != nil {
		d.t.Fatal(err)
	}
	ks := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": "x", "namespace": d.env.Namespace}, "spec": map[string]any{"path": "./" + dir}}}
	ft, err := reconciler.FluxTree(tree, dir, ks)
	if err != nil {
		d.t.Fatal(err)
	}
	res, err := render.New(render.DefaultOptions()).Render(context.Background(), ft, []string{dir})
	if err != nil {
		d.t.Fatal(err)
	}
	objs, err := res.Overlays[0].Objects()
	if err != nil {
		d.t.Fatal(err)
	}
	return objs
}

// fluxReplicas is the replicas of the Deployment a plain directory renders.
func (d *driftWorld) fluxReplicas(commit plumbing.Hash, dir string) int64 {
	for _, o := range d.fluxBuild(commit, dir) {
		if o.GetKind() == "Deployment" {
			return replicasOf(o.Object)
		}
	}
	d.t.Fatal("no Deployment rendered")
	return 0
}
