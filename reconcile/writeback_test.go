package reconcile

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/internal/testfs"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/reconcile/prepare"
	"github.com/driftback/driftback/render"
)

// shopWeb is an overlay whose image and replicas its reconciler's options
// set: the Deployment names the image by its short name only.
var shopWeb = map[string]string{
	"shop/kustomization.yaml": "resources: [web.yaml]\n",
	"shop/web.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: web}
`,
}

// shopApplication is the app-of-apps directory's manifest of the
// Application that builds shop/, after another Application in the file.
const shopApplication = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: docs, namespace: argocd}
spec:
  source: {repoURL: https://github.com/acme/gitops, path: docs}
  destination: {server: https://kubernetes.default.svc, namespace: docs}
---
# The shop, pinned by the release team.
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: shop
  namespace: argocd
spec:
  project: default
  source:
    repoURL: https://github.com/acme/gitops
    path: shop
    kustomize:
      images:
      - web=registry.example.com/web:2.0.0 # the release
      replicas:
      - name: web
        count: 2 # the floor
  destination: {server: https://kubernetes.default.svc, namespace: shop}
`

// TestAnApplicationsKustomizeOptionsAreWrittenInItsManifest: an Argo CD
// Application sets its overlay's image and replicas with kustomize options,
// and its manifest is in the repository, where the app of apps applies it
// from (found by Argo CD's tracking label). A person sets the image and
// scales the Deployment: both are written into the Application's manifest,
// comments kept, nothing else touched; built again as Argo CD builds it
// from the edited manifest, the overlay renders the live values.
func TestAnApplicationsKustomizeOptionsAreWrittenInItsManifest(t *testing.T) {
	files := map[string]string{"apps/apps.yaml": shopApplication}
	for k, v := range shopWeb {
		files[k] = v
	}
	tree := testfs.Tree(t, files)
	app := docOf(t, shopApplication, 1)
	app.SetLabels(map[string]string{"app.kubernetes.io/instance": "root"})
	tg := argoTarget(app)
	root := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "root", "namespace": "argocd"}, "spec": map[string]any{"source": map[string]any{"path": "apps"}}}}
	var parent Target
	parent.Repo, parent.Path = tg.Repo, "apps"
	parent.Found = &discover.Found{Reconciler: discover.ReconcilerArgoCD, Object: "Application argocd/root", On: tg.Found.On, Path: "apps",
		Application: root, Tracking: drift.Tracking{ArgoCDApp: "root"}, DestinationNamespace: "argocd"}
	all := []Target{parent, tg}
	i, ok := Parent(tg, all)
	found := all[max(i, 0)]
	if !ok || found.Found.Object != "Application argocd/root" {
		t.Fatalf("the parent is %+v (%v), want the app of apps", found.Found, ok)
	}
	sources := Sources(context.Background(), render.New(render.Options{Origins: true}), tree, found)
	plan := writeBack(t, tree, tg, Vars{}, sources, func(live *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(live.Object, int64(4), "spec", "replicas")
		setImage(live, "registry.example.com/web:2.1.0")
	})
	if len(plan.Codified) != 2 || len(plan.Manual) != 0 {
		t.Fatalf("codified %+v, manual %+v; want both written", plan.Codified, plan.Manual)
	}
	for _, c := range plan.Codified {
		if c.File != "apps/apps.yaml" {
			t.Errorf("%s is written into %s (%s), want the Application's manifest", c.Path, c.File, c.Strategy)
		}
	}
	got := string(plan.Files["apps/apps.yaml"])
	want := strings.NewReplacer("web:2.0.0 # the release", "web:2.1.0 # the release", "count: 2 # the floor", "count: 4 # the floor").Replace(shopApplication)
	if got != want {
		t.Fatalf("the manifest is not the original with the two values changed:\n%s", got)
	}
	// Argo CD's build of the edited manifest renders the live values.
	edited := tree.With(plan.Files)
	b := Build(context.Background(), render.New(render.Options{}), edited, argoTarget(docOf(t, got, 1)), Vars{})
	if len(b.Problems) > 0 || len(b.Objects) != 1 {
		t.Fatalf("the edited branch does not build: %v", b.Problems)
	}
	if r := replicasOf(b.Objects[0]); r != 4 || imageOf(b.Objects[0]) != "registry.example.com/web:2.1.0" {
		t.Errorf("the edited branch renders %d replicas of %s", r, imageOf(b.Objects[0]))
	}
}

// TestAnOptionGitDoesNotSetIsNotWrittenThere: the cluster's Application
// sets another image than its manifest in Git (a parent overlay patches
// it), or its manifest is not in the repository: the image is not written
// into the manifest, and the plan says why.
func TestAnOptionGitDoesNotSetIsNotWrittenThere(t *testing.T) {
	for name, c := range map[string]struct{ git, why string }{
		"patched between": {strings.Replace(shopApplication, "web:2.0.0", "web:1.9.0", 1), "is not what the cluster has"},
		"not in Git":      {"", "no Kustomization or Application driftback renders from this repository applies it"},
	} {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{}
			for k, v := range shopWeb {
				files[k] = v
			}
			var sources map[string]string
			if c.git != "" {
				files["apps/apps.yaml"] = c.git
				sources = map[string]string{"Application/argocd/shop": "apps/apps.yaml"}
			}
			plan := writeBack(t, testfs.Tree(t, files), argoTarget(docOf(t, shopApplication, 1)), Vars{}, sources, func(live *unstructured.Unstructured) {
				setImage(live, "registry.example.com/web:2.1.0")
			})
			if len(plan.Codified) != 0 || len(plan.Manual) != 1 {
				t.Fatalf("codified %+v, manual %+v; want the image for a person", plan.Codified, plan.Manual)
			}
			if !strings.Contains(plan.Manual[0].Reason, c.why) {
				t.Errorf("the reason is %q, want it to say %q", plan.Manual[0].Reason, c.why)
			}
		})
	}
}

// fluxApps is a flux-system directory's Kustomization that sets its
// overlay's image, a patch and the namespace.
const fluxApps = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m
  path: ./shop
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
  targetNamespace: shop
  images:
  - name: web
    newName: registry.example.com/web
    newTag: 2.0.0 # the release
  patches:
  - target: {kind: Deployment, name: web}
    patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: web
      spec:
        replicas: 3 # peak season
`

// TestAKustomizationsImagesAndPatchesAreWrittenInItsManifest: a Flux
// Kustomization sets its overlay's image and, with an inline patch, its
// replicas. A person's image and scale are written into the
// Kustomization's manifest in the flux-system directory (the image entry,
// the patch in place), and Flux's build of the edited manifest renders
// them.
func TestAKustomizationsImagesAndPatchesAreWrittenInItsManifest(t *testing.T) {
	files := map[string]string{"clusters/prod/apps.yaml": fluxApps}
	for k, v := range shopWeb {
		files[k] = v
	}
	tree := testfs.Tree(t, files)
	plan := writeBack(t, tree, fluxTarget(docOf(t, fluxApps, 0)), Vars{}, map[string]string{"Kustomization/flux-system/apps": "clusters/prod/apps.yaml"}, func(live *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(live.Object, int64(5), "spec", "replicas")
		setImage(live, "registry.example.com/web:2.1.0")
	})
	if len(plan.Codified) != 2 || len(plan.Manual) != 0 {
		t.Fatalf("codified %+v, manual %+v; want both written", plan.Codified, plan.Manual)
	}
	got := string(plan.Files["clusters/prod/apps.yaml"])
	want := strings.NewReplacer("newTag: 2.0.0 # the release", "newTag: 2.1.0 # the release", "replicas: 3 # peak season", "replicas: 5 # peak season").Replace(fluxApps)
	if got != want || len(plan.Files) != 1 {
		t.Fatalf("the plan writes %v; the manifest is not the original with the two values changed:\n%s", plan.Paths(), got)
	}
	b := Build(context.Background(), render.New(render.Options{}), tree.With(plan.Files), fluxTarget(docOf(t, got, 0)), Vars{})
	if len(b.Problems) > 0 || len(b.Objects) != 1 {
		t.Fatalf("the edited branch does not build: %v", b.Problems)
	}
	if r := replicasOf(b.Objects[0]); r != 5 || imageOf(b.Objects[0]) != "registry.example.com/web:2.1.0" || b.Objects[0].GetNamespace() != "shop" {
		t.Errorf("the edited branch renders %d replicas of %s in %q", r, imageOf(b.Objects[0]), b.Objects[0].GetNamespace())
	}
}

// TestTheManifestOfThisClustersKustomizationIsWritten: one directory
// shared by two clusters, each cluster directory holding its own
// Kustomization flux-system/apps on that path, with its own replicas
// variable and image. The cluster's live changes (a variable, an image) are
// both written into the manifest its parent applies, one edit after the
// other in one file, never the other cluster's.
func TestTheManifestOfThisClustersKustomizationIsWritten(t *testing.T) {
	ks := func(replicas, tag string) string {
		return `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: flux-system}
spec:
  path: ./shop
  postBuild:
    substitute: {REPLICAS: "` + replicas + `"}
  images:
  - {name: web, newName: registry.example.com/web, newTag: ` + tag + `}
`
	}
	files := map[string]string{"clusters/prod/apps.yaml": ks("3", "2.0.0"), "clusters/staging/apps.yaml": ks("1", "1.9.0")}
	for k, v := range shopWeb {
		files[k] = strings.Replace(v, "replicas: 1", "replicas: ${REPLICAS}", 1)
	}
	tree := testfs.Tree(t, files)
	tg := fluxTarget(docOf(t, files["clusters/prod/apps.yaml"], 0))
	vars := Vars{FluxVariables: prepare.FluxVariables{Values: map[string]string{"REPLICAS": "3"}}}
	plan := writeBack(t, tree, tg, vars, map[string]string{"Kustomization/flux-system/apps": "clusters/prod/apps.yaml"}, func(live *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(live.Object, int64(5), "spec", "replicas")
		setImage(live, "registry.example.com/web:2.1.0")
	})
	if len(plan.Codified) != 2 || len(plan.Files) != 1 {
		t.Fatalf("codified %+v, manual %+v, files %v; want both written into one manifest", plan.Codified, plan.Manual, plan.Paths())
	}
	want := strings.NewReplacer(`REPLICAS: "3"`, `REPLICAS: "5"`, "newTag: 2.0.0", "newTag: 2.1.0").Replace(files["clusters/prod/apps.yaml"])
	if got := string(plan.Files["clusters/prod/apps.yaml"]); got != want {
		t.Errorf("the production Kustomization's manifest is\n%s\nwant\n%s", got, want)
	}
}

// TestTheCopyTheParentAppliesIsWritten: two cluster directories hold
// byte-identical Kustomizations flux-system/apps (one shared path, the same
// options), each applied by its cluster's flux-system Kustomization, and a
// stale copy lies in an archive no Kustomization applies. Nothing in the
// documents tells them apart: the parent of the cluster's Kustomization
// (found by its owner labels) renders one file, and only that one is
// written; with no parent known, driftback does not choose.
func TestTheCopyTheParentAppliesIsWritten(t *testing.T) {
	files := map[string]string{"clusters/prod/apps.yaml": fluxApps, "clusters/staging/apps.yaml": fluxApps, ".archive/apps.yaml": fluxApps}
	for k, v := range shopWeb {
		files[k] = v
	}
	tree := testfs.Tree(t, files)
	ks := docOf(t, fluxApps, 0)
	ks.SetLabels(map[string]string{"kustomize.toolkit.fluxcd.io/name": "flux-system", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"})
	tg := fluxTarget(ks)
	root := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": "flux-system", "namespace": "flux-system"}, "spec": map[string]any{"path": "./clusters/prod"}}}
	var parent Target
	parent.Repo, parent.Path = "acme/gitops", "clusters/prod"
	parent.Found = &discover.Found{Reconciler: discover.ReconcilerFlux, Object: "Kustomization flux-system/flux-system", On: "prod", Path: "clusters/prod", Flux: root,
		Tracking: drift.Tracking{FluxName: "flux-system", FluxNamespace: "flux-system"}}
	edit := func(live *unstructured.Unstructured) { setImage(live, "registry.example.com/web:2.1.0") }

	plan := writeBack(t, tree, tg, Vars{}, nil, edit)
	if len(plan.Codified) != 0 || len(plan.Manual) != 1 || !strings.Contains(plan.Manual[0].Reason, "applies it") {
		t.Fatalf("without a parent: codified %+v, manual %+v; want the image left, the parent unknown", plan.Codified, plan.Manual)
	}
	all := []Target{tg, parent}
	i, ok := Parent(tg, all)
	found := all[max(i, 0)]
	if !ok || found.Path != "clusters/prod" {
		t.Fatalf("the parent is %+v (%v), want the flux-system Kustomization on clusters/prod", found.Found, ok)
	}
	sources := Sources(context.Background(), render.New(render.Options{Origins: true}), tree, found)
	if sources["Kustomization/flux-system/apps"] != "clusters/prod/apps.yaml" {
		t.Fatalf("the parent applies the Kustomization from %q", sources["Kustomization/flux-system/apps"])
	}
	plan = writeBack(t, tree, tg, Vars{}, sources, edit)
	if len(plan.Codified) != 1 || strings.Join(plan.Paths(), ",") != "clusters/prod/apps.yaml" {
		t.Fatalf("with its parent: codified %+v, manual %+v, files %v; want the production copy written", plan.Codified, plan.Manual, plan.Paths())
	}
}

// TestWhatCommonMetadataSetsIsNotWrittenBelowIt: a Flux Kustomization
// without variables sets a label on everything it applies
// (commonMetadata). A person's scale is written into the manifest; their
// change of that label is not: written into the manifest, Flux would set
// it back, and the write-back, built as Flux builds, says so.
func TestWhatCommonMetadataSetsIsNotWrittenBelowIt(t *testing.T) {
	tree := testfs.Tree(t, shopWeb)
	ks := docOf(t, `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: flux-system}
spec:
  path: ./shop
  commonMetadata:
    labels: {team: shop}
`, 0)
	plan := writeBack(t, tree, fluxTarget(ks), Vars{}, nil, func(live *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(live.Object, int64(3), "spec", "replicas")
		_ = unstructured.SetNestedField(live.Object, "payments", "metadata", "labels", "team")
	})
	if len(plan.Codified) != 1 || plan.Codified[0].Path != ".spec.replicas" || len(plan.Manual) != 1 || plan.Manual[0].Path != ".metadata.labels.team" {
		t.Fatalf("codified %+v, manual %+v; want the replicas written and the label left", plan.Codified, plan.Manual)
	}
}

// writeBack renders the target as its reconciler does (with vars),
// changes the live Deployment with change, and plans the write-back of the
// drift, the target's parent applying objects from sources.
func writeBack(t *testing.T, tree *render.Tree, tg Target, vars Vars, sources map[string]string, change func(*unstructured.Unstructured)) *prgen.Plan {
	t.Helper()
	ctx := context.Background()
	r := render.New(render.Options{Origins: true})
	b := Build(ctx, r, tree, tg, vars)
	if len(b.Problems) > 0 {
		t.Fatalf("the target does not build: %v", b.Problems)
	}
	var live []*unstructured.Unstructured
	for _, o := range b.Objects {
		l := o.DeepCopy()
		if l.GetKind() == "Deployment" {
			change(l)
		}
		live = append(live, l)
	}
	opts := drift.DefaultOptions()
	opts.NoPrune, opts.DefaultNamespace = ReconcilerOptions(tg)
	target, err := drift.Compare(ctx, livestate.NewObjectReader(live), drift.Input{Path: tg.Path, Head: b.Objects}, opts)
	if err != nil {
		t.Fatal(err)
	}
	var changes []drift.Change
	for _, ch := range target.Drift {
		for i := range ch.Fields {
			ch.Fields[i].Manager = "kubectl-edit" // a dump records no managers
		}
		changes = append(changes, ch)
	}
	if len(changes) != 1 {
		t.Fatalf("%d objects drifted, want the Deployment", len(changes))
	}
	wb, generated := WriteBack(tg, tree)
	wb.Sources = sources
	variables, ok := WriteBackVariables(tg, vars)
	if !ok {
		t.Fatal("the variables are not read")
	}
	plan, err := prgen.Make(ctx, prgen.Input{Tree: tree, Overlay: tg.Path, Renderer: r, Drift: changes, Build: wb, Generated: generated, Variables: variables})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func argoTarget(app *unstructured.Unstructured) Target {
	var tg Target
	tg.Repo, tg.Path = "acme/gitops", "shop"
	tg.Found = &discover.Found{Reconciler: discover.ReconcilerArgoCD, Object: "Application argocd/" + app.GetName(), On: "prod", Path: "shop", Prune: true,
		Application: app, Kustomize: discover.ApplicationKustomize(app), DestinationNamespace: "shop"}
	return tg
}

func fluxTarget(ks *unstructured.Unstructured) Target {
	var tg Target
	tg.Repo, tg.Path = "acme/gitops", "shop"
	tg.Found = &discover.Found{Reconciler: discover.ReconcilerFlux, Object: "Kustomization flux-system/" + ks.GetName(), On: "prod", Path: "shop", Prune: true, Flux: ks}
	return tg
}

// docOf is the i-th document of a YAML stream as an object.
func docOf(t *testing.T, stream string, i int) *unstructured.Unstructured {
	t.Helper()
	docs := strings.Split(stream, "\n---\n")
	var m map[string]any
	if err := yaml.Unmarshal([]byte(docs[i]), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func setImage(o *unstructured.Unstructured, image string) {
	c, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	c[0].(map[string]any)["image"] = image
	_ = unstructured.SetNestedSlice(o.Object, c, "spec", "template", "spec", "containers")
}

func imageOf(o *unstructured.Unstructured) string {
	c, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	s, _ := c[0].(map[string]any)["image"].(string)
	return s
}

// replicasOf reads replicas as a render gives them (Flux's metadata step
// leaves numbers as float64).
func replicasOf(o *unstructured.Unstructured) int64 {
	switch n := o.Object["spec"].(map[string]any)["replicas"].(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return -1
}
