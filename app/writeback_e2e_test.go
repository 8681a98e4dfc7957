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
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/internal/githubfake"
	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/reconcile"
	"github.com/driftback/driftback/reconcile/prepare"
	"github.com/driftback/driftback/render"
)

// plainWeb is a Deployment in a plain directory of manifests, as `flux
// bootstrap` cluster directories hold them: no kustomization of its own.
const plainWeb = `# The web tier, applied by Flux from this directory.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: NS
spec:
  replicas: 2 # two for the PDB
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: registry.example.com/web:2.0.0
`

// fluxKustomization is the Kustomization of a discovered Flux target.
func fluxKustomization(ns, name, path string) string {
	return `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec: {interval: 1s, path: ./` + path + `, prune: true, sourceRef: {kind: GitRepository, name: fleet}}`
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

// shopOverlay is an overlay whose image an Argo CD Application's kustomize
// options set: the Deployment names the image by its short name.
var shopOverlay = map[string]any{
	"shop/kustomization.yaml": "resources: [shop.yaml]\n",
	"shop/shop.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec:
      containers:
      - {name: shop, image: shop}
`,
}

// shopApplication is the Application that builds shop/, as the app-of-apps
// directory argocd/apps holds it and as the cluster has it.
func shopApplication(host string) string {
	return `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: shop
  namespace: NS
spec:
  project: default
  source:
    repoURL: 'https://` + host + `/acme/gitops'
    path: shop
    kustomize:
      images:
      - shop=registry.example.com/shop:1.0.0 # the release
  destination: {server: https://kubernetes.default.svc, namespace: NS}
  syncPolicy: {automated: {prune: true}}
`
}

// TestEachTargetsDriftIsWrittenWhereItsValueLives: one repository, three
// discovered targets as public Flux and Argo CD repositories shape them: a
// plain directory Flux builds (no kustomization of its own), a directory
// Flux builds with postBuild variables (set inline in its Kustomization's
// manifest, from a ConfigMap in Git and from a Secret; both manifests
// applied by another Kustomization), and an overlay an
// Argo CD Application sets the image of with kustomize options, the
// Application's manifest in the app-of-apps directory (and a copy of it
// for another cluster, told apart by what the app of apps applies). A
// person changes each live. Each target gets a drift pull request editing the files where
// the values live, comments kept: the plain manifest; the Kustomization's
// substitute and the text beside a kept ${REGISTRY}; the Application's
// images entry. Each branch, built as its reconciler builds it, renders
// the live values. The field built from the Secret is on the dashboard,
// hidden, and in no pull request.
func TestEachTargetsDriftIsWrittenWhereItsValueLives(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 500*time.Millisecond, nil)
	d.stop()
	policy := d.cfg.Targets[0].Policy
	d.cfg.Targets = []config.Target{{Repo: fullName, Path: "clusters/*", Cluster: "test", Policy: policy},
		{Repo: fullName, Path: "apps/*", Cluster: "test", Policy: policy}, {Repo: fullName, Path: "shop", Cluster: "test", Policy: policy}}
	// The Kustomization that applies infra/ (the api's Kustomization and
	// its variables): compared, its own drift not proposed.
	infra := config.Target{Repo: fullName, Path: "infra", Cluster: "test", Policy: policy}
	infra.Policy.Codify = config.CodifyOff
	d.cfg.Targets = append(d.cfg.Targets, infra)
	ns := d.env.Namespace
	cl := d.cfg.Clusters["test"]
	cl.Discover = &config.Discover{Flux: true, ArgoCD: true, Namespaces: []string{ns}, ArgoCDNamespace: ns}
	d.cfg.Clusters["test"] = cl
	d.start()
	kubetest.InstallCRDs(t, d.env, kubetest.ReconcilerCRDs(t)...)
	kubetest.ArgoCDDefaultProject(t, d.env, ns)
	host, _, _ := strings.Cut(string(discover.HostOf(d.gh.URL())), ":")
	files := map[string]any{"clusters/prod/web.yaml": plainWeb,
		"apps/api/api.yaml": variablesAPI, "infra/api.yaml": variablesKustomization, "infra/vars.yaml": clusterVars,
		// The app of apps's copy, and a byte-identical one for another
		// cluster: only the parent's render tells which is applied here.
		"argocd/apps/shop.yaml": shopApplication(host), "argocd/staging/shop.yaml": shopApplication(host)}
	for k, v := range shopOverlay {
		files[k] = v
	}
	commit := d.commit(d.main, files)
	d.push(map[string]plumbing.Hash{"refs/heads/main": commit})

	// The reconcilers' objects, and what they applied.
	d.apply(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: NS}
spec: {interval: 1m, url: 'https://` + host + `/acme/gitops', ref: {branch: main}}`)
	d.apply(fluxKustomization(ns, "prod-apps", "clusters/prod"))
	d.applyFlux(commit, "clusters/prod")
	const secret = "tok-9d1e55"
	// What the infra Kustomization applied, with Flux's owner labels.
	owned := func(y string) string {
		return strings.Replace(y, "  namespace: NS\n", "  namespace: NS\n  labels: {kustomize.toolkit.fluxcd.io/name: infra, kustomize.toolkit.fluxcd.io/namespace: NS}\n", 1)
	}
	d.apply(fluxKustomization(ns, "infra", "infra"))
	d.apply(owned(clusterVars))
	d.apply(`apiVersion: v1
kind: Secret
metadata: {name: tokens, namespace: NS}
stringData: {TOKEN: ` + secret + `}`)
	d.apply(owned(variablesKustomization))
	values := map[string]string{"REPLICAS": "2", "REGISTRY": "registry.example.com", "TOKEN": secret}
	kubetest.Apply(t, d.env.Config, "kustomize-controller", d.fluxBuildWith(commit, "apps/api", values)...)
	// The app of apps, and the Application it applied (Argo CD's label
	// tracking).
	d.apply(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: root, namespace: NS}
spec:
  project: default
  source: {repoURL: 'https://` + host + `/acme/gitops', path: argocd/apps}
  destination: {server: https://kubernetes.default.svc, namespace: NS}
  syncPolicy: {automated: {prune: true, selfHeal: true}}`)
	d.apply(strings.Replace(shopApplication(host), "  namespace: NS\n", "  namespace: NS\n  labels: {app.kubernetes.io/instance: root}\n", 1))
	kubetest.Apply(t, d.env.Config, "argocd-controller", d.argoBuild(commit, shopApplication(host))...)
	d.discovered("clusters/prod", "apps/api", "shop", "argocd/apps", "infra")
	d.run()

	// A person at work on each.
	patch := func(kind, name string, p string) {
		t.Helper()
		var err error
		switch kind {
		case "Deployment":
			_, err = d.env.Client.AppsV1().Deployments(ns).Patch(context.Background(), name, types.StrategicMergePatchType, []byte(p), metav1.PatchOptions{FieldManager: "kubectl-edit"})
		default:
			_, err = d.env.Client.CoreV1().ConfigMaps(ns).Patch(context.Background(), name, types.MergePatchType, []byte(p), metav1.PatchOptions{FieldManager: "kubectl-edit"})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	const typed = "typed-by-hand-77"
	patch("Deployment", "web", `{"spec":{"replicas":4}}`)
	patch("Deployment", "api", `{"spec":{"replicas":4,"template":{"spec":{"containers":[{"name":"api","image":"registry.example.com/api:2.1.0"}]}}}}`)
	patch("ConfigMap", "client", `{"data":{"token":"`+typed+`"}}`)
	patch("Deployment", "shop", `{"spec":{"template":{"spec":{"containers":[{"name":"shop","image":"registry.example.com/shop:1.1.0"}]}}}}`)

	byFile := map[string]githubfake.Pull{}
	edits := map[string]map[string]string{}
	d.waitFor("a drift pull request per target, with every change", func() bool {
		pulls := d.openPulls()
		if len(pulls) != 3 {
			return false
		}
		for _, pr := range pulls {
			f := d.changedFiles(d.branchNamed(pr.HeadRef))
			for name := range f {
				byFile[name], edits[pr.HeadRef] = pr, f
			}
		}
		return strings.Contains(byFile["apps/api/api.yaml"].Body, "2.1.0") && strings.Contains(byFile["infra/api.yaml"].Body, ".spec.replicas")
	})

	// The plain directory: its manifest, nothing else.
	web := edits[byFile["clusters/prod/web.yaml"].HeadRef]
	if len(web) != 1 || !strings.Contains(web["clusters/prod/web.yaml"], "replicas: 4 # two for the PDB") {
		t.Errorf("the plain directory's pull request changes %v, want the manifest's replicas with its comment:\n%s", keys(web), web["clusters/prod/web.yaml"])
	}
	if got := d.fluxReplicas(d.branchNamed(byFile["clusters/prod/web.yaml"].HeadRef), "clusters/prod"); got != 4 {
		t.Errorf("the plain directory's branch, built as Flux builds it, renders %d replicas, want the live 4", got)
	}

	// The variables: where each is set.
	pr := byFile["infra/api.yaml"]
	api := edits[pr.HeadRef]
	if len(api) != 2 || !strings.Contains(api["infra/api.yaml"], `REPLICAS: "4" # the production floor`) ||
		!strings.Contains(api["apps/api/api.yaml"], "image: ${REGISTRY}/api:2.1.0") || !strings.Contains(api["apps/api/api.yaml"], "replicas: ${REPLICAS} # per cluster") {
		t.Errorf("the variables' pull request changes %v:\n%s\n%s", keys(api), api["infra/api.yaml"], api["apps/api/api.yaml"])
	}
	branchValues := map[string]string{"REPLICAS": "4", "REGISTRY": "registry.example.com", "TOKEN": secret}
	for _, o := range d.fluxBuildWith(d.branchNamed(pr.HeadRef), "apps/api", branchValues) {
		if o.GetKind() == "Deployment" && (replicasOf(o.Object) != 4 || containerImage(o) != "registry.example.com/api:2.1.0") {
			t.Errorf("the variables' branch renders replicas %d, image %v; want the live 4 and 2.1.0", replicasOf(o.Object), containerImage(o))
		}
	}

	// The Application's kustomize image: in its manifest, comment kept.
	shop := edits[byFile["argocd/apps/shop.yaml"].HeadRef]
	if want := strings.Replace(d.ns(shopApplication(host)), "shop:1.0.0 # the release", "shop:1.1.0 # the release", 1); len(shop) != 1 || shop["argocd/apps/shop.yaml"] != want {
		t.Errorf("the Application's pull request changes %v, want its manifest's image only:\n%s", keys(shop), shop["argocd/apps/shop.yaml"])
	}
	for _, o := range d.argoBuild(d.branchNamed(byFile["argocd/apps/shop.yaml"].HeadRef), shop["argocd/apps/shop.yaml"]) {
		if containerImage(o) != "registry.example.com/shop:1.1.0" {
			t.Errorf("the Application's branch, built as Argo CD builds it, renders %s, want the live 1.1.0", containerImage(o))
		}
	}

	// The Secret's field: on the dashboard, hidden; nowhere else.
	d.dashboardSays("the Secret's field hidden", "ConfigMap/"+ns+"/client", "(hidden")
	var prs strings.Builder
	for _, p := range d.openPulls() {
		prs.WriteString(p.Body)
		for _, c := range edits[p.HeadRef] {
			prs.WriteString(c)
		}
	}
	for _, where := range []string{prs.String(), d.issueBodies()} {
		if strings.Contains(where, secret) || strings.Contains(where, typed) {
			t.Errorf("the Secret's value, or what was typed over it, is shown:\n%s", where)
		}
	}
}

// containerImage is the first container's image of a rendered workload.
func containerImage(o *unstructured.Unstructured) string {
	c, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if len(c) == 0 {
		return ""
	}
	s, _ := c[0].(map[string]any)["image"].(string)
	return s
}

// argoBuild builds shop/ at a commit as Argo CD builds it for the
// Application manifest app.
func (d *driftWorld) argoBuild(commit plumbing.Hash, app string) []*unstructured.Unstructured {
	d.t.Helper()
	tree, err := render.GitTree(d.local, commit.String())
	if err != nil {
		d.t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(d.ns(app)), &u.Object); err != nil {
		d.t.Fatal(err)
	}
	var tg targets.Target
	tg.Path = "shop"
	tg.Found = &discover.Found{Reconciler: discover.ReconcilerArgoCD, Path: "shop", Application: u,
		Kustomize: discover.ApplicationKustomize(u), DestinationNamespace: d.env.Namespace}
	b := reconcile.Build(context.Background(), render.New(render.DefaultOptions()), tree, tg.Build(), reconcile.Vars{})
	if len(b.Problems) > 0 || len(b.Objects) == 0 {
		d.t.Fatalf("shop does not build as Argo CD builds it: %v", b.Problems)
	}
	return b.Objects
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
	ft, err := prepare.FluxTree(tree, dir, ks)
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
	objs, err := prepare.FluxFinish(d.fluxBuild(commit, dir), ks, prepare.FluxVariables{Values: values})
	if err != nil {
		d.t.Fatal(err)
	}
	return objs
}

// discovered runs discovery until it finds a reconciler object on each
// path; it stops with the test.
func (d *driftWorld) discovered(paths ...string) {
	d.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d.t.Cleanup(cancel)
	go d.srv.App.targets.Run(ctx)
	eventually(d.t, func() bool {
		ts, _ := d.srv.App.targetsOf(fullName)
		found := 0
		for _, p := range paths {
			for _, tg := range ts {
				if tg.Found != nil && tg.Path == p {
					found++
					break
				}
			}
		}
		return found == len(paths)
	}, "the reconciler objects on "+strings.Join(paths, ", ")+" to be discovered")
}
