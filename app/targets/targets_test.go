package targets

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/testfs"

	"github.com/google/go-cmp/cmp"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/render"
)

const targetsConfig = `clusters:
  prod:
    discover: {flux: true, argocd: true, destinations: {edge-1: edge}}
  edge: {}
targets:
- repo: acme/gitops
  path: apps/shop
  cluster: prod
  name: shop
  policy: {codify: report, quietPeriod: 1m, ignore: [{kind: ConfigMap, name: generated}]}
- repo: acme/gitops
  path: tenants/*/production
  cluster: prod
- repo: acme/gitops
  path: infra/*
  cluster: edge
  name: infra
`

func parseTestConfig(t *testing.T, y string) *config.Config {
	t.Helper()
	cfg, err := config.ParseConfig([]byte(y), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestDiscoveredAndConfiguredTargetsMerge: app.yml and discovery meet by
// repository, path and cluster; app.yml's policy wins and the reconciler
// adds what it does.
func TestDiscoveredAndConfiguredTargetsMerge(t *testing.T) {
	cfg := parseTestConfig(t, targetsConfig)
	shop := &discover.Found{Object: "Application argocd/shop", Namespace: "argocd", Name: "shop", On: "prod", Repo: "Acme/GitOps", Path: "apps/shop", Cluster: "prod",
		Tracking: drift.Tracking{ArgoCDApp: "shop"}, Ignore: []object.IgnoreRule{{Kind: "Deployment", JSONPointers: []string{"/spec/replicas"}}}, Branch: "main"}
	tenant := &discover.Found{Object: "Kustomization flux-system/tenant-a", Namespace: "flux-system", Name: "tenant-a", On: "prod", Repo: "acme/gitops",
		Path: "tenants/a/production", Cluster: "prod", Interval: 10 * time.Minute, Tracking: drift.Tracking{FluxName: "tenant-a", FluxNamespace: "flux-system"}}
	billing := &discover.Found{Object: "Kustomization flux-system/billing", Namespace: "flux-system", Name: "billing", On: "prod", Repo: "acme/gitops",
		Path: "apps/billing", Cluster: "prod", SelfHeal: true}
	helm := &discover.Found{Object: "Application argocd/cache", On: "prod", Repo: "acme/gitops", Path: "charts/cache", NotRendered: "it is a Helm source"}
	chartRepo := &discover.Found{Object: "Application argocd/redis", On: "prod", NotRendered: "it installs the Helm chart redis from a chart repository: its objects are compared with the target that applies the Application"}

	twin := &discover.Found{Object: "Kustomization flux-system/billing-eu", Namespace: "flux-system", Name: "billing-eu", On: "prod", Repo: "acme/gitops",
		Path: "apps/billing", Cluster: "prod"}
	targets, skipped := Merge(cfg, []*discover.Found{shop, tenant, billing, helm, chartRepo, twin})
	byName := map[string]Target{}
	for _, tg := range targets {
		byName[tg.Name] = tg
	}
	s := byName["shop"]
	if s.Found != shop || s.Policy.Codify != config.CodifyReport || s.Tracking.ArgoCDApp != "shop" || s.Branch != "main" ||
		len(s.Policy.Ignore) != 2 || s.Policy.QuietPeriod != time.Minute || s.Describe() != "app.yml, with Application argocd/shop on cluster prod" {
		t.Errorf("app.yml's target with its Application: %+v (%s)", s, s.Describe())
	}
	a := byName["tenants/a/production"]
	if a.Found != tenant || !a.FromConfig || a.Policy.QuietPeriod != 10*time.Minute+30*time.Second || a.Policy.AckLabel != config.DefaultAckLabel {
		t.Errorf("a Kustomization matching an app.yml glob takes its settings, and waits out Flux's interval: %+v", a)
	}
	b := byName["prod/flux-system/billing"]
	// The first of two objects on one path: a target of its own, whose
	// drift is not proposed while the other applies the path too.
	if b.Found == nil || b.Found.Object != billing.Object || b.FromConfig || b.Policy.Codify != config.CodifyOff || b.CodifyOff == "" ||
		b.Policy.QuietPeriod != config.DefaultQuietPeriod || b.Describe() != "Kustomization flux-system/billing on cluster prod" {
		t.Errorf("a discovered target of its own: %+v", b)
	}
	// A second object applying the same path is a target of its own, both
	// compared and both saying so; its drift is not proposed either.
	tw := byName["prod/flux-system/billing-eu"]
	conflict := "Kustomization flux-system/billing and Kustomization flux-system/billing-eu both apply this path to this cluster"
	if tw.Found == nil || tw.Found.Object != twin.Object || tw.Path != "apps/billing" || tw.Policy.Codify != config.CodifyOff ||
		!slices.ContainsFunc(tw.Found.Notes, func(n string) bool { return strings.HasPrefix(n, conflict) }) ||
		!slices.ContainsFunc(byName["prod/flux-system/billing"].Found.Notes, func(n string) bool { return strings.HasPrefix(n, conflict) }) ||
		len(twin.Notes) != 0 || len(billing.Notes) != 0 {
		t.Errorf("a second object applying the same path: %+v, notes %v; the first's notes %v", tw, tw.Found, byName["prod/flux-system/billing"].Found)
	}
	if diff := cmp.Diff([]*discover.Found{helm, chartRepo}, skipped); diff != "" {
		t.Errorf("unrenderable sources (-want +got)\n%s", diff)
	}
	var watched []string
	for _, tg := range WatchedOn(targets, "prod") {
		watched = append(watched, tg.Name)
	}
	if diff := cmp.Diff([]string{"shop", "tenants/*/production", "tenants/a/production"}, watched); diff != "" {
		t.Errorf("the drift loop watches all but a self-healing target (-want +got)\n%s", diff)
	}
	if got := NotRendered(Touched([]*discover.Found{helm}, []string{"charts/cache/values.yaml", "README.md"})); len(got) != 1 || got[0].Source != "Application argocd/cache" {
		t.Errorf("a pull request lists the unrenderable sources it touches: %+v", got)
	}
	if got := Touched([]*discover.Found{helm}, []string{"charts/cachex/values.yaml", "README.md"}); len(got) != 0 {
		t.Errorf("a pull request lists the unrenderable sources it touches: %+v", got)
	}
}

func TestGlobTargetsExpandToTheOverlaysTheyMatch(t *testing.T) {
	cfg := parseTestConfig(t, targetsConfig)
	dir := t.TempDir()
	files := map[string]string{
		"tenants/a/production/kustomization.yaml": "resources: []\n",
		"tenants/b/production/kustomization.yaml": "resources: []\n",
		"tenants/c/staging/kustomization.yaml":    "resources: []\n",
		"tenants/d/production/notes.md":           "no kustomization here\n",
		"infra/dns/kustomization.yaml":            "resources: []\n",
	}
	testfs.Write(t, dir, files)
	tree, err := render.DirTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	// tenants/a is discovered as well: it stays one target.
	targets, _ := Merge(cfg, []*discover.Found{{Object: "Kustomization flux-system/a", Namespace: "flux-system", Name: "a", On: "prod", Repo: "acme/gitops", Path: "tenants/a/production", Cluster: "prod"}})
	var got []string
	for _, tg := range ExpandGlobs(targets, tree) {
		got = append(got, tg.Name+" → "+tg.Path+" @"+tg.Cluster+" "+tg.Describe())
	}
	want := []string{
		"shop → apps/shop @prod app.yml",
		"tenants/b/production → tenants/b/production @prod app.yml glob tenants/*/production",
		"infra infra/dns → infra/dns @edge app.yml glob infra/*",
		"tenants/a/production → tenants/a/production @prod app.yml, with Kustomization flux-system/a on cluster prod",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestDiscoveryConfigErrors(t *testing.T) {
	for _, tc := range []struct{ y, want string }{
		{"clusters:\n  prod: {discover: {}}\n", "clusters.prod.discover: neither flux nor argocd is true"},
		{"clusters:\n  prod: {discover: {flux: true, destinations: {edge: nowhere}}}\n", `clusters.prod.discover.destinations["edge"]: "nowhere" is not one of clusters`},
		{"clusters:\n  prod: {discover: {argocd: true, namespaces: ['']}}\n", "clusters.prod.discover.namespaces: an empty namespace"},
		{"targets:\n- {repo: a/b, path: 'apps/[', name: x}\n", `targets[0].path: "apps/[" is not a valid pattern`},
		{"clusters:\n  prod: {discover: {flux: true, flux2: true}}\n", "flux2"},
	} {
		_, err := config.ParseConfig([]byte(tc.y), func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to say %q", tc.y, err, tc.want)
		}
	}
}

// TestDriftBranchesAreUniquePerTarget: discovered targets whose names slug
// alike (dev/a-b/c and dev/a/b-c) get drift branches and issues of their own,
// so that one never closes the other's pull request; a name alone keeps
// its plain slug.
func TestDriftBranchesAreUniquePerTarget(t *testing.T) {
	cfg := parseTestConfig(t, targetsConfig)
	found := func(ns, name string) *discover.Found {
		return &discover.Found{Object: "Kustomization " + ns + "/" + name, Namespace: ns, Name: name, On: "dev", Repo: "acme/gitops",
			Path: "apps/" + ns + "/" + name, Cluster: "dev"}
	}
	slugs := func(fs ...*discover.Found) map[string]string {
		targets, _ := Merge(cfg, fs)
		out := map[string]string{}
		keys := map[string]string{}
		for _, tg := range targets {
			out[tg.Name] = tg.Slug()
			if other, taken := keys[tg.Slug()]; taken {
				t.Errorf("%s and %s share the drift key %s", other, tg.Name, tg.Slug())
			}
			keys[tg.Slug()] = tg.Name
		}
		return out
	}
	s := slugs(found("a-b", "c"), found("a", "b-c"), found("solo", "x"))
	one, two := s["dev/a-b/c"], s["dev/a/b-c"]
	if one == "" || two == "" || one == two || !strings.HasPrefix(one, "dev-a-b-c-") || !strings.HasPrefix(two, "dev-a-b-c-") {
		t.Errorf("colliding names: %q and %q, want two slugs of their own", one, two)
	}
	if got := s["dev/solo/x"]; got != "dev-solo-x" {
		t.Errorf("a name no other shares: %q, want its plain slug", got)
	}
	// A tenant names an object after another's hashed key: it cannot take
	// that key, whatever the order.
	aimed := strings.TrimPrefix(one, "dev-") // a-b-c-HASH: namespace a-b-c, name HASH
	cut := strings.LastIndex(aimed, "-")
	s = slugs(found("a-b", "c"), found("a", "b-c"), found(aimed[:cut], aimed[cut+1:]))
	if _, ok := s["dev/"+aimed[:cut]+"/"+aimed[cut+1:]]; !ok || s["dev/a-b/c"] != one {
		t.Errorf("targets %v: want the aimed name beside dev/a-b/c, which keeps %s", s, one)
	}
	// A discovered name that slugs like one of app.yml's targets leaves
	// that target's key (and its open drift branch) where it was.
	ts := []Target{{Target: config.Target{Name: "dev/x/shop"}}, {Target: config.Target{Name: "dev-x-shop"}, FromConfig: true}}
	DriftKeys(ts)
	if ts[1].Slug() != "dev-x-shop" || ts[0].Slug() == ts[1].Slug() {
		t.Errorf("app.yml's dev-x-shop has key %s and the discovered dev/x/shop %s; want app.yml's plain and the other its own", ts[1].Slug(), ts[0].Slug())
	}
}

// TestADiscoveredRepositoryAppYmlDoesNotNameIsNotWrittenTo: whoever made a
// reconciler object chose its repository; drift on a repository app.yml
// names nowhere is shown, not proposed, until the operator names it (a
// target, or discover.repositories for the object's namespace).
func TestADiscoveredRepositoryAppYmlDoesNotNameIsNotWrittenTo(t *testing.T) {
	elsewhere := &discover.Found{Object: "Kustomization team-a/apps", Namespace: "team-a", Name: "apps", On: "prod", Repo: "acme/team-a",
		Path: "apps", Cluster: "prod"}
	targets, _ := Merge(parseTestConfig(t, targetsConfig), []*discover.Found{elsewhere})
	var got *Target
	for i := range targets {
		if targets[i].Found != nil && targets[i].Found.Object == elsewhere.Object {
			got = &targets[i]
		}
	}
	if got == nil || got.Policy.Codify != config.CodifyOff || !got.Unnamed || !strings.Contains(got.CodifyOff, "app.yml names no target on this repository") {
		t.Fatalf("a repository app.yml does not name: %+v", got)
	}
	watched := map[string]bool{}
	for _, tg := range WatchedOn(targets, "prod") {
		watched[tg.Name] = true
	}
	if watched[got.Name] {
		t.Errorf("the drift loop watches %s", got.Name)
	}
	named := strings.Replace(targetsConfig, "discover: {flux: true,", "discover: {repositories: {team-a: [acme/team-*]}, flux: true,", 1)
	targets, _ = Merge(parseTestConfig(t, named), []*discover.Found{elsewhere})
	for _, tg := range targets {
		if tg.Found != nil && tg.Found.Object == elsewhere.Object && (tg.Policy.Codify != config.CodifyManual || tg.CodifyOff != "" || tg.Unnamed) {
			t.Errorf("named in discover.repositories: %+v", tg)
		}
	}
}

// TestTwoObjectsOnOnePathProposeNeither: when two reconciler objects apply
// one path to one cluster, the one that sorts first does not decide what
// is written back: neither's drift is proposed, each says why; and on a
// repository app.yml does not name, both checks are advisory, so a tenant's
// second object cannot fail another team's required check.
func TestTwoObjectsOnOnePathProposeNeither(t *testing.T) {
	cfg := parseTestConfig(t, targetsConfig)
	ks := func(ns, name, repo, path string) *discover.Found {
		return &discover.Found{Object: "Kustomization " + ns + "/" + name, Namespace: ns, Name: name, On: "prod", Repo: repo, Path: path, Cluster: "prod"}
	}
	for _, tc := range []struct {
		name       string
		repo, path string
		unnamed    bool
	}{
		{"app.yml's target", "acme/gitops", "apps/shop", false},
		{"a repository app.yml does not name", "acme/elsewhere", "apps", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			targets, _ := Merge(cfg, []*discover.Found{ks("flux-system", "a-decoy", tc.repo, tc.path), ks("flux-system", "real", tc.repo, tc.path)})
			var on []Target
			for _, tg := range targets {
				if tg.Repo == tc.repo && tg.Path == tc.path {
					on = append(on, tg)
				}
			}
			if len(on) != 2 {
				t.Fatalf("%d targets on the path, want both objects compared", len(on))
			}
			for _, tg := range on {
				if tg.Policy.Codify != config.CodifyOff || !strings.Contains(tg.CodifyOff, "both apply this path") {
					t.Errorf("%s (%s): codify %s (%q); want off, saying why", tg.Name, tg.Found.Object, tg.Policy.Codify, tg.CodifyOff)
				}
				if tg.Unnamed != tc.unnamed {
					t.Errorf("%s (%s): advisory %v, want %v", tg.Name, tg.Found.Object, tg.Unnamed, tc.unnamed)
				}
			}
		})
	}
}

// TestDiscoverySettingsFollowAppYml: what a cluster's discovery block says
// of its reconcilers (lenient substitution, the controller's default
// service account) reaches what discovery derives.
func TestDiscoverySettingsFollowAppYml(t *testing.T) {
	cfg := parseTestConfig(t, "clusters:\n  prod:\n    discover: {flux: true, fluxSubstitution: lenient, fluxDefaultServiceAccount: tenant}\n")
	s := NewSource(cfg, nil).Options("prod").Settings
	if !s.FluxLenientSubstitution || s.FluxDefaultServiceAccount != "tenant" || s.On != "prod" {
		t.Errorf("settings %+v, want lenient substitution and the account tenant on prod", s)
	}
}
