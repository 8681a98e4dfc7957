package reconcile

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/helmtest"
	"github.com/driftback/driftback/internal/testfs"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/reconcile/charts"
	"github.com/driftback/driftback/render"
)

// withShopChart adds render/helm's shop chart to files, at dir.
func withShopChart(t *testing.T, files map[string]string, dir string) map[string]string {
	t.Helper()
	for name, b := range testfs.Read(t, filepath.Join("..", "render", "helm", "testdata", "shop")) {
		files[dir+"/"+name] = string(b)
	}
	return files
}

const shopRelease = `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: shop
  namespace: shop
spec:
  interval: 10m
  targetNamespace: prod
  chart:
    spec:
      chart: ./charts/shop
      sourceRef:
        kind: GitRepository
        name: flux-system
        namespace: flux-system
      valuesFiles:
      - charts/shop/values.yaml
      - apps/shop/values-prod.yaml
  values:
    replicaCount: 3
`

func shopKustomization(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: shop, namespace: flux-system}
spec:
  path: ./apps/shop
  sourceRef: {kind: GitRepository, name: flux-system}
  prune: true
`), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// TestAHelmReleasesChartIsRenderedAsHelmControllerInstallsIt: a
// Kustomization applies a HelmRelease whose chart is in the same
// repository. The target's render holds the HelmRelease and the release's
// objects: named as helm-controller names the release (targetNamespace-name),
// in its target namespace, with its values over the valuesFiles over the
// chart's defaults, helm-controller's labels on each, and the hook listed,
// not rendered. The chart's crds/ are not objects of the release:
// helm-controller creates them and never deletes them.
func TestAHelmReleasesChartIsRenderedAsHelmControllerInstallsIt(t *testing.T) {
	files := withShopChart(t, map[string]string{
		"apps/shop/kustomization.yaml": "resources: [release.yaml]\n",
		"apps/shop/release.yaml":       shopRelease,
		"apps/shop/values-prod.yaml":   "storage: {size: 20Gi}\ncache: {enabled: false}\n",
	}, "charts/shop")
	tg := fluxTarget(shopKustomization(t))
	tg.Path = "apps/shop"
	caps := &Capabilities{KubeVersion: "1.31.4", APIVersions: []string{"policy/v1/PodDisruptionBudget"}}
	b := Build(context.Background(), render.New(render.Options{}), testfs.Tree(t, files), tg, Vars{Helm: caps})
	if len(b.Problems) > 0 {
		t.Fatal(b.Problems)
	}
	got := map[string]*unstructured.Unstructured{}
	for _, o := range b.Objects {
		got[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
	}
	for _, want := range []string{"HelmRelease/shop/shop", "Deployment/prod/prod-shop", "PersistentVolumeClaim/prod/prod-shop-data",
		"Service/prod/prod-shop", "PodDisruptionBudget/prod/prod-shop"} {
		if got[want] == nil {
			t.Errorf("the render lacks %s; it has %v", want, keysOf(got))
		}
	}
	if got["ConfigMap/prod/prod-shop-cache"] != nil || got["Job/prod/prod-shop-migrate"] != nil || got["CustomResourceDefinition//orders.shop.example.com"] != nil {
		t.Errorf("the turned-off subchart, the hook or crds/ rendered: %v", keysOf(got))
	}
	if d := got["Deployment/prod/prod-shop"]; d != nil {
		if replicasOf(d) != 3 || d.GetLabels()["helm.toolkit.fluxcd.io/name"] != "shop" || d.GetLabels()["helm.toolkit.fluxcd.io/namespace"] != "shop" {
			t.Errorf("the Deployment: replicas %d, labels %v", replicasOf(d), d.GetLabels())
		}
		if _, ok := d.GetLabels()["kustomize.toolkit.fluxcd.io/name"]; ok {
			t.Error("a release's object carries kustomize-controller's labels")
		}
	}
	if pvc := got["PersistentVolumeClaim/prod/prod-shop-data"]; pvc != nil {
		if size, _, _ := unstructured.NestedString(pvc.Object, "spec", "resources", "requests", "storage"); size != "20Gi" {
			t.Errorf("the claim's size %q, want the values file's 20Gi", size)
		}
	}
	if len(b.Releases) != 1 || b.Releases[0].Chart != "shop 1.2.0" || len(b.Releases[0].Hooks) != 1 || !strings.Contains(b.Releases[0].Hooks[0], "Job/prod-shop-migrate") {
		t.Errorf("releases %+v", b.Releases)
	}
}

// TestPostRenderersChangeWhatTheChartRenders: a HelmRelease's kustomize
// postRenderers (a patch and an image) and its commonMetadata are applied
// as helm-controller applies them, its own labels last.
func TestPostRenderersChangeWhatTheChartRenders(t *testing.T) {
	release := shopRelease + `  commonMetadata:
    labels: {team: payments, helm.toolkit.fluxcd.io/name: not-this}
    annotations: {owner: payments@example.com}
  postRenderers:
  - kustomize:
      patches:
      - target: {kind: Deployment}
        patch: |
          - op: add
            path: /spec/template/spec/priorityClassName
            value: critical
      images:
      - {name: registry.example.com/shop, newName: mirror.example.com/shop, newTag: 9.9.9}
`
	files := withShopChart(t, map[string]string{
		"apps/shop/kustomization.yaml": "resources: [release.yaml]\n",
		"apps/shop/release.yaml":       release,
		"apps/shop/values-prod.yaml":   "{}\n",
	}, "charts/shop")
	tg := fluxTarget(shopKustomization(t))
	tg.Path = "apps/shop"
	b := Build(context.Background(), render.New(render.Options{}), testfs.Tree(t, files), tg, Vars{Helm: &Capabilities{KubeVersion: "1.31.4"}})
	if len(b.Problems) > 0 || len(b.Releases) != 1 || b.Releases[0].NotRendered != "" {
		t.Fatalf("problems %v, releases %+v", b.Problems, b.Releases)
	}
	var d *unstructured.Unstructured
	for _, o := range b.Objects {
		if o.GetKind() == "Deployment" {
			d = o
		}
	}
	if d == nil {
		t.Fatal("no Deployment")
	}
	pc, _, _ := unstructured.NestedString(d.Object, "spec", "template", "spec", "priorityClassName")
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	image, _, _ := unstructured.NestedString(containers[0].(map[string]any), "image")
	if pc != "critical" || image != "mirror.example.com/shop:9.9.9" {
		t.Errorf("patched priorityClassName %q, image %q", pc, image)
	}
	l, a := d.GetLabels(), d.GetAnnotations()
	if l["team"] != "payments" || a["owner"] != "payments@example.com" || l[fluxHelmNameLabel] != "shop" || l[fluxHelmNamespaceLabel] != "shop" {
		t.Errorf("labels %v, annotations %v", l, a)
	}
}

// TestAReleaseItCannotRenderSaysWhy: a chart from a HelmRepository, one
// from another GitRepository, and any release when the cluster's version is
// unknown are not rendered, each with its reason; the HelmRelease itself is
// still in the render.
func TestAReleaseItCannotRenderSaysWhy(t *testing.T) {
	for name, c := range map[string]struct {
		release string
		caps    *Capabilities
		want    string
	}{
		"helm repository": {strings.Replace(shopRelease, "kind: GitRepository", "kind: HelmRepository", 1), &Capabilities{KubeVersion: "1.31.4"}, "HelmRepository flux-system/flux-system, and charts are not fetched here"},
		"other git":       {strings.Replace(shopRelease, "name: flux-system\n", "name: charts\n", 1), &Capabilities{KubeVersion: "1.31.4"}, "GitRepository flux-system/charts, not this target's repository"},
		"no version":      {shopRelease, nil, "the cluster's Kubernetes version is not known"},
	} {
		t.Run(name, func(t *testing.T) {
			files := withShopChart(t, map[string]string{
				"apps/shop/kustomization.yaml": "resources: [release.yaml]\n",
				"apps/shop/release.yaml":       c.release,
				"apps/shop/values-prod.yaml":   "{}\n",
			}, "charts/shop")
			tg := fluxTarget(shopKustomization(t))
			tg.Path = "apps/shop"
			b := Build(context.Background(), render.New(render.Options{}), testfs.Tree(t, files), tg, Vars{Helm: c.caps})
			if len(b.Problems) > 0 || len(b.Objects) != 1 || b.Objects[0].GetKind() != "HelmRelease" {
				t.Fatalf("problems %v, objects %d", b.Problems, len(b.Objects))
			}
			if len(b.Releases) != 1 || !strings.Contains(b.Releases[0].NotRendered, c.want) {
				t.Errorf("releases %+v, want %q", b.Releases, c.want)
			}
		})
	}
}

// TestAChartFromARepositoryIsFetchedOnlyWhenTrusted: a HelmRelease whose
// chart is in an HTTP repository, and one whose chartRef is an
// OCIRepository. A repository the default branch does not name is not
// asked anything; once it does, the chart is fetched at the version the
// range picks and rendered.
func TestAChartFromARepositoryIsFetchedOnlyWhenTrusted(t *testing.T) {
	shop := func(v string) map[string][]byte {
		files := testfs.Read(t, filepath.Join("..", "render", "helm", "testdata", "shop"))
		files["Chart.yaml"] = []byte(strings.Replace(string(files["Chart.yaml"]), "version: 1.2.0", "version: "+v, 1))
		return files
	}
	repo, reg := helmtest.NewRepo(t), helmtest.NewRegistry(t)
	for _, v := range []string{"1.2.0", "1.3.0", "2.0.0"} {
		repo.Add(t, shop(v))
		reg.Push(t, "charts", shop(v))
	}
	for name, c := range map[string]struct{ sources, source string }{
		"http": {`apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {name: charts, namespace: shop}
spec: {url: "` + repo.URL + `"}
`, `  chart:
    spec:
      chart: shop
      version: 1.x
      sourceRef: {kind: HelmRepository, name: charts}
`},
		"oci": {`apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: shop, namespace: shop}
spec:
  url: oci://` + reg.Host() + `/charts/shop
  ref: {semver: 1.x}
`, `  chartRef: {kind: OCIRepository, name: shop}
`},
	} {
		t.Run(name, func(t *testing.T) {
			release := "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: shop, namespace: shop}\nspec:\n" + c.source + "  values: {replicaCount: 4}\n"
			tree := testfs.Tree(t, map[string]string{
				"apps/shop/kustomization.yaml": "resources: [sources.yaml, release.yaml]\n",
				"apps/shop/sources.yaml":       c.sources,
				"apps/shop/release.yaml":       release,
			})
			tg := fluxTarget(shopKustomization(t))
			tg.Path = "apps/shop"
			fetcher := charts.New(charts.Options{PrivateHosts: []string{"127.0.0.1"}})
			before := repo.Requests() + reg.Requests()
			vars := Vars{Helm: &Capabilities{KubeVersion: "1.31.4"}, Charts: &ChartAccess{Fetcher: fetcher, Trust: charts.NewTrust(nil)}}
			b := Build(context.Background(), render.New(render.Options{}), tree, tg, vars)
			if len(b.Releases) != 1 || !strings.Contains(b.Releases[0].NotRendered, "is not trusted yet") {
				t.Fatalf("a repository new in the pull request: %+v %v", b.Releases, b.Problems)
			}
			if n := repo.Requests() + reg.Requests() - before; n != 0 {
				t.Errorf("an untrusted repository got %d requests", n)
			}
			// Merged, the default branch names it.
			vars.Charts.Trust = charts.NewTrust(nil).With(tree)
			b = Build(context.Background(), render.New(render.Options{}), tree, tg, vars)
			if len(b.Problems) > 0 || len(b.Releases) != 1 || b.Releases[0].NotRendered != "" || b.Releases[0].Chart != "shop 1.3.0" {
				t.Fatalf("trusted: releases %+v, problems %v", b.Releases, b.Problems)
			}
			got := map[string]*unstructured.Unstructured{}
			for _, o := range b.Objects {
				got[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
			}
			if d := got["Deployment/shop/shop"]; d == nil || replicasOf(d) != 4 {
				t.Errorf("the release's Deployment: %v", keysOf(got))
			}
		})
	}
}

func keysOf(m map[string]*unstructured.Unstructured) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestDriftOnAReleaseIsTracedToTheValueThatSetsIt: a person scales the
// release's Deployment to 5. Of the HelmRelease's values equal to the
// rendered 3 (replicaCount, and a decoy the chart never reads), only
// replicaCount, rendered again at 5, changes the replicas and nothing else:
// the edit is that value of the HelmRelease, named by its namespace and
// name (the planner writes it: TestAReleaseValueIsWrittenInItsOverlay). The
// image, which no value of the HelmRelease sets (the chart's appVersion),
// is not traced, and says why.
func TestDriftOnAReleaseIsTracedToTheValueThatSetsIt(t *testing.T) {
	release := strings.Replace(shopRelease, "  values:\n    replicaCount: 3\n", "  values:\n    replicaCount: 3 # the floor\n    notes: {copies: 3}\n", 1)
	files := withShopChart(t, map[string]string{
		"apps/shop/kustomization.yaml": "resources: [release.yaml]\n",
		"apps/shop/release.yaml":       release,
		"apps/shop/values-prod.yaml":   "cache: {enabled: false}\n",
	}, "charts/shop")
	tg := fluxTarget(shopKustomization(t))
	tg.Path = "apps/shop"
	r := render.New(render.Options{Origins: true})
	tree := testfs.Tree(t, files)
	b := Build(context.Background(), r, tree, tg, Vars{Helm: &Capabilities{KubeVersion: "1.31.4"}})
	if len(b.Problems) > 0 || b.Charts == nil {
		t.Fatalf("problems %v, charts %v", b.Problems, b.Charts)
	}
	edit, why, ok := b.Charts.Trace(context.Background(), "Deployment/prod/prod-shop", fieldpath.MakePathOrDie("spec", "replicas"), int64(5))
	if !ok || why != "" {
		t.Fatalf("replicas not traced: %q (%v)", why, ok)
	}
	if got := edit.Release.String() + " " + edit.Path.String(); got != "HelmRelease/shop/shop .spec.values.replicaCount" || !object.SameJSON(edit.Was, 3) {
		t.Errorf("traced to %s (was %v), want HelmRelease/shop/shop .spec.values.replicaCount (3)", got, edit.Was)
	}
	image := fieldpath.MakePathOrDie("spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "shop"), "image")
	if _, why, ok := b.Charts.Trace(context.Background(), "Deployment/prod/prod-shop", image, "registry.example.com/shop:9.9.9"); !ok || !strings.Contains(why, "from no value of its values") {
		t.Errorf("the image: %q (%v), want it not traced, saying why", why, ok)
	}
	if _, _, ok := b.Charts.Trace(context.Background(), "ConfigMap/prod/other", image, "x"); ok {
		t.Error("an object of no release was claimed")
	}
}

// sharedShopBase is the usual Flux layout of one release for two
// clusters: the HelmRelease in a base, each overlay patching its values.
func sharedShopBase(t *testing.T) map[string]string {
	return withShopChart(t, map[string]string{
		"apps/base/shop/kustomization.yaml": "resources: [release.yaml]\n",
		"apps/base/shop/release.yaml": `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: shop, namespace: shop}
spec:
  chart:
    spec:
      chart: ./charts/shop
      sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}
  values:
    replicaCount: 2 # both clusters
    cache: {enabled: false}
`,
		"apps/staging/kustomization.yaml": `resources: [../base/shop]
patches:
- path: shop-values.yaml
`,
		"apps/staging/shop-values.yaml": `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: shop, namespace: shop}
spec:
  values:
    image: {tag: 1.3.0-rc.1}
`,
		"apps/production/kustomization.yaml": "resources: [../base/shop]\n",
	}, "charts/shop")
}

// chartWriteBack renders tg as its reconciler does, scales the releases'
// Deployments (by namespace/name) live, and plans the write-back of that
// drift with the chart's values traced.
func chartWriteBack(t *testing.T, tree *render.Tree, tg Target, scaled map[string]int64) *prgen.Plan {
	t.Helper()
	ctx := context.Background()
	r := render.New(render.Options{Origins: true})
	vars := Vars{Helm: &Capabilities{KubeVersion: "1.31.4"}}
	b := Build(ctx, r, tree, tg, vars)
	if len(b.Problems) > 0 || b.Charts == nil {
		t.Fatalf("the target does not build: %v", b.Problems)
	}
	var live []*unstructured.Unstructured
	for _, o := range b.Objects {
		l := o.DeepCopy()
		if n, ok := scaled[l.GetNamespace()+"/"+l.GetName()]; ok && l.GetKind() == "Deployment" {
			if err := unstructured.SetNestedField(l.Object, n, "spec", "replicas"); err != nil {
				t.Fatal(err)
			}
		}
		live = append(live, l)
	}
	target, err := drift.Compare(ctx, livestate.NewObjectReader(live), drift.Input{Path: tg.Path, Head: b.Objects}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var changes []drift.Change
	for _, ch := range target.Drift {
		if ch.Action != drift.ActionUpdate {
			continue
		}
		for i := range ch.Fields {
			ch.Fields[i].Manager = "kubectl-scale" // a dump records no managers
		}
		changes = append(changes, ch)
	}
	if len(changes) != len(scaled) {
		t.Fatalf("%d objects drifted, want the %d scaled", len(changes), len(scaled))
	}
	wb, generated := WriteBack(tg, tree)
	plan, err := prgen.Make(ctx, prgen.Input{Tree: tree, Overlay: tg.Path, Renderer: r, Drift: changes, Build: wb, Generated: generated, Charts: b.Charts})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestAReleaseValueIsWrittenInItsOverlay: the staging cluster's shop is
// scaled to 4. Its HelmRelease is in a base production builds too, so the
// value is written in staging's own patch of it, never the base, and the
// staging overlay, rendered again as Flux builds it, gives the
// HelmRelease replicaCount 4 and nothing else changed; production's render
// is as it was.
func TestAReleaseValueIsWrittenInItsOverlay(t *testing.T) {
	files := sharedShopBase(t)
	tree := testfs.Tree(t, files)
	ks := shopKustomization(t)
	_ = unstructured.SetNestedField(ks.Object, "./apps/staging", "spec", "path")
	tg := fluxTarget(ks)
	tg.Path = "apps/staging"
	plan := chartWriteBack(t, tree, tg, map[string]int64{"shop/shop": 4})
	if len(plan.Codified) != 1 || len(plan.Manual) != 0 {
		t.Fatalf("codified %+v, manual %+v; want the replicas written", plan.Codified, plan.Manual)
	}
	c := plan.Codified[0]
	if c.Object != "Deployment/shop/shop" || c.Path != ".spec.replicas" || c.Strategy != prgen.StrategyChartValue {
		t.Errorf("codified %+v", c)
	}
	for f := range plan.Files {
		if !strings.HasPrefix(f, "apps/staging/") {
			t.Errorf("the plan edits %s, outside the staging overlay:\n%s", f, plan.Files[f])
		}
	}
	edited := map[string]string{}
	for k, v := range files {
		edited[k] = v
	}
	for f, b := range plan.Files {
		edited[f] = string(b)
	}
	r := render.New(render.Options{})
	for _, overlay := range []struct {
		path     string
		replicas int64
	}{{"apps/staging", 4}, {"apps/production", 2}} {
		res, err := r.Render(context.Background(), testfs.Tree(t, edited), []string{overlay.path})
		if err != nil {
			t.Fatal(err)
		}
		objs, err := res.Overlays[0].Objects()
		if err != nil || len(objs) != 1 {
			t.Fatalf("%s: %v %v", overlay.path, objs, err)
		}
		if n, _, _ := unstructured.NestedFieldNoCopy(objs[0].Object, "spec", "values", "replicaCount"); !sameNumber(n, overlay.replicas) {
			t.Errorf("%s renders replicaCount %v, want %d", overlay.path, n, overlay.replicas)
		}
	}
}

// TestAReleaseIsMatchedByNamespaceAndName: two teams' HelmReleases share
// the name shop in one file of the overlay. Team b's Deployment is
// scaled: team b's HelmRelease is edited, team a's is as it was. Both are
// scaled: both edits are in the file, one on top of the other.
func TestAReleaseIsMatchedByNamespaceAndName(t *testing.T) {
	release := func(ns string, replicas int) string {
		return fmt.Sprintf(`apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: shop, namespace: %s}
spec:
  chart:
    spec:
      chart: ./charts/shop
      sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}
  values:
    replicaCount: %d
    cache: {enabled: false}
`, ns, replicas)
	}
	files := withShopChart(t, map[string]string{
		"apps/shop/kustomization.yaml": "resources: [releases.yaml]\n",
		"apps/shop/releases.yaml":      release("team-a", 2) + "---\n" + release("team-b", 2),
	}, "charts/shop")
	tg := fluxTarget(shopKustomization(t))
	tg.Path = "apps/shop"
	plan := chartWriteBack(t, testfs.Tree(t, files), tg, map[string]int64{"team-b/shop": 5})
	if len(plan.Codified) != 1 || plan.Codified[0].Object != "Deployment/team-b/shop" {
		t.Fatalf("codified %+v, manual %+v", plan.Codified, plan.Manual)
	}
	if got, want := string(plan.Files["apps/shop/releases.yaml"]), release("team-a", 2)+"---\n"+release("team-b", 5); got != want {
		t.Errorf("releases.yaml:\n%s\nwant:\n%s", got, want)
	}
	plan = chartWriteBack(t, testfs.Tree(t, files), tg, map[string]int64{"team-a/shop": 3, "team-b/shop": 5})
	if len(plan.Codified) != 2 || len(plan.Manual) != 0 {
		t.Fatalf("both scaled: codified %+v, manual %+v", plan.Codified, plan.Manual)
	}
	if got, want := string(plan.Files["apps/shop/releases.yaml"]), release("team-a", 3)+"---\n"+release("team-b", 5); got != want {
		t.Errorf("both scaled, releases.yaml:\n%s\nwant:\n%s", got, want)
	}
}

func sameNumber(v any, n int64) bool {
	switch x := v.(type) {
	case int64:
		return x == n
	case float64:
		return x == float64(n)
	case int:
		return int64(x) == n
	}
	return false
}

// TestUntrustedRepositoriesAreNeverAsked: a chart in Git whose Chart.yaml
// depends on a chart repository, and an Argo CD Application in the
// target's render that installs a chart from one. Neither repository is
// named by the default branch or app.yml: neither is asked anything, and
// each says why. Once trusted, both are fetched.
func TestUntrustedRepositoriesAreNeverAsked(t *testing.T) {
	repo := helmtest.NewRepo(t)
	cache := testfs.Read(t, filepath.Join("..", "render", "helm", "testdata", "shop", "charts", "cache"))
	repo.Add(t, cache)
	repo.Add(t, testfs.Read(t, filepath.Join("..", "render", "helm", "testdata", "shop")))
	files := withShopChart(t, map[string]string{
		"apps/shop/kustomization.yaml": "resources: [release.yaml, app.yaml]\n",
		"apps/shop/release.yaml":       shopRelease,
		"apps/shop/values-prod.yaml":   "{}\n",
		"apps/shop/app.yaml": `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop-argo, namespace: argocd}
spec:
  project: default
  source: {repoURL: "` + repo.URL + `", chart: shop, targetRevision: 1.2.0}
  destination: {server: "https://kubernetes.default.svc", namespace: shop-argo}
`,
	}, "charts/shop")
	// The chart's own copy of its dependency is gone: it comes from the
	// repository, as Chart.yaml says.
	for p := range files {
		if strings.HasPrefix(p, "charts/shop/charts/") {
			delete(files, p)
		}
	}
	files["charts/shop/Chart.yaml"] = strings.Replace(files["charts/shop/Chart.yaml"], "condition: cache.enabled", "condition: cache.enabled\n  repository: "+repo.URL, 1)
	tree := testfs.Tree(t, files)
	tg := fluxTarget(shopKustomization(t))
	tg.Path = "apps/shop"
	vars := Vars{Helm: &Capabilities{KubeVersion: "1.31.4"}, Charts: &ChartAccess{Fetcher: charts.New(charts.Options{PrivateHosts: []string{"127.0.0.1"}}), Trust: charts.NewTrust(nil)}}
	b := Build(context.Background(), render.New(render.Options{}), tree, tg, vars)
	notes := strings.Join(ReleaseNotes(nil, b.Releases), "\n")
	for _, want := range []string{"HelmRelease/shop/shop is compared as an object; its chart is not rendered: its dependency cache comes from chart repository",
		"Application/argocd/shop-argo is compared as an object; its chart is not rendered: chart repository " + repo.URL + " is not trusted yet"} {
		if !strings.Contains(notes, want) {
			t.Errorf("the notes do not say %q:\n%s", want, notes)
		}
	}
	if n := repo.Requests(); n != 0 {
		t.Errorf("the untrusted repository got %d requests", n)
	}
	vars.Charts.Trust = charts.NewTrust([]string{repo.URL})
	b = Build(context.Background(), render.New(render.Options{}), tree, tg, vars)
	if len(b.Problems) > 0 {
		t.Fatal(b.Problems)
	}
	for _, r := range b.Releases {
		if r.NotRendered != "" {
			t.Errorf("trusted, %s is not rendered: %s", r.Object, r.NotRendered)
		}
	}
	if repo.Requests() == 0 {
		t.Error("the trusted repository was never asked")
	}
}
