package app

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/review"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/internal/kubetest"
)

// fleetFiles are a repository Flux and Argo CD apply from: a plain
// directory of manifests (Flux generates its kustomization), a kustomize
// overlay, and a Helm chart.
var fleetFiles = map[string]any{
	"fleet/apps/settings.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data:
  cluster: "${CLUSTER_NAME}"
  mode: normal
`,
	"fleet/apps/db.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: db}
data:
  dsn: "postgres://app:${DB_PASSWORD}@db.internal/shop"
  loud: "${DB_PASSWORD^^}"
`,
	"fleet/shop/kustomization.yaml": "resources: [web.yaml]\n",
	"fleet/shop/web.yaml":           "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: shop, namespace: NS}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: shop}}\n  template:\n    metadata: {labels: {app: shop}}\n    spec:\n      containers: [{name: web, image: 'web:1.0.0'}]\n",
	"fleet/chart/Chart.yaml":        "apiVersion: v2\nname: cache\nversion: 1.0.0\n",
	"fleet/chart/values.yaml":       "replicas: 1\n",
	"fleet/chart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ .Release.Name }}-settings', namespace: NS}\ndata: {replicas: '{{ .Values.replicas }}'}\n",
}

// dbPassword is a Secret's value Flux substitutes into a ConfigMap: it must
// never appear in a comment, a check run or a log.
const dbPassword = "hunter2-canary-5521"

// TestDiscoveredTargetsEndToEnd: app.yml names no target; a Flux
// Kustomization and, added while serving, an Argo CD Application give the
// targets. The Flux render is substituted from a live ConfigMap and Secret
// as kustomize-controller does, so its values are not reported as changes
// the pull request would overwrite, and the Secret's value is never shown.
func TestDiscoveredTargetsEndToEnd(t *testing.T) {
	t.Parallel()
	var w *world
	w = newWorld(t, func(c *config.Config) {
		c.Targets = nil
		cl := c.Clusters["test"]
		cl.Discover = &config.Discover{Flux: true, ArgoCD: true}
		c.Clusters["test"] = cl
	})
	w.logs.secret(dbPassword)
	w.logs.secret(strings.ToUpper(dbPassword))
	ns := w.env.Namespace
	kubetest.InstallCRDs(t, w.env, kubetest.ReconcilerCRDs(t)...)
	w.cfg.Clusters["test"].Discover.Namespaces = []string{ns}
	w.cfg.Clusters["test"].Discover.ArgoCDNamespace = ns
	kubetest.ArgoCDDefaultProject(t, w.env, ns)
	host := string(discover.HostOf(w.gh.URL()))
	hostname, _, _ := strings.Cut(host, ":")
	w.apply(`apiVersion: v1
kind: ConfigMap
metadata: {name: cluster-vars, namespace: NS}
data: {CLUSTER_NAME: prod-eu-1}`)
	w.apply(`apiVersion: v1
kind: Secret
metadata: {name: db, namespace: NS}
stringData: {DB_PASSWORD: ` + dbPassword + `}`)
	w.apply(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: NS}
spec:
  interval: 1m
  url: ssh://git@` + hostname + `/acme/gitops.git
  ref: {branch: main}`)
	w.apply(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: NS}
spec:
  interval: 10m
  path: ./fleet/apps
  prune: true
  targetNamespace: NS
  sourceRef: {kind: GitRepository, name: fleet}
  postBuild:
    substituteFrom:
    - {kind: ConfigMap, name: cluster-vars}
    - {kind: Secret, name: db}`)
	// What kustomize-controller applied.
	w.apply(`apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: NS
  labels: {kustomize.toolkit.fluxcd.io/name: apps, kustomize.toolkit.fluxcd.io/namespace: NS}
data: {cluster: prod-eu-1, mode: normal}`)
	w.apply(`apiVersion: v1
kind: ConfigMap
metadata:
  name: db
  namespace: NS
  labels: {kustomize.toolkit.fluxcd.io/name: apps, kustomize.toolkit.fluxcd.io/namespace: NS}
data: {dsn: "postgres://app:` + dbPassword + `@db.internal/shop", loud: ` + strings.ToUpper(dbPassword) + `}`)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.srv.App.targets.SetOnChange(w.srv.Drift.WakeAll)
	go w.srv.App.targets.Run(ctx)

	base := w.commit(plumbing.ZeroHash, fleetFiles)
	head := w.commit(base, map[string]any{
		"fleet/apps/settings.yaml": strings.Replace(fleetFiles["fleet/apps/settings.yaml"].(string), "mode: normal", "mode: fast", 1),
		"fleet/apps/db.yaml":       strings.Replace(fleetFiles["fleet/apps/db.yaml"].(string), "db.internal", "db2.internal", 1),
	})
	w.openPR(1, base, head, nil)
	if code := w.deliver("pull_request", "d-open", prPayload("opened", 1, head.String())); code != http.StatusAccepted {
		t.Fatalf("opened: %d", code)
	}
	apps := "test/" + ns + "/apps"
	runs := w.waitChecks(head.String(), 2)
	if got := conclusions(runs); len(runs) != 2 || got["driftback / "+apps] != "success" || got[review.AggregateCheckName] != "success" {
		t.Errorf("check runs: the aggregate and the discovered target's: %+v", runs)
	}
	body := w.gh.Comments(fullName, 1)[0].Body
	for _, s := range []string{"### `" + apps + "` (`fleet/apps`) on cluster `test`", "ConfigMap/" + ns + "/settings",
		"changed by this PR `.data.mode`: Git `\"normal\"` → `\"fast\"`",
		"ConfigMap/" + ns + "/db", "changed by this PR `.data.dsn`: Git `(value hidden)` → `(value hidden)`"} {
		if !strings.Contains(body, s) {
			t.Errorf("the comment does not say %q:\n%s", s, body)
		}
	}
	for _, s := range []string{".data.cluster", ".data.loud", "${CLUSTER_NAME}", dbPassword, strings.ToUpper(dbPassword), "db2.internal"} {
		if strings.Contains(body, s) {
			t.Errorf("the comment says %q: substituted values are what Flux applies, not changes:\n%s", s, body)
		}
	}
	for _, r := range w.gh.CheckRuns(fullName, head.String()) {
		if strings.Contains(r.Summary+r.Text+r.Title, dbPassword) {
			t.Errorf("check run %s shows the Secret's value", r.Name)
		}
	}

	// An Application added while serving is a target without a restart; so
	// is a Helm one, rendered as Argo CD's repo-server renders its chart.
	w.apply(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop, namespace: NS}
spec:
  project: default
  source:
    repoURL: git@` + hostname + `:acme/gitops.git
    path: fleet/shop
    kustomize: {images: ["web=registry.example.com/web:2.0.0"]}
  destination: {server: https://kubernetes.default.svc, namespace: NS}
  syncPolicy: {automated: {prune: true}}`)
	w.apply(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: cache, namespace: NS}
spec:
  project: default
  source: {repoURL: 'https://` + hostname + `/acme/gitops', path: fleet/chart}
  destination: {server: https://kubernetes.default.svc}
  syncPolicy: {automated: {}}`)
	var targets []targets.Target
	var skipped []*discover.Found
	eventually(t, func() bool {
		targets, skipped = w.srv.App.targetsOf(fullName)
		return len(targets) == 3 && len(skipped) == 0
	}, "the new Applications to be discovered", func() string {
		return fmt.Sprintf("%d targets, %d not rendered", len(targets), len(skipped))
	})
	head2 := w.commit(base, map[string]any{
		"fleet/shop/web.yaml":     strings.Replace(fleetFiles["fleet/shop/web.yaml"].(string), "replicas: 1", "replicas: 2", 1),
		"fleet/chart/values.yaml": "replicas: 2\n",
	})
	w.openPR(2, base, head2, nil)
	if code := w.deliver("pull_request", "d-open-2", prPayload("opened", 2, head2.String())); code != http.StatusAccepted {
		t.Fatalf("opened: %d", code)
	}
	shop, cache := "test/"+ns+"/shop", "test/"+ns+"/cache"
	runs = w.waitChecks(head2.String(), 3)
	if got := conclusions(runs); len(runs) != 3 || got["driftback / "+shop] == "" || got["driftback / "+cache] == "" {
		t.Errorf("check runs: the aggregate and the new targets': %+v", runs)
	}
	body = w.gh.Comments(fullName, 2)[0].Body
	for _, s := range []string{"### `" + shop + "` (`fleet/shop`) on cluster `test`", "Deployment/" + ns + "/shop",
		"registry.example.com/web:2.0.0", "### `" + cache + "` (`fleet/chart`) on cluster `test`", "ConfigMap/" + ns + "/cache-settings"} {
		if !strings.Contains(body, s) {
			t.Errorf("the comment does not say %q:\n%s", s, body)
		}
	}
}

// TestADecoyReconcilerObjectIsComparedNotChosen: a second Kustomization
// claiming the repository, path and cluster of app.yml's target (sorted
// first, prune off, as a tenant could create one) no longer becomes that
// target's build. Both are compared, each as it builds: the real
// Kustomization's prune of a claim fails the check app.yml's policy asks
// for, as it did before the decoy came.
func TestADecoyReconcilerObjectIsComparedNotChosen(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(c *config.Config) {
		c.Targets = []config.Target{{Name: "prod", Repo: fullName, Path: "fleet/prod", Cluster: "test",
			Policy: config.Policy{FailOn: []drift.DangerReason{drift.DangerPVCRemoval}, AckLabel: config.DefaultAckLabel}}}
		cl := c.Clusters["test"]
		cl.Discover = &config.Discover{Flux: true}
		c.Clusters["test"] = cl
	})
	ns := w.env.Namespace
	kubetest.InstallCRDs(t, w.env, kubetest.ReconcilerCRDs(t)...)
	w.cfg.Clusters["test"].Discover.Namespaces = []string{ns}
	hostname, _, _ := strings.Cut(string(discover.HostOf(w.gh.URL())), ":")
	w.apply(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: NS}
spec: {interval: 1m, url: 'https://` + hostname + `/acme/gitops', ref: {branch: main}}`)
	for _, ks := range []struct{ name, prune string }{{"zz-apps", "true"}, {"aa-decoy", "false"}} {
		w.apply(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: ` + ks.name + `, namespace: NS}
spec: {interval: 10m, path: ./fleet/prod, prune: ` + ks.prune + `, sourceRef: {kind: GitRepository, name: fleet}}`)
	}
	w.apply(`apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  namespace: NS
  labels: {kustomize.toolkit.fluxcd.io/name: zz-apps, kustomize.toolkit.fluxcd.io/namespace: NS}
spec: {accessModes: [ReadWriteOnce], volumeName: data-volume, resources: {requests: {storage: 1Gi}}}`) // bound: it holds data
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.srv.App.targets.Run(ctx)
	eventually(t, func() bool { ts, sk := w.srv.App.targetsOf(fullName); return len(ts)+len(sk) == 2 }, "both Kustomizations to be discovered")

	pvc := "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: NS}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n"
	base := w.commit(plumbing.ZeroHash, map[string]any{"fleet/prod/kustomization.yaml": "resources: [data.yaml]\n", "fleet/prod/data.yaml": pvc})
	head := w.commit(base, map[string]any{"fleet/prod/kustomization.yaml": "resources: []\n", "fleet/prod/data.yaml": nil})
	w.openPR(1, base, head, nil)
	if code := w.deliver("pull_request", "d-decoy", prPayload("opened", 1, head.String())); code != http.StatusAccepted {
		t.Fatalf("opened: %d", code)
	}
	runs := w.waitChecks(head.String(), 3)
	wantAggregate(t, runs, "failure")
	real := findRun(t, runs, "driftback / test/"+ns+"/zz-apps")
	if real.Conclusion != "failure" || !strings.Contains(real.Title, "pvc-removal") {
		t.Errorf("the real Kustomization's check: %s %q", real.Conclusion, real.Title)
	}
	body := w.gh.Comments(fullName, 1)[0].Body
	for _, s := range []string{"Kustomization " + ns + "/aa-decoy and Kustomization " + ns + "/zz-apps both apply this path to this cluster"} {
		if strings.Count(body, s) < 2 {
			t.Errorf("the comment does not say %q under both targets:\n%s", s, body)
		}
	}
}

// TestDiscoveryFollowsTheOperator: reconciler objects count only in the
// namespaces app.yml lists, and name only the repositories app.yml lets
// their namespace name. A tenant's Kustomization in a namespace not listed
// adds nothing; one naming a repository its namespace may not name is
// listed as not rendered, with why, and is no target.
func TestDiscoveryFollowsTheOperator(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(c *config.Config) {
		c.Targets = nil
		cl := c.Clusters["test"]
		cl.Discover = &config.Discover{Flux: true}
		c.Clusters["test"] = cl
	})
	ns := w.env.Namespace
	tenant := ns + "-tenant"
	if _, err := w.env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.InstallCRDs(t, w.env, kubetest.ReconcilerCRDs(t)...)
	d := w.cfg.Clusters["test"].Discover
	d.Namespaces = []string{ns}
	d.Repositories = map[string][]string{ns: {"acme/team-*"}}
	hostname, _, _ := strings.Cut(string(discover.HostOf(w.gh.URL())), ":")
	for _, where := range []string{ns, tenant} {
		w.apply(strings.ReplaceAll(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: WHERE}
spec: {interval: 1m, url: 'https://`+hostname+`/acme/gitops', ref: {branch: main}}`, "WHERE", where))
		w.apply(strings.ReplaceAll(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: steer, namespace: WHERE}
spec: {interval: 10m, path: ./apps/prod, prune: false, sourceRef: {kind: GitRepository, name: fleet}}`, "WHERE", where))
	}
	list, err := ListTargets(context.Background(), w.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Targets) != 0 {
		t.Errorf("targets %+v, want none", list.Targets)
	}
	want := "objects in namespace " + ns + " may not name repository acme/gitops (clusters.test.discover.repositories)"
	if len(list.NotRendered) != 1 || list.NotRendered[0].Source != "Kustomization "+ns+"/steer" || list.NotRendered[0].Reason != want {
		t.Errorf("not rendered %+v, want the Kustomization of %s only, saying %q (the tenant's namespace is not listed)", list.NotRendered, ns, want)
	}
}
