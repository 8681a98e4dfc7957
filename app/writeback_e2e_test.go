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
	d.discovered("clusters/prod")
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

// variablesAPI is a directory Flux builds with postBuild variables, as
// repositories that share one directory across clusters write it.
const variablesAPI = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: NS
spec:
  replicas: ${REPLICAS} # per cluster
  selector:
    matchLabels: {app: api}
  template:
    metadata:
      labels: {app: api}
    spec:
      containers:
      - name: api
        image: ${REGISTRY}/api:2.0.0
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: client
  namespace: NS
data:
  token: ${TOKEN}
`

// variablesKustomization is the Kustomization that builds it, in Git and
// in the cluster: REPLICAS inline, REGISTRY from a ConfigMap in Git, TOKEN
// from a Secret.
const variablesKustomization = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: api
  namespace: NS
spec:
  interval: 1s
  path: ./apps/api
  prune: true
  sourceRef: {kind: GitRepository, name: fleet}
  postBuild:
    substitute:
      REPLICAS: "2" # the production floor
    substituteFrom:
    - kind: ConfigMap
      name: cluster-vars
    - kind: Secret
      name: tokens
`

const clusterVars = `apiVersion: v1
kind: ConfigMap
metadata:
  name: cluster-vars
  namespace: NS
data:
  REGISTRY: registry.example.com # the mirror
`

// TestAPostBuildVariableIsWrittenWhereItIsSet: a Flux Kustomization shares
// a plain directory through postBuild variables, set inline in its manifest
// in Git, from a ConfigMap in Git and from a Secret. Someone scales the
// Deployment, sets its image, and edits the field built from the Secret.
// The drift pull request writes the replicas into the Kustomization's
// substitute, and the image's text beside the kept ${REGISTRY}; the branch,
// built and substituted as Flux does, renders both live values. The field
// built from the Secret is on the dashboard, hidden, and in no pull request.
func TestAPostBuildVariableIsWrittenWhereItIsSet(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 500*time.Millisecond, nil)
	d.stop()
	d.cfg.Targets = []config.Target{{Repo: fullName, Path: "apps/*", Cluster: "test", Policy: d.cfg.Targets[0].Policy}}
	cl := d.cfg.Clusters["test"]
	cl.Discover = &config.Discover{Flux: true, Namespaces: []string{d.env.Namespace}}
	d.cfg.Clusters["test"] = cl
	d.start()
	kubetest.InstallCRDs(t, d.env, kubetest.ReconcilerCRDs(t)...)
	commit := d.commit(d.main, map[string]any{"apps/api/api.yaml": variablesAPI, "clusters/prod/api.yaml": variablesKustomization, "clusters/prod/vars.yaml": clusterVars})
	d.push(map[string]plumbing.Hash{"refs/heads/main": commit})
	host, _, _ := strings.Cut(string(discover.HostOf(d.gh.URL())), ":")
	d.apply(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: NS}
spec: {interval: 1m, url: 'https://` + host + `/acme/gitops', ref: {branch: main}}`)
	const secret = "tok-9d1e55"
	d.apply(clusterVars)
	d.apply(`apiVersion: v1
kind: Secret
metadata: {name: tokens, namespace: NS}
stringData: {TOKEN: ` + secret + `}`)
	d.apply(variablesKustomization)
	values := map[string]string{"REPLICAS": "2", "REGISTRY": "registry.example.com", "TOKEN": secret}
	kubetest.Apply(t, d.env.Config, "kustomize-controller", d.fluxBuildWith(commit, "apps/api", values)...)
	d.discovered("apps/api")
	d.run()

	const typed = "typed-by-hand-77"
	if _, err := d.env.Client.AppsV1().Deployments(d.env.Namespace).Patch(context.Background(), "api", types.StrategicMergePatchType,
		[]byte(`{"spec":{"replicas":4,"template":{"spec":{"containers":[{"name":"api","image":"registry.example.com/api:2.1.0"}]}}}}`),
		metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.env.Client.CoreV1().ConfigMaps(d.env.Namespace).Patch(context.Background(), "client", types.MergePatchType,
		[]byte(`{"data":{"token":"`+typed+`"}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	d.waitFor("a drift pull request with both changes", func() bool {
		p := d.openPulls()
		return len(p) == 1 && strings.Contains(p[0].Body, "2.1.0") && strings.Contains(p[0].Body, ".spec.replicas")
	})
	pr := d.openPulls()[0]
	tip := d.branchNamed(pr.HeadRef)
	files := d.changedFiles(tip)
	if len(files) != 2 || !strings.Contains(files["clusters/prod/api.yaml"], `REPLICAS: "4" # the production floor`) ||
		!strings.Contains(files["apps/api/api.yaml"], "image: ${REGISTRY}/api:2.1.0") || !strings.Contains(files["apps/api/api.yaml"], "replicas: ${REPLICAS} # per cluster") {
		t.Fatalf("the commit changes %v:\n%s\n%s", keys(files), files["clusters/prod/api.yaml"], files["apps/api/api.yaml"])
	}
	// The branch as Flux builds it: the variables from its Kustomization.
	branchValues := map[string]string{"REPLICAS": "4", "REGISTRY": "registry.example.com", "TOKEN": secret}
	for _, o := range d.fluxBuildWith(tip, "apps/api", branchValues) {
		if o.GetKind() != "Deployment" {
			continue
		}
		c, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if replicasOf(o.Object) != 4 || c[0].(map[string]any)["image"] != "registry.example.com/api:2.1.0" {
			t.Errorf("the branch renders replicas %d, image %v; want the live 4 and 2.1.0", replicasOf(o.Object), c[0].(map[string]any)["image"])
		}
	}
	// The Secret's field: on the dashboard, hidden; nowhere else.
	d.dashboardSays("the Secret's field hidden", "ConfigMap/"+d.env.Namespace+"/client", "(hidden")
	for _, where := range []string{pr.Body, files["apps/api/api.yaml"], files["clusters/prod/api.yaml"], d.issueBodies()} {
		if strings.Contains(where, secret) || strings.Contains(where, typed) {
			t.Errorf("the Secret's value, or what was typed over it, is shown:\n%s", where)
		}
	}
}

// issueBodies are every issue's body and comment, joined.
func (d *driftWorld) issueBodies() string {
	var b strings.Builder
	for _, is := range d.gh.Issues(fullName) {
		b.WriteString(is.Body + "\n")
		for _, c := range d.gh.Comments(fullName, is.Number) {
			b.WriteString(c.Body + "\n")
		}
	}
	return b.String()
}

// fluxBuildWith builds a directory at a commit as Flux does, with postBuild
// values.
func (d *driftWorld) fluxBuildWith(commit plumbing.Hash, dir string, values map[string]string) []*unstructured.Unstructured {
	d.t.Helper()
	ks := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": "api", "namespace": d.env.Namespace}, "spec": map[string]any{"path": "./" + dir, "postBuild": map[string]any{}}}}
	objs, err := reconciler.FluxFinish(d.fluxBuild(commit, dir), ks, reconciler.FluxVariables{Values: values})
	if err != nil {
		d.t.Fatal(err)
	}
	return objs
}

// discovered runs discovery until it finds the Kustomization on path; it
// stops with the test.
func (d *driftWorld) discovered(path string) {
	d.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d.t.Cleanup(cancel)
	go d.srv.App.targets.Run(ctx)
	eventually(d.t, func() bool {
		ts, _ := d.srv.App.targetsOf(fullName)
		for _, tg := range ts {
			if tg.Found != nil && tg.Path == path {
				return true
			}
		}
		return false
	}, "the Kustomization on "+path+" to be discovered")
}
