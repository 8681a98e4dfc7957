package app

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/internal/githubfake"
	"github.com/driftback/driftback/internal/helmtest"
	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/render"
)

// storeChart is a chart in the repository that a HelmRelease installs
// from Flux's GitRepository: a Deployment whose replicas come from
// replicaCount, a CRD among its templates, and a migration hook.
func storeChart(version string, withCRD bool) map[string]any {
	files := map[string]any{
		"charts/store/Chart.yaml":  "apiVersion: v2\nname: store\nversion: " + version + "\n",
		"charts/store/values.yaml": "replicaCount: 1\nimage: registry.example.com/store:1.0.0\n",
		"charts/store/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicaCount }}
  selector:
    matchLabels: {app: store}
  template:
    metadata:
      labels: {app: store}
    spec:
      containers:
      - name: store
        image: {{ .Values.image }}
`,
		"charts/store/templates/migrate.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
  annotations: {helm.sh/hook: pre-upgrade}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: migrate, image: {{ .Values.image }}}]
`,
	}
	if withCRD {
		files["charts/store/templates/crd.yaml"] = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: carts.store.example.com
spec:
  group: store.example.com
  names: {kind: Cart, plural: carts, singular: cart}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`
	} else {
		files["charts/store/templates/crd.yaml"] = "# the carts moved to their own chart\n"
	}
	return files
}

// storeRelease is the HelmRelease a Kustomization applies.
func storeRelease(replicas int) string {
	return fmt.Sprintf(`apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: store, namespace: NS}
spec:
  interval: 10m
  chart:
    spec:
      chart: ./charts/store
      sourceRef: {kind: GitRepository, name: fleet}
  values:
    replicaCount: %d
`, replicas)
}

// installStore applies the store release's Deployment as helm-controller
// installed it, with replicas.
func (w *world) installStore(replicas int) {
	w.t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(w.ns(fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: store
  namespace: NS
  labels: {helm.toolkit.fluxcd.io/name: store, helm.toolkit.fluxcd.io/namespace: NS}
spec:
  replicas: %d
  selector: {matchLabels: {app: store}}
  template:
    metadata: {labels: {app: store}}
    spec:
      containers: [{name: store, image: registry.example.com/store:1.0.0}]`, replicas))), &u.Object); err != nil {
		w.t.Fatal(err)
	}
	kubetest.Apply(w.t, w.env.Config, "helm-controller", u)
}

// TestAHelmReleaseShowsWhatItsUpgradeDoes: a Flux Kustomization applies a
// HelmRelease whose chart is in the same repository, and helm-controller
// has installed it. A pull request that raises replicaCount and bumps the
// chart to a version without its CRD shows, through serve on the real
// apiserver: the Deployment's replicas going 2 → 3, the CRD's deletion as
// a danger counting the live custom resources, the chart's version change
// and its hook, not compared; the required check fails on the danger.
func TestAHelmReleaseShowsWhatItsUpgradeDoes(t *testing.T) {
	t.Parallel()
	// app.yml names the discovered target to let it count the carts, a
	// cluster-scoped kind its chart defines.
	w := storeWorld(t, func(c *config.Config) { c.Targets[0].Scope.ClusterKinds = []string{"Cart.store.example.com"} })
	ns := w.env.Namespace
	crd := storeChart("1.2.0", true)["charts/store/templates/crd.yaml"].(string)
	w.apply(strings.Replace(crd, "  name: carts.store.example.com\n", "  name: carts.store.example.com\n  labels: {helm.toolkit.fluxcd.io/name: store, helm.toolkit.fluxcd.io/namespace: NS}\n", 1))
	eventually(t, func() bool {
		_, err := w.env.Client.Discovery().ServerResourcesForGroupVersion("store.example.com/v1")
		return err == nil
	}, "the Cart CRD to be served", func() string { return "" })
	for i := range 3 {
		w.apply(fmt.Sprintf("apiVersion: store.example.com/v1\nkind: Cart\nmetadata: {name: cart-%d}\n", i))
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.srv.App.targets.Run(ctx)

	files := storeChart("1.2.0", true)
	files["fleet/store/kustomization.yaml"] = "resources: [release.yaml]\n"
	files["fleet/store/release.yaml"] = storeRelease(2)
	base := w.commit(plumbing.ZeroHash, files)
	change := storeChart("1.3.0", false)
	change["fleet/store/release.yaml"] = storeRelease(3)
	head := w.commit(base, change)
	body := w.reviewed(1, base, head)
	for _, s := range []string{
		"Deployment/" + ns + "/store", "`.spec.replicas`", "`2` → `3`",
		"CustomResourceDefinition/carts.store.example.com", "removing the CRD deletes every Cart with it: 3 custom resources",
		"HelmRelease/" + ns + "/store: chart store 1.2.0 → store 1.3.0; values: replicaCount 2 → 3.",
		"runs hooks, not compared: Job/store-migrate (pre-upgrade)",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the comment does not say %q:\n%s", s, body)
		}
	}
	if strings.Contains(body, "kind: Job") || strings.Contains(body, "Job/"+ns+"/store-migrate") {
		t.Errorf("the hook is compared as an object:\n%s", body)
	}
}

// discoverFlux restarts the server with Flux discovery on the test's
// namespace (after configure, when set), installs the reconcilers' CRDs and
// applies the GitRepository "fleet" of the test repository.
func (d *driftWorld) discoverFlux(configure func(*config.Config)) {
	d.t.Helper()
	d.stop()
	if configure != nil {
		configure(d.cfg)
	}
	cl := d.cfg.Clusters["test"]
	cl.Discover = &config.Discover{Flux: true, Namespaces: []string{d.env.Namespace}}
	d.cfg.Clusters["test"] = cl
	d.start()
	kubetest.InstallCRDs(d.t, d.env, kubetest.ReconcilerCRDs(d.t)...)
	host, _, _ := strings.Cut(string(discover.HostOf(d.gh.URL())), ":")
	d.apply(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: NS}
spec: {interval: 1m, url: 'https://` + host + `/acme/gitops', ref: {branch: main}}`)
}

// scaledStore is a drift world where a Flux Kustomization applies
// fleet/store of files (the target "store"), helm-controller installed the
// store release at 2 replicas, no drift is proposed, and then a person
// scales the Deployment to 4 with kubectl and a drift pull request opens.
func scaledStore(t *testing.T, files map[string]any) *driftWorld {
	t.Helper()
	d := newDriftWorld(t, 500*time.Millisecond, nil)
	d.discoverFlux(func(c *config.Config) {
		c.Targets = []config.Target{{Name: "store", Repo: fullName, Path: "fleet/store", Cluster: "test", Policy: c.Targets[0].Policy}}
	})
	ns := d.env.Namespace
	commit := d.commit(d.main, files)
	d.push(map[string]plumbing.Hash{"refs/heads/main": commit})
	d.apply(fluxKustomization(ns, "store", "fleet/store"))
	// What kustomize-controller and helm-controller applied.
	d.apply(strings.Replace(storeRelease(2), "metadata: {name: store, namespace: NS}",
		"metadata: {name: store, namespace: NS, labels: {kustomize.toolkit.fluxcd.io/name: store, kustomize.toolkit.fluxcd.io/namespace: NS}}", 1))
	d.installStore(2)
	d.discovered("fleet/store")
	d.run()
	d.settle(2)
	if p := d.openPulls(); len(p) != 0 {
		t.Fatalf("the cluster matches the release, yet drift pull requests: %+v", p)
	}
	if _, err := d.env.Client.AppsV1().Deployments(ns).UpdateScale(context.Background(), "store",
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "store", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 4}},
		metav1.UpdateOptions{FieldManager: "kubectl"}); err != nil {
		t.Fatal(err)
	}
	d.waitFor("a drift pull request", func() bool { return len(d.openPulls()) == 1 })
	return d
}

// TestAScaledHelmDeploymentBecomesAValuesChange: helm-controller installed
// a release whose Deployment's replicas come from the HelmRelease's
// replicaCount. A person scales the Deployment to 4 with kubectl: the drift
// pull request changes replicaCount in the HelmRelease's manifest, and
// nothing else. A person then sets the image, which the chart takes from a
// value the HelmRelease does not set: it is shown on the dashboard with
// why, never guessed into a file.
func TestAScaledHelmDeploymentBecomesAValuesChange(t *testing.T) {
	t.Parallel()
	files := storeChart("1.2.0", false)
	files["fleet/store/kustomization.yaml"] = "resources: [release.yaml]\n"
	files["fleet/store/release.yaml"] = strings.Replace(storeRelease(2), "replicaCount: 2", "replicaCount: 2 # two zones", 1)
	d := scaledStore(t, files)
	ns := d.env.Namespace
	pr := d.openPulls()[0]
	changed := d.changedFiles(d.branchNamed(pr.HeadRef))
	want := d.ns(strings.Replace(files["fleet/store/release.yaml"].(string), "replicaCount: 2 # two zones", "replicaCount: 4 # two zones", 1))
	if len(changed) != 1 || changed["fleet/store/release.yaml"] != want {
		t.Errorf("the drift pull request changes %v, want the HelmRelease's replicaCount only:\n%s", keys(changed), changed["fleet/store/release.yaml"])
	}
	if !strings.Contains(pr.Body, "Deployment/"+ns+"/store") || !strings.Contains(pr.Body, ".spec.replicas") {
		t.Errorf("the pull request does not say what drifted:\n%s", pr.Body)
	}

	d.patch("Deployment", "store", "kubectl-set", `{"spec":{"template":{"spec":{"containers":[{"name":"store","image":"registry.example.com/store:1.0.1"}]}}}}`)
	d.dashboardSays("the image shown, not written", "registry.example.com/store:1.0.1", "from no value of its values")
	tip := d.changedFiles(d.branchNamed(pr.HeadRef))
	if strings.Contains(tip["fleet/store/release.yaml"], "1.0.1") || len(tip) != 1 {
		t.Errorf("the untraced image was written: %v\n%s", keys(tip), tip["fleet/store/release.yaml"])
	}
}

// storeWorld is a cluster where a Flux Kustomization applies fleet/store
// of the test's repository, discovered as the target "store" (app.yml's
// settings changed by configure), with the store release's Deployment
// installed at 2 replicas.
func storeWorld(t *testing.T, configure func(*config.Config)) *world {
	w := newWorld(t, func(c *config.Config) {
		c.Targets = c.Targets[:1]
		c.Targets[0].Name, c.Targets[0].Path = "store", "fleet/store"
		cl := c.Clusters["test"]
		cl.Discover = &config.Discover{Flux: true}
		c.Clusters["test"] = cl
		if configure != nil {
			configure(c)
		}
	})
	kubetest.InstallCRDs(t, w.env, kubetest.ReconcilerCRDs(t)...)
	w.cfg.Clusters["test"].Discover.Namespaces = []string{w.env.Namespace}
	host := string(discover.HostOf(w.gh.URL()))
	hostname, _, _ := strings.Cut(host, ":")
	w.apply(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: NS}
spec:
  interval: 1m
  url: ssh://git@` + hostname + `/acme/gitops.git
  ref: {branch: main}`)
	w.apply(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: store, namespace: NS}
spec:
  interval: 10m
  path: ./fleet/store
  prune: true
  sourceRef: {kind: GitRepository, name: fleet}`)
	w.installStore(2)
	return w
}

// discovered waits until the store target is discovered.
func (w *world) discovered() {
	w.t.Helper()
	eventually(w.t, func() bool { ts, _ := w.srv.App.targetsOf(fullName); return len(ts) == 1 }, "the Kustomization to be discovered", func() string { return "" })
}

// reviewed opens pull request number from base to head once the store
// target is discovered, and returns its comment once its two checks (the
// target's and the required one) are done.
func (w *world) reviewed(number int, base, head plumbing.Hash) string {
	w.t.Helper()
	w.discovered()
	w.openPR(number, base, head, nil)
	if code := w.deliver("pull_request", fmt.Sprintf("d-open-%d", number), prPayload("opened", number, head.String())); code != http.StatusAccepted {
		w.t.Fatalf("opened: %d", code)
	}
	w.waitChecks(head.String(), 2)
	return w.gh.Comments(fullName, number)[0].Body
}

// TestAChartFromARepositoryIsFetchedOnlyOnceTrusted: the store chart is
// served by an HTTP chart repository that the default branch names. A pull
// request that raises replicaCount shows the Deployment's change, through
// serve on the real apiserver, with the chart fetched at the version its
// range picks. The same pull request adds a release from a repository the
// default branch does not name: it is not asked anything, and the comment
// says why its chart is not rendered.
func TestAChartFromARepositoryIsFetchedOnlyOnceTrusted(t *testing.T) {
	t.Parallel()
	trusted, untrusted := helmtest.NewRepo(t), helmtest.NewRepo(t)
	for _, v := range []string{"1.2.0", "1.3.0", "2.0.0"} {
		chart := map[string][]byte{}
		for p, content := range storeChart(v, false) {
			chart[strings.TrimPrefix(p, "charts/store/")] = []byte(content.(string))
		}
		trusted.Add(t, chart)
		untrusted.Add(t, chart)
	}
	w := storeWorld(t, func(c *config.Config) {
		// The test's repositories listen on loopback.
		c.Helm.PrivateHosts = []string{"127.0.0.1"}
	})
	ns := w.env.Namespace

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.srv.App.targets.Run(ctx)

	release := func(name, repo string, replicas int) string {
		return fmt.Sprintf(`apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: %s, namespace: NS}
spec:
  interval: 10m
  chart:
    spec:
      chart: store
      version: 1.x
      sourceRef: {kind: HelmRepository, name: %s}
  values:
    replicaCount: %d
---
`, name, repo, replicas)
	}
	repository := func(name, url string) string {
		return fmt.Sprintf("apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: %s, namespace: NS}\nspec: {url: %q}\n---\n", name, url)
	}
	base := w.commit(plumbing.ZeroHash, map[string]any{
		"fleet/store/kustomization.yaml": "resources: [release.yaml]\n",
		"fleet/store/release.yaml":       repository("charts", trusted.URL) + release("store", "charts", 2),
	})
	head := w.commit(base, map[string]any{
		"fleet/store/release.yaml": repository("charts", trusted.URL) + release("store", "charts", 3) +
			repository("elsewhere", untrusted.URL) + release("other", "elsewhere", 1),
	})
	body := w.reviewed(1, base, head)
	for _, s := range []string{
		"Deployment/" + ns + "/store", "`.spec.replicas`", "`2` → `3`",
		"HelmRelease/" + ns + "/other is compared as an object; its chart is not rendered: chart repository http:",
		// Links are broken in the comment: the address is the pull request's.
		strings.TrimPrefix(untrusted.URL, "http://") + " is not trusted yet",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the comment does not say %q:\n%s", s, body)
		}
	}
	if strings.Contains(body, "Deployment/"+ns+"/other") {
		t.Errorf("the untrusted repository's chart was rendered:\n%s", body)
	}
	if n := untrusted.Requests(); n != 0 {
		t.Errorf("the repository new in the pull request got %d requests", n)
	}
	if n := trusted.Requests(); n == 0 {
		t.Error("the trusted repository was never asked")
	}
}

// TestValuesFromASecretAppearNowhere: the store release takes its image
// from a Secret and its replicas from a ConfigMap (valuesFrom, a
// targetPath), as helm-controller merges them. Its chart also tries to
// carry the Secret's value out: in hex in a ConfigMap, upper-cased, hashed,
// and in a hook's name. A pull request that bumps the chart shows, through
// serve: the ConfigMap's replicas in what the chart renders, the objects
// that use the Secret's value with every value hidden, their fields that
// take it compared Git against Git (the live image is not called a live
// change), and the value itself nowhere, in no form: comment, check runs
// or logs.
func TestValuesFromASecretAppearNowhere(t *testing.T) {
	t.Parallel()
	w := storeWorld(t, nil)
	ns := w.env.Namespace
	const image = "registry.example.com/store:s3cr3t-tag-9f8e7d"
	w.logs.secret(image)
	w.apply(`apiVersion: v1
kind: Secret
metadata: {name: store-values, namespace: NS}
stringData:
  values.yaml: "image: ` + image + `\n"`)
	w.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: store-config, namespace: NS}\ndata: {replicas: \"3\"}\n")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.srv.App.targets.Run(ctx)

	release := `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: store, namespace: NS}
spec:
  interval: 10m
  chart:
    spec:
      chart: ./charts/store
      sourceRef: {kind: GitRepository, name: fleet}
  valuesFrom:
  - {kind: Secret, name: store-values}
  - {kind: ConfigMap, name: store-config, valuesKey: replicas, targetPath: replicaCount}
`
	settings := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ .Release.Name }}-settings'}\ndata: {replicas: '{{ .Values.replicaCount }}'}\n"
	leak := `apiVersion: v1
kind: ConfigMap
metadata: {name: '{{ .Release.Name }}-about'}
data:
  hex: {{ printf "%x" .Values.image | quote }}
  upper: {{ upper .Values.image | quote }}
  hash: {{ sha256sum .Values.image | quote }}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: report-{{ printf "%x" .Values.image | trunc 40 }}
  annotations: {helm.sh/hook: post-upgrade}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: report, image: busybox}]
`
	files := storeChart("1.2.0", false)
	files["charts/store/templates/settings.yaml"] = settings
	files["fleet/store/kustomization.yaml"] = "resources: [release.yaml]\n"
	files["fleet/store/release.yaml"] = release
	base := w.commit(plumbing.ZeroHash, files)
	change := storeChart("1.3.0", false)
	change["charts/store/templates/settings.yaml"] = settings
	change["charts/store/templates/leak.yaml"] = leak
	head := w.commit(base, change)
	body := w.reviewed(1, base, head)
	for _, s := range []string{
		"ConfigMap/" + ns + "/store-settings", "replicas: \"3\"",
		// The object uses the Secret's value: none of its values is shown.
		"Deployment/" + ns + "/store", "`.spec.replicas`: a sync after merging sets it from live `(value hidden)`",
		"ConfigMap/" + ns + "/store-about", "HelmRelease/" + ns + "/store: chart store 1.2.0 → store 1.3.0",
		"runs hooks, not compared: Job/report-",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the comment does not say %q:\n%s", s, body)
		}
	}
	// The image takes the Secret's value: compared Git against Git, the
	// live one is not a live change.
	if strings.Contains(body, "containers[name=\"store\"].image") {
		t.Errorf("the field set from the Secret is compared with the live value:\n%s", body)
	}
	forms := []string{"s3cr3t-tag-9f8e7d", base64.StdEncoding.EncodeToString([]byte(image)), hex.EncodeToString([]byte(image))[:40],
		strings.ToUpper("s3cr3t-tag-9f8e7d"), fmt.Sprintf("%x", sha256.Sum256([]byte(image)))}
	for _, s := range forms {
		if strings.Contains(body, s) {
			t.Errorf("the comment shows the Secret's value (%q):\n%s", s, body)
		}
		for _, r := range w.gh.CheckRuns(fullName, head.String()) {
			if strings.Contains(r.Summary+r.Text+r.Title, s) {
				t.Errorf("check run %s shows the Secret's value", r.Name)
			}
		}
	}
}

// TestAForksHelmReleaseReadsNothingLive: the same release, its values from
// a Secret, changed by a fork's pull request. Until someone with write
// access approves, nothing of the cluster is read for it: not the
// cluster's version, not valuesFrom, not a chart repository's credentials.
// The comment says why its chart is not rendered, and the HelmRelease is
// compared as an object, in Git.
func TestAForksHelmReleaseReadsNothingLive(t *testing.T) {
	t.Parallel()
	w := storeWorld(t, nil)
	ns := w.env.Namespace
	const image = "registry.example.com/store:fork-canary-51c2"
	w.logs.secret(image)
	w.apply(`apiVersion: v1
kind: Secret
metadata: {name: store-values, namespace: NS}
stringData:
  values.yaml: "image: ` + image + `\n"`)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.srv.App.targets.Run(ctx)

	files := storeChart("1.2.0", false)
	files["fleet/store/kustomization.yaml"] = "resources: [release.yaml]\n"
	files["fleet/store/release.yaml"] = storeRelease(2) + "  valuesFrom:\n  - {kind: Secret, name: store-values}\n"
	base := w.commit(plumbing.ZeroHash, files)
	head := w.commit(base, map[string]any{"fleet/store/release.yaml": storeRelease(3) + "  valuesFrom:\n  - {kind: Secret, name: store-values}\n"})
	w.discovered()
	reads := w.countClusterReads()
	w.openPR(1, base, head, func(p *githubfake.Pull) { p.HeadRepo = "stranger/gitops" })
	if code := w.deliver("pull_request", "d-open", prPayload("opened", 1, head.String())); code != http.StatusAccepted {
		t.Fatalf("opened: %d", code)
	}
	// A fork's pull request gets the required check alone.
	w.waitChecks(head.String(), 1)
	waitUntil(t, "the fork's comment", func() bool { return len(w.gh.Comments(fullName, 1)) == 1 })
	body := w.gh.Comments(fullName, 1)[0].Body
	for _, s := range []string{
		"HelmRelease/" + ns + "/store is compared as an object; its chart is not rendered: Helm charts are rendered for the cluster's version, which a fork's pull request does not read until someone with write access approves",
		"`.spec.values.replicaCount`",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the comment does not say %q:\n%s", s, body)
		}
	}
	if strings.Contains(body, "Deployment/"+ns+"/store") || strings.Contains(body, "fork-canary") {
		t.Errorf("the fork's pull request shows the release's objects or its Secret's value:\n%s", body)
	}
	if n := reads.Load(); n != 0 {
		t.Errorf("the fork's pull request read the cluster %d times", n)
	}
}

// TestAChartOverTheMemoryLimitIsRefusedAlone: a pull request whose chart
// doubles a string until it needs gigabytes, through serve with render
// children of 512 MiB: its target says the chart needed more than the
// memory limit and is not compared, and another pull request right after
// renders its release as usual.
func TestAChartOverTheMemoryLimitIsRefusedAlone(t *testing.T) {
	t.Parallel()
	w := storeWorld(t, nil)
	ns := w.env.Namespace
	w.srv.App.renderer = render.New(render.Options{Limits: render.Limits{Memory: 512 << 20, CPU: 10 * time.Second, Timeout: 30 * time.Second}})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.srv.App.targets.Run(ctx)

	files := storeChart("1.2.0", false)
	files["fleet/store/kustomization.yaml"] = "resources: [release.yaml]\n"
	files["fleet/store/release.yaml"] = storeRelease(2)
	base := w.commit(plumbing.ZeroHash, files)
	bomb := w.commit(base, map[string]any{
		"charts/store/templates/bomb.yaml": `{{ $s := "xxxxxxxxxxxxxxxx" }}{{ range until 40 }}{{ $s = printf "%s%s" $s $s }}{{ end }}data: {{ $s }}`,
	})
	sane := w.commit(base, map[string]any{"fleet/store/release.yaml": storeRelease(3)})

	if body := w.reviewed(1, base, bomb); !strings.Contains(body, "rendering needed more than the memory limit of 512 MiB") {
		t.Errorf("the bomb's comment does not say it hit the memory limit:\n%s", body)
	}
	body := w.reviewed(2, base, sane)
	for _, s := range []string{"Deployment/" + ns + "/store", "`2` → `3`"} {
		if !strings.Contains(body, s) {
			t.Errorf("the next pull request's comment does not say %q:\n%s", s, body)
		}
	}
}

// TestAnApplicationsChartFromARepositoryIsRendered: a target applies an
// Argo CD Application (an app of apps) that installs the store chart from
// an HTTP chart repository into the cluster Argo CD runs in. A pull request
// that bumps its targetRevision and sets replicaCount shows, through serve,
// what the repo-server renders: the Deployment's replicas 2 → 3 and the
// chart's version, with the chart fetched at the version asked.
func TestAnApplicationsChartFromARepositoryIsRendered(t *testing.T) {
	t.Parallel()
	repo := helmtest.NewRepo(t)
	for _, v := range []string{"1.2.0", "1.3.0"} {
		chart := map[string][]byte{}
		for p, content := range storeChart(v, false) {
			chart[strings.TrimPrefix(p, "charts/store/")] = []byte(content.(string))
		}
		repo.Add(t, chart)
	}
	w := storeWorld(t, func(c *config.Config) { c.Helm.PrivateHosts = []string{"127.0.0.1"} })
	ns := w.env.Namespace

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.srv.App.targets.Run(ctx)

	app := func(version string, replicas int) string {
		return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: store, namespace: NS}
spec:
  project: default
  source:
    repoURL: %s
    chart: store
    targetRevision: %s
    helm:
      parameters:
      - {name: replicaCount, value: "%d"}
  destination: {server: https://kubernetes.default.svc, namespace: NS}
  syncPolicy: {automated: {prune: true}}
`, repo.URL, version, replicas)
	}
	base := w.commit(plumbing.ZeroHash, map[string]any{
		"fleet/store/kustomization.yaml": "resources: [app.yaml]\n",
		"fleet/store/app.yaml":           app("1.2.0", 2),
	})
	head := w.commit(base, map[string]any{"fleet/store/app.yaml": app("1.3.0", 3)})
	body := w.reviewed(1, base, head)
	for _, s := range []string{
		"Deployment/" + ns + "/store", "`.spec.replicas`", "`2` → `3`",
		"Application/" + ns + "/store: chart store 1.2.0 → store 1.3.0",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the comment does not say %q:\n%s", s, body)
		}
	}
}

// TestAPullRequestReadsNoSecretOutsideItsScope: the store target renders
// into its own namespace. A pull request adds a HelmRelease in another
// team's namespace whose values come from that team's Secret (valuesFrom),
// and a release of its own on that team's HelmRepository, whose
// credentials are a Secret there too. Through serve on the real
// apiserver: no Secret or ConfigMap of the other namespace is requested
// (its HelmRepository, an address, may be), and the comment says each
// read is outside the target's scope.
func TestAPullRequestReadsNoSecretOutsideItsScope(t *testing.T) {
	t.Parallel()
	w := storeWorld(t, nil)
	ns := w.env.Namespace
	victim := ns + "-payroll"
	w.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: " + victim + "}\n")
	for _, y := range []string{`apiVersion: v1
kind: Secret
metadata: {name: payroll-values, namespace: ` + victim + `}
stringData: {values.yaml: "image: payroll-s3cr3t-0d9c\n"}`, `apiVersion: v1
kind: Secret
metadata: {name: payroll-charts, namespace: ` + victim + `}
stringData: {username: payroll, password: charts-s3cr3t-7b1a}`, `apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {name: payroll, namespace: ` + victim + `}
spec: {url: "https://charts.payroll.example.com", secretRef: {name: payroll-charts}}`} {
		w.apply(y)
	}
	var outside atomic.Int64
	w.srv.App.wrapKube = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if strings.Contains(r.URL.Path, "/namespaces/"+victim+"/secrets") || strings.Contains(r.URL.Path, "/namespaces/"+victim+"/configmaps") {
				outside.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.srv.App.targets.Run(ctx)

	files := storeChart("1.2.0", false)
	files["fleet/store/kustomization.yaml"] = "resources: [release.yaml]\n"
	files["fleet/store/release.yaml"] = storeRelease(2)
	base := w.commit(plumbing.ZeroHash, files)
	head := w.commit(base, map[string]any{
		"fleet/store/kustomization.yaml": "resources: [release.yaml, steal.yaml]\n",
		"fleet/store/steal.yaml": `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: steal, namespace: ` + victim + `}
spec:
  interval: 10m
  chart:
    spec:
      chart: ./charts/store
      sourceRef: {kind: GitRepository, name: fleet, namespace: ` + ns + `}
  valuesFrom:
  - {kind: Secret, name: payroll-values}
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: borrow, namespace: NS}
spec:
  interval: 10m
  chart:
    spec:
      chart: payroll
      sourceRef: {kind: HelmRepository, name: payroll, namespace: ` + victim + `}
`,
	})
	body := w.reviewed(1, base, head)
	for _, s := range []string{
		"HelmRelease/" + victim + "/steal is compared as an object; its chart is not rendered: its valuesFrom:",
		"Secret " + victim + "/payroll-values is outside this target's scope",
		"HelmRelease/" + ns + "/borrow is compared as an object; its chart is not rendered:",
		"Secret " + victim + "/payroll-charts is outside this target's scope",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the comment does not say %q:\n%s", s, body)
		}
	}
	for _, s := range []string{"payroll-s3cr3t", "charts-s3cr3t"} {
		if strings.Contains(body, s) {
			t.Errorf("the comment shows another team's Secret (%q):\n%s", s, body)
		}
	}
	if n := outside.Load(); n != 0 {
		t.Errorf("%d requests for the other team's Secrets and ConfigMaps", n)
	}
}

// TestAReleasesDriftIsWrittenInItsOwnOverlay: the store release is in a
// base that two overlays build, fleet/store (this cluster's, patching the
// release's image) and fleet/other (another cluster's). The store's
// Deployment is scaled: the drift pull request writes replicaCount into
// fleet/store alone (a patch of the release in it), and the base, which
// fleet/other renders its replicas from, is as it was.
func TestAReleasesDriftIsWrittenInItsOwnOverlay(t *testing.T) {
	t.Parallel()
	files := storeChart("1.2.0", false)
	files["fleet/base/store/kustomization.yaml"] = "resources: [release.yaml]\n"
	files["fleet/base/store/release.yaml"] = strings.Replace(storeRelease(2), "sourceRef: {kind: GitRepository, name: fleet}", "sourceRef: {kind: GitRepository, name: fleet, namespace: NS}", 1)
	files["fleet/store/kustomization.yaml"] = "resources: [../base/store]\npatches:\n- path: store-values.yaml\n"
	files["fleet/store/store-values.yaml"] = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: store, namespace: NS}\nspec:\n  values:\n    image: registry.example.com/store:1.0.0 # this cluster's\n"
	files["fleet/other/kustomization.yaml"] = "resources: [../base/store]\n"
	d := scaledStore(t, files)
	ns := d.env.Namespace
	pr := d.openPulls()[0]
	changed := d.changedFiles(d.branchNamed(pr.HeadRef))
	written := ""
	for f, content := range changed {
		if !strings.HasPrefix(f, "fleet/store/") {
			t.Errorf("the drift pull request changes %s, outside fleet/store:\n%s", f, content)
		}
		if strings.Contains(content, "replicaCount: 4") {
			written = f
		}
	}
	if written == "" {
		t.Errorf("the drift pull request changes %v, none of which sets replicaCount 4", keys(changed))
	}
	if !strings.Contains(pr.Body, "Deployment/"+ns+"/store") || written != "" && !strings.Contains(pr.Body, written) {
		t.Errorf("the pull request does not say what drifted and where it is written (%s):\n%s", written, pr.Body)
	}
}
