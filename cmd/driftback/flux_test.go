package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/internal/kubetest"
)

// TestDiffBuildsAsFlux: `driftback diff` on a Flux path leaves ${VAR} as
// written and says so; with --flux-kustomization and --kubeconfig it reads
// the Kustomization and its variables (a ConfigMap's and a Secret's) from the
// cluster and builds as kustomize-controller does, the Secret's value shown
// nowhere; with --flux-kustomization-file it reads the Kustomization from the
// repository, its inline variables only, and says what it could not read.
func TestDiffBuildsAsFlux(t *testing.T) {
	const secretValue = "flux-cli-canary-4417"
	env := kubetest.New(t)
	kubetest.InstallCRDs(t, env, kubetest.ReconcilerCRDs(t)...)
	ks := `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: NS}
spec:
  interval: 10m
  path: ./apps
  prune: true
  targetNamespace: NS
  sourceRef: {kind: GitRepository, name: fleet}
  postBuild:
    substitute: {REPLICAS: "2"}
    substituteFrom:
    - {kind: ConfigMap, name: vars}
    - {kind: Secret, name: secret-vars}
`
	for _, y := range []string{ks,
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: vars, namespace: NS}\ndata: {CLUSTER: prod-eu-1}\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: secret-vars, namespace: NS}\nstringData: {TOKEN: " + secretValue + "}\n",
	} {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(strings.ReplaceAll(y, "NS", env.Namespace)), &u.Object); err != nil {
			t.Fatal(err)
		}
		kubetest.Apply(t, env.Setup, "kubectl", u)
	}
	repo := t.TempDir()
	deploy := func(image string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: ${REPLICAS}\n  selector: {matchLabels: {app: web}}\n  template:\n" +
			"    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      - name: web\n        image: " + image + "\n        env: [{name: CLUSTER, value: '${CLUSTER}'}]\n"
	}
	writeTree(t, repo, map[string]string{
		"apps/kustomization.yaml":  "resources: [web.yaml, token.yaml]\n",
		"apps/web.yaml":            deploy("web:1"),
		"apps/token.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: token}\ndata: {token: '${TOKEN}'}\n",
		"clusters/prod/apps.yaml":  strings.ReplaceAll(ks, "NS", env.Namespace),
		"clusters/prod/other.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n",
	})
	gitCmd(t, repo, "init", "-q", "-b", "main")
	gitCmd(t, repo, "add", "-A")
	gitCmd(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "base")
	writeTree(t, repo, map[string]string{"apps/web.yaml": deploy("web:2")})
	gitCmd(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-am", "head")
	kubeconfig := writeKubeconfig(t, env, filepath.Join(t.TempDir(), "kubeconfig"))
	diff := func(args ...string) (string, string, int) {
		return runCLI(t, append([]string{"diff", "--repo", repo, "--base", "HEAD~1", "--head", "HEAD", "--format", "json"}, args...)...)
	}

	// Plain kustomize: the variables stay as written, and the report says so.
	out, errOut, code := diff("--path", "apps", "--live", t.TempDir())
	if code == exitError || !strings.Contains(out, "values hold ${…} as written") {
		t.Errorf("plain: exit %d, stderr %s:\n%s", code, errOut, out)
	}

	// As Flux builds it, with the cluster's variables.
	out, errOut, code = diff("--flux-kustomization", env.Namespace+"/apps", "--kubeconfig", kubeconfig)
	if code == exitError {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{`"path": "apps"`, `"namespace": "` + env.Namespace + `"`, `"kind": "Deployment"`, `"web:2"`} {
		if !strings.Contains(out, want) {
			t.Errorf("as Flux builds it: the report lacks %s:\n%s", want, out)
		}
	}
	for _, never := range []string{"${", secretValue, "values hold"} {
		if strings.Contains(out, never) || strings.Contains(errOut, never) {
			t.Errorf("as Flux builds it: the output holds %q:\n%s\n%s", never, out, errOut)
		}
	}

	// From the repository's file: inline variables only, and a note.
	out, errOut, code = diff("--flux-kustomization-file", "clusters/prod/apps.yaml", "--live", t.TempDir())
	if code == exitError || !strings.Contains(out, "postBuild variables are not substituted") || strings.Contains(out, secretValue) {
		t.Errorf("from a file: exit %d, stderr %s:\n%s", code, errOut, out)
	}
	if _, errOut, code := diff("--flux-kustomization-file", "clusters/prod/other.yaml"); code != exitError || !strings.Contains(errOut, "holds no Flux Kustomization") {
		t.Errorf("a file without a Kustomization: exit %d, %s", code, errOut)
	}
	if _, errOut, code := diff("--flux-kustomization", env.Namespace+"/apps", "--kubeconfig", kubeconfig, "--path", "clusters/prod"); code != exitError || !strings.Contains(errOut, "the reconciler builds apps") {
		t.Errorf("--path against the Kustomization's: exit %d, %s", code, errOut)
	}
}

// TestDiffBuildsAsArgoCD: with --argocd-app and --kubeconfig, the
// Application is read from the cluster and its path built as Argo CD builds
// it: its kustomize images set, and objects that name no namespace placed in
// its destination's.
func TestDiffBuildsAsArgoCD(t *testing.T) {
	env := kubetest.New(t)
	kubetest.InstallCRDs(t, env, kubetest.ReconcilerCRDs(t)...)
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: guestbook, namespace: NS}
spec:
  project: default
  source:
    repoURL: https://github.com/argoproj/argocd-example-apps
    path: kustomize-guestbook
    kustomize: {images: ["gcr.io/heptio-images/ks-guestbook-demo:0.2"]}
  destination: {server: https://kubernetes.default.svc, namespace: guestbook-prod}
  syncPolicy: {automated: {prune: true}}
`, "NS", env.Namespace)), &u.Object); err != nil {
		t.Fatal(err)
	}
	kubetest.Apply(t, env.Setup, "kubectl", u)
	repo := t.TempDir()
	deploy := func(replicas string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: guestbook-ui}\nspec:\n  replicas: " + replicas + "\n  selector: {matchLabels: {app: guestbook-ui}}\n" +
			"  template:\n    metadata: {labels: {app: guestbook-ui}}\n    spec:\n      containers: [{name: guestbook-ui, image: 'gcr.io/heptio-images/ks-guestbook-demo:0.1'}]\n"
	}
	writeTree(t, repo, map[string]string{"kustomize-guestbook/kustomization.yaml": "resources: [deployment.yaml]\n", "kustomize-guestbook/deployment.yaml": deploy("1")})
	gitCmd(t, repo, "init", "-q", "-b", "main")
	gitCmd(t, repo, "add", "-A")
	gitCmd(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "base")
	writeTree(t, repo, map[string]string{"kustomize-guestbook/deployment.yaml": deploy("2")})
	gitCmd(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-am", "head")
	kubeconfig := writeKubeconfig(t, env, filepath.Join(t.TempDir(), "kubeconfig"))
	out, errOut, code := runCLI(t, "diff", "--repo", repo, "--base", "HEAD~1", "--head", "HEAD", "--format", "json",
		"--argocd-app", "guestbook", "--argocd-namespace", env.Namespace, "--kubeconfig", kubeconfig)
	if code == exitError {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{`"path": "kustomize-guestbook"`, `"namespace": "guestbook-prod"`, `ks-guestbook-demo:0.2`} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ks-guestbook-demo:0.1") {
		t.Errorf("the Application's image is not applied:\n%s", out)
	}
}

// TestDiffFindsTheReconcilerOnTheCluster: given --kubeconfig and no flag, a
// path that a Flux Kustomization on the cluster builds is built as it builds
// (its target namespace, its cluster variables), and the report and stderr
// name the Kustomization; --plain builds it plainly.
func TestDiffFindsTheReconcilerOnTheCluster(t *testing.T) {
	env := kubetest.New(t)
	kubetest.InstallCRDs(t, env, kubetest.ReconcilerCRDs(t)...)
	path := env.Namespace + "/apps" // no other test's Kustomization builds it
	for _, y := range []string{
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: found, namespace: NS}\nspec:\n  interval: 10m\n  path: ./" + path + "\n  prune: true\n  targetNamespace: NS\n  sourceRef: {kind: GitRepository, name: fleet}\n  postBuild:\n    substituteFrom: [{kind: ConfigMap, name: vars}]\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: vars, namespace: NS}\ndata: {LEVEL: debug}\n",
		"apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: fleet, namespace: NS}\nspec:\n  interval: 10m\n  url: https://github.com/acme/fleet\n  ref: {branch: main}\n",
	} {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(strings.ReplaceAll(y, "NS", env.Namespace)), &u.Object); err != nil {
			t.Fatal(err)
		}
		kubetest.Apply(t, env.Setup, "kubectl", u)
	}
	repo := t.TempDir()
	cm := func(v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {level: '${LEVEL}', version: '" + v + "'}\n"
	}
	writeTree(t, repo, map[string]string{path + "/kustomization.yaml": "resources: [cm.yaml]\n", path + "/cm.yaml": cm("1")})
	gitCmd(t, repo, "init", "-q", "-b", "main")
	gitCmd(t, repo, "add", "-A")
	gitCmd(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "base")
	writeTree(t, repo, map[string]string{path + "/cm.yaml": cm("2")})
	gitCmd(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-am", "head")
	// The checkout's remote is the GitRepository's URL, in another form.
	gitCmd(t, repo, "remote", "add", "origin", "git@github.com:acme/fleet.git")
	kubeconfig := writeKubeconfig(t, env, filepath.Join(t.TempDir(), "kubeconfig"))

	out, errOut, code := runCLI(t, "diff", "--repo", repo, "--base", "HEAD~1", "--head", "HEAD", "--kubeconfig", kubeconfig, "--format", "json")
	if code == exitError {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	found := "built as Flux Kustomization " + env.Namespace + "/found builds it, found on the cluster"
	for _, want := range []string{`"namespace": "` + env.Namespace + `"`, `level: debug`, found} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %s:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, path+" is "+found) {
		t.Errorf("stderr does not name the Kustomization:\n%s", errOut)
	}
	out, errOut, _ = runCLI(t, "diff", "--repo", repo, "--base", "HEAD~1", "--head", "HEAD", "--kubeconfig", kubeconfig, "--format", "json", "--plain")
	if strings.Contains(out, found) || strings.Contains(errOut, found) || !strings.Contains(out, "${LEVEL}") {
		t.Errorf("--plain is built as the Kustomization:\n%s\n%s", out, errOut)
	}
	// A Kustomization that builds the same path from another repository
	// is not this checkout's.
	gitCmd(t, repo, "remote", "set-url", "origin", "https://github.com/acme/other.git")
	out, errOut, _ = runCLI(t, "diff", "--repo", repo, "--base", "HEAD~1", "--head", "HEAD", "--kubeconfig", kubeconfig, "--format", "json")
	if strings.Contains(out, found) || strings.Contains(errOut, found) {
		t.Errorf("a Kustomization of another repository builds the checkout's path:\n%s\n%s", out, errOut)
	}
}

// TestDriftTellsDeletedFromNotAppliedYet: of the objects Git has and the
// cluster lacks, `drift` lists as deleted only what the Flux Kustomization
// that builds the path (found on the cluster) says it applied; what Git
// added since is "not applied yet", not drift.
func TestDriftTellsDeletedFromNotAppliedYet(t *testing.T) {
	env := kubetest.New(t)
	kubetest.InstallCRDs(t, env, kubetest.ReconcilerCRDs(t)...)
	ns := env.Namespace
	path := ns + "/app"
	apply := func(y string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(strings.ReplaceAll(y, "NS", ns)), &u.Object); err != nil {
			t.Fatal(err)
		}
		kubetest.Apply(t, env.Setup, "kustomize-controller", u)
		return u
	}
	apply("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: app, namespace: NS}\nspec:\n  interval: 10m\n  path: ./" + path + "\n  prune: true\n  targetNamespace: NS\n  sourceRef: {kind: GitRepository, name: fleet}\n")
	apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kept, namespace: NS, labels: {kustomize.toolkit.fluxcd.io/name: app, kustomize.toolkit.fluxcd.io/namespace: NS}}\ndata: {a: b}\n")
	// Flux applied kept and gone; gone was deleted by hand since.
	dyn, err := dynamic.NewForConfig(env.Setup)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := dyn.Resource(discover.FluxKustomizations).Namespace(ns).Get(context.Background(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ks.Object["status"] = map[string]any{"inventory": map[string]any{"entries": []any{
		map[string]any{"id": ns + "_kept__ConfigMap", "v": "v1"}, map[string]any{"id": ns + "_gone__ConfigMap", "v": "v1"}}}}
	if _, err := dyn.Resource(discover.FluxKustomizations).Namespace(ns).UpdateStatus(context.Background(), ks, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata: {a: b}\n"
	}
	writeTree(t, repo, map[string]string{path + "/kustomization.yaml": "resources: [kept.yaml, gone.yaml, fresh.yaml]\n",
		path + "/kept.yaml": cm("kept"), path + "/gone.yaml": cm("gone"), path + "/fresh.yaml": cm("fresh")})
	kubeconfig := writeKubeconfig(t, env, filepath.Join(t.TempDir(), "kubeconfig"))
	out, errOut, code := runCLI(t, "drift", "--repo", repo, "--path", path, "--kubeconfig", kubeconfig, "--format", "json")
	if code == exitError {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var plan struct{ Deleted, NotApplied []string }
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.Deleted, []string{"ConfigMap/" + ns + "/gone"}) || !slices.Equal(plan.NotApplied, []string{"ConfigMap/" + ns + "/fresh"}) {
		t.Errorf("deleted %v, not applied yet %v; want gone deleted and fresh not applied yet\n%s", plan.Deleted, plan.NotApplied, errOut)
	}
	out, _, _ = runCLI(t, "drift", "--repo", repo, "--path", path, "--kubeconfig", kubeconfig, "--format", "markdown")
	if !strings.Contains(out, "### In Git, not applied yet") || !strings.Contains(out, "### In Git but deleted from the cluster") {
		t.Errorf("the preview does not tell them apart:\n%s", out)
	}
}

// TestSyncsThatWillFailAreDangers: what the reconciler cannot apply at all
// is a sync-fails danger with its own message, not a plain create: a kind
// the cluster does not serve (no CRD, none in the change), an Application
// whose AppProject does not exist, and a Flux Kustomization whose
// substituteFrom ConfigMap is missing (its whole build fails).
func TestSyncsThatWillFailAreDangers(t *testing.T) {
	env := kubetest.New(t)
	kubetest.InstallCRDs(t, env, kubetest.ReconcilerCRDs(t)...)
	ns := env.Namespace
	kubetest.ArgoCDDefaultProject(t, env, ns)
	path := ns + "/app"
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: app, namespace: "+ns+"}\nspec:\n  interval: 10m\n  path: ./"+path+"\n  prune: true\n  targetNamespace: "+ns+"\n  sourceRef: {kind: GitRepository, name: fleet}\n  postBuild:\n    substituteFrom: [{kind: ConfigMap, name: cluster-vars}]\n"), &u.Object); err != nil {
		t.Fatal(err)
	}
	kubetest.Apply(t, env.Setup, "kubectl", u)
	dir := t.TempDir()
	files := map[string]string{
		path + "/kustomization.yaml":    "resources: [cm.yaml]\n",
		path + "/cm.yaml":               "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {cluster: '${CLUSTER}'}\n",
		"plain/kustomization.yaml":      "namespace: " + ns + "\nresources: [widget.yaml, app.yaml, ok.yaml, release.yaml, vault.yaml]\n",
		"charts/tiny/Chart.yaml":        "apiVersion: v2\nname: tiny\nversion: 0.1.0\n",
		"charts/tiny/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tiny}\ndata: {a: '{{ .Values.a }}'}\n",
		// No namespace written: placed in default, as the apply does.
		"bare/kustomization.yaml": "resources: [gadget.yaml]\n",
		"bare/gadget.yaml":        "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: bare}\n",
		"plain/release.yaml": "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: tiny}\nspec:\n  interval: 10m\n" +
			"  chart: {spec: {chart: ./charts/tiny, sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}}}\n  valuesFrom: [{kind: ConfigMap, name: tiny-values}]\n",
		// Its values' Secret is made by an ExternalSecret of the change:
		// helm-controller retries until it exists, no sync fails.
		"plain/vault.yaml": "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: vault}\nspec:\n  interval: 10m\n" +
			"  chart: {spec: {chart: ./charts/tiny, sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}}}\n  valuesFrom: [{kind: Secret, name: vault-values}]\n" +
			"---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: externalsecrets.external-secrets.io}\n" +
			"spec:\n  group: external-secrets.io\n  names: {kind: ExternalSecret, plural: externalsecrets, singular: externalsecret, listKind: ExternalSecretList}\n  scope: Namespaced\n" +
			"  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]\n" +
			"---\napiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: vault}\nspec:\n  target: {name: vault-values}\n",
		// Served, defined by the change, or with a project that exists:
		// none of these fails.
		"plain/ok.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fine}\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: sprockets.example.com}\n" +
			"spec:\n  group: example.com\n  names: {kind: Sprocket, plural: sprockets, singular: sprocket, listKind: SprocketList}\n  scope: Namespaced\n" +
			"  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]\n" +
			"---\napiVersion: example.com/v1\nkind: Sprocket\nmetadata: {name: red}\n---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: fine}\nspec:\n  project: default\n" +
			"  source: {repoURL: 'https://github.com/acme/gitops', path: shop}\n  destination: {server: 'https://kubernetes.default.svc', namespace: shop}\n",
		"plain/widget.yaml": "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: blue}\nspec: {size: 3}\n",
		"plain/app.yaml":    "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: shop}\nspec:\n  project: ghost\n  source: {repoURL: 'https://github.com/acme/gitops', path: shop}\n  destination: {server: 'https://kubernetes.default.svc', namespace: shop}\n",
	}
	writeTree(t, filepath.Join(dir, "base"), map[string]string{"README.md": "fleet\n"})
	writeTree(t, filepath.Join(dir, "head"), files)
	kubeconfig := writeKubeconfig(t, env, filepath.Join(dir, "kubeconfig"))
	// Argo CD runs in the test's namespace, where its projects are.
	diff := func(argoNS string) (string, map[string]string) {
		t.Helper()
		out, errOut, code := runCLI(t, "diff", "--base", filepath.Join(dir, "base"), "--head", filepath.Join(dir, "head"), "--kubeconfig", kubeconfig, "--format", "json", "--argocd-namespace", argoNS)
		if code == exitError {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var rep struct {
			Targets []struct {
				Path    string
				Changes []struct {
					Kind, Name string
					Danger     []struct{ Reason, Message string }
				}
			}
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		fails := map[string]string{}
		for _, tg := range rep.Targets {
			for _, c := range tg.Changes {
				for _, d := range c.Danger {
					if d.Reason == "sync-fails" {
						fails[c.Kind+"/"+c.Name] = d.Message
					}
				}
			}
		}
		return out, fails
	}
	// Told Argo CD is elsewhere, the project is not where it reads them.
	if _, fails := diff("argocd"); !strings.Contains(fails["Application/fine"], "its AppProject default does not exist in argocd") {
		t.Errorf("--argocd-namespace argocd: Application/fine's project was found in %s: %v", ns, fails)
	}
	out, fails := diff(ns)
	if len(fails) != 5 {
		t.Errorf("sync-fails on %d objects, want the 5 below: %v", len(fails), fails)
	}
	for obj, want := range map[string]string{
		"Gadget/blue":       `no matches for kind "Gadget" in version "example.com/v1"`,
		"Gadget/bare":       `no matches for kind "Gadget" in version "example.com/v1"`,
		"Application/shop":  "its AppProject ghost does not exist",
		"Kustomization/app": `configmaps "cluster-vars" not found`,
		"HelmRelease/tiny":  "helm-controller fails this release: its valuesFrom names an object that does not exist",
	} {
		if !strings.Contains(fails[obj], want) {
			t.Errorf("%s: sync-fails %q, want it to say %q\n%s", obj, fails[obj], want, out)
		}
	}
	if !strings.Contains(out, "its values come from Secret "+ns+"/vault-values, which ExternalSecret "+ns+"/vault of this target creates once applied") {
		t.Errorf("the release whose values an ExternalSecret makes is not said to wait for it:\n%s", out)
	}
}

// TestDriftWritesAReleaseValueBack: a person scaled a Deployment a
// HelmRelease's chart (in the repository) renders; `drift` renders the
// chart as serve does and writes the live value into the HelmRelease's
// values, the field the chart reads it from.
func TestDriftWritesAReleaseValueBack(t *testing.T) {
	env := kubetest.New(t)
	ns := env.Namespace
	repo := t.TempDir()
	writeTree(t, repo, map[string]string{
		"charts/shop/Chart.yaml":  "apiVersion: v2\nname: shop\nversion: 1.2.0\n",
		"charts/shop/values.yaml": "replicaCount: 1\n",
		"charts/shop/templates/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-web\n  namespace: {{ .Release.Namespace }}\nspec:\n  replicas: {{ .Values.replicaCount }}\n" +
			"  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: \"nginx:1.27\"}]\n",
		"apps/shop/kustomization.yaml": "resources: [release.yaml]\n",
		"apps/shop/release.yaml": "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: shop, namespace: " + ns + "}\nspec:\n  interval: 10m\n" +
			"  chart:\n    spec:\n      chart: ./charts/shop\n      sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}\n  values:\n    replicaCount: 2\n",
	})
	deploy := func(manager string, replicas int) {
		u := &unstructured.Unstructured{}
		y := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: shop-web, namespace: " + ns + "}\nspec:\n  replicas: " + strconv.Itoa(replicas) +
			"\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: \"nginx:1.27\"}]\n"
		if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
			t.Fatal(err)
		}
		kubetest.Apply(t, env.Setup, manager, u)
	}
	deploy("helm-controller", 2)
	deploy("kubectl", 5) // a person scaled it
	kubeconfig := writeKubeconfig(t, env, filepath.Join(t.TempDir(), "kubeconfig"))
	out, errOut, code := runCLI(t, "drift", "--repo", repo, "--path", "apps/shop", "--kubeconfig", kubeconfig, "--format", "json")
	if code != exitChanges {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	var plan struct {
		Codified []struct{ Object, Path string }
		Files    []string
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(plan.Files, "apps/shop/release.yaml") {
		t.Fatalf("the release's values are not written: files %v\n%s", plan.Files, out)
	}
	if _, _, code := runCLI(t, "drift", "--repo", repo, "--path", "apps/shop", "--kubeconfig", kubeconfig, "--write"); code != exitChanges {
		t.Fatalf("--write: exit %d", code)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "apps/shop/release.yaml")); !strings.Contains(string(b), "replicaCount: 5") {
		t.Errorf("the HelmRelease does not hold the live value:\n%s", b)
	}
}
