package discover

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestRepoOfReadsEveryURLFormReconcilersAccept(t *testing.T) {
	for _, tc := range []struct {
		url  string
		host Host
		want string
	}{
		{"https://github.com/acme/gitops", "github.com", "acme/gitops"},
		{"https://github.com/acme/gitops.git", "github.com", "acme/gitops"},
		{"https://github.com/acme/gitops/", "github.com", "acme/gitops"},
		{"https://x-access-token:tok@github.com/acme/gitops.git", "github.com", "acme/gitops"},
		{"ssh://git@github.com/acme/gitops.git", "github.com", "acme/gitops"},
		{"ssh://git@github.com:22/acme/gitops", "github.com", "acme/gitops"},
		{"git@github.com:acme/gitops.git", "github.com", "acme/gitops"},
		{"https://GitHub.com/acme/gitops", "github.com", "acme/gitops"},
		{"https://ghe.example.com/platform/fleet.git", "ghe.example.com", "platform/fleet"},
		{"git@ghe.example.com:platform/fleet.git", "ghe.example.com", "platform/fleet"},
		{"https://gitlab.com/acme/gitops", "github.com", ""},
		{"https://github.com/acme", "github.com", ""},
		{"https://github.com/acme/gitops/tree/main", "github.com", ""},
		{"oci://ghcr.io/acme/manifests", "github.com", ""},
		{"acme/gitops", "github.com", ""},
		{"https://github.com/../..", "github.com", ""},
		{"https://evil.example?x@github.com/acme/gitops", "github.com", ""},
		{"https://evil.example#@github.com/acme/gitops", "github.com", ""},
		{"git@evil.example/x@github.com:acme/gitops", "github.com", ""},
		{"https://github.com/acme/git%2fops", "github.com", ""},
		{"https://github.com/acme/gitops?x=1", "github.com", ""},
	} {
		got, ok := RepoOf(tc.url, tc.host)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("RepoOf(%q, %q) = %q, %v; want %q", tc.url, tc.host, got, ok, tc.want)
		}
	}
}

func TestHostOfMapsTheAPIToItsGitHost(t *testing.T) {
	for api, want := range map[string]Host{
		"":                                "github.com",
		"https://api.github.com/":         "github.com",
		"https://ghe.example.com/api/v3/": "ghe.example.com",
		"http://127.0.0.1:8443/":          "127.0.0.1:8443",
	} {
		if got := HostOf(api); got != want {
			t.Errorf("HostOf(%q) = %q, want %q", api, got, want)
		}
	}
}

func TestJQPointerConvertsPlainPathsOnly(t *testing.T) {
	for expr, want := range map[string]string{
		".spec.replicas":                   "/spec/replicas",
		".metadata.annotations[\"a.b/c\"]": "/metadata/annotations/a.b~1c",
		".spec.template.spec.containers[] | select(.name == \"istio-proxy\")":  "/spec/template/spec/containers/name=istio-proxy",
		".spec.template.spec.containers[] | select(.name == \"web\") | .image": "/spec/template/spec/containers/name=web/image",
		".spec.template.spec.initContainers[]?.resources":                      "/spec/template/spec/initContainers/*/resources",
		".spec.ports[0].nodePort":                                              "/spec/ports/0/nodePort",
		".spec.containers[] | select(.image | startswith(\"x\"))":              "",
		".spec | del(.x)":        "",
		"select(.name == \"x\")": "",
		"":                       "",
	} {
		got, ok := JQPointer(expr)
		if got != want || ok != (want != "") {
			t.Errorf("JQPointer(%q) = %q, %v; want %q", expr, got, ok, want)
		}
	}
}

var gitRepo = `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: flux-system}
spec:
  interval: 1m
  url: ssh://git@github.com/acme/gitops.git
  ref: {branch: main}
`

func TestFromFluxDerivesTheTargetItApplies(t *testing.T) {
	ks := obj(t, `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: flux-system}
spec:
  interval: 10m
  path: ./apps/production/
  prune: true
  sourceRef: {kind: GitRepository, name: fleet}
  targetNamespace: shop
  decryption: {provider: sops}
`)
	sources := map[string]*unstructured.Unstructured{"flux-system/fleet": obj(t, gitRepo)}
	f := FromFlux(ks, sources, Settings{On: "prod", Host: "github.com"})
	want := &Found{Reconciler: ReconcilerFlux, Object: "Kustomization flux-system/apps", Namespace: "flux-system", Name: "apps",
		On: "prod", Repo: "acme/gitops", Path: "apps/production", Branch: "main", Cluster: "prod", Prune: true,
		Tracking: drift.Tracking{FluxName: "apps", FluxNamespace: "flux-system"}, Interval: 10 * time.Minute,
		Notes: []string{"objects encrypted with sops are compared by their encrypted content: which keys changed, never their values"}}
	if diff := cmp.Diff(want, f, cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "Flux" }, cmp.Ignore())); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if f.Flux == nil || f.Flux.GetName() != "apps" {
		t.Errorf("the Kustomization itself is kept for its build: %v", f.Flux)
	}
	// kustomize-controller locked down with --default-service-account: a
	// Kustomization that names no account applies as that one; one that
	// names its own keeps it.
	locked := Settings{On: "prod", Host: "github.com", FluxDefaultServiceAccount: "tenant"}
	if f := FromFlux(ks, sources, locked); f.ServiceAccount != "tenant" {
		t.Errorf("a Kustomization naming no account applies as %q, want the controller's default", f.ServiceAccount)
	}
	named := ks.DeepCopy()
	_ = unstructured.SetNestedField(named.Object, "apps-deployer", "spec", "serviceAccountName")
	if f := FromFlux(named, sources, locked); f.ServiceAccount != "apps-deployer" {
		t.Errorf("a Kustomization naming its account applies as %q, want apps-deployer", f.ServiceAccount)
	}
}

func TestFromFluxSaysWhatItCannotRender(t *testing.T) {
	base := `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: flux-system}
spec:
  interval: 10m
  prune: false
  path: ./apps
  sourceRef: {kind: KIND, name: fleet}
`
	for _, tc := range []struct {
		name, ks, repo, want, suspended string
	}{
		{name: "an OCI source", ks: strings.ReplaceAll(base, "KIND", "OCIRepository"), repo: gitRepo, want: "OCI artifact"},
		{name: "a bucket", ks: strings.ReplaceAll(base, "KIND", "Bucket"), repo: gitRepo, want: "bucket"},
		{name: "a missing GitRepository", ks: strings.ReplaceAll(base, "KIND", "GitRepository"), repo: strings.ReplaceAll(gitRepo, "fleet", "other"), want: "does not exist"},
		{name: "a repository on another host", ks: strings.ReplaceAll(base, "KIND", "GitRepository"), repo: strings.ReplaceAll(gitRepo, "github.com", "gitlab.com"), want: "not a repository on github.com"},
		{name: "a tag", ks: strings.ReplaceAll(base, "KIND", "GitRepository"), repo: strings.ReplaceAll(gitRepo, "branch: main", "tag: v1.2.0"), want: "pinned to tag v1.2.0"},
		{name: "a semver range", ks: strings.ReplaceAll(base, "KIND", "GitRepository"), repo: strings.ReplaceAll(gitRepo, "branch: main", "semver: '>=1.0.0'"), want: "tags matching"},
		{name: "a remote cluster", ks: strings.ReplaceAll(base, "KIND", "GitRepository") + "  kubeConfig: {secretRef: {name: remote-kubeconfig}}\n", repo: gitRepo, want: "remote cluster"},
		{name: "a suspended Kustomization", ks: strings.ReplaceAll(base, "KIND", "GitRepository") + "  suspend: true\n", repo: gitRepo, suspended: "until reconciliation resumes"},
		{name: "no reference: source-controller follows master", ks: strings.ReplaceAll(base, "KIND", "GitRepository"), repo: strings.ReplaceAll(gitRepo, "ref: {branch: main}", "")},
		{name: "a suspended source", ks: strings.ReplaceAll(base, "KIND", "GitRepository"), repo: gitRepo + "  suspend: true\n", suspended: "GitRepository flux-system/fleet is suspended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := obj(t, tc.repo)
			f := FromFlux(obj(t, tc.ks), map[string]*unstructured.Unstructured{r.GetNamespace() + "/" + r.GetName(): r}, Settings{On: "prod", Host: "github.com"})
			if !strings.Contains(f.NotRendered, tc.want) || (tc.want == "" && f.NotRendered != "") {
				t.Errorf("NotRendered = %q, want it to say %q", f.NotRendered, tc.want)
			}
			if tc.name == "no reference: source-controller follows master" && f.Branch != "master" {
				t.Errorf("Branch = %q, want master", f.Branch)
			}
			if !strings.Contains(f.Suspended, tc.suspended) || (tc.suspended == "" && f.Suspended != "") {
				t.Errorf("Suspended = %q, want it to say %q", f.Suspended, tc.suspended)
			}
		})
	}
}

func TestFromArgoCDDerivesTheTargetItApplies(t *testing.T) {
	app := obj(t, `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop, namespace: argocd}
spec:
  project: default
  source:
    repoURL: https://github.com/acme/gitops.git
    path: apps/shop/overlays/production
    targetRevision: HEAD
    kustomize:
      images: [web=registry.example.com/web:2.0.0]
      namePrefix: prod-
      commonLabels: {team: shop}
      replicas: [{name: web, count: 3}]
      components: [../../components/monitoring]
  destination: {server: https://kubernetes.default.svc, namespace: shop}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
  ignoreDifferences:
  - group: apps
    kind: Deployment
    jsonPointers: [/spec/replicas]
  - kind: Service
    jqPathExpressions: ['.spec.ports[] | select(.name == "http") | .nodePort', '.spec | with_entries(.)']
    managedFieldsManagers: [istio]
`)
	f := FromArgoCD(app, Settings{On: "prod", Host: "github.com", Projects: anyProject(t)})
	want := &Found{Reconciler: ReconcilerArgoCD, Object: "Application argocd/shop", Namespace: "argocd", Name: "shop", On: "prod",
		Repo: "acme/gitops", Path: "apps/shop/overlays/production", Cluster: "prod", Prune: true, SelfHeal: true, DestinationNamespace: "shop",
		Tracking: drift.Tracking{ArgoCDApp: "shop"},
		Ignore: []object.IgnoreRule{
			{Group: "apps", Kind: "Deployment", JSONPointers: []string{"/spec/replicas"}},
			{Kind: "Service", JSONPointers: []string{"/spec/ports/name=http/nodePort"}, Managers: []string{"istio"}},
		},
		Notes: []string{`ignoreDifferences jqPathExpression ".spec | with_entries(.)" is not a plain path; driftback does not apply it`},
		Kustomize: &ArgoKustomize{NamePrefix: "prod-", Images: []string{"web=registry.example.com/web:2.0.0"},
			CommonLabels: map[string]string{"team": "shop"}, Replicas: []ArgoReplicas{{Name: "web", Count: 3}},
			Components: []string{"../../components/monitoring"}},
		Application: app,
	}
	if diff := cmp.Diff(want, f); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestFromArgoCDSaysWhatItCannotRender(t *testing.T) {
	base := `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop, namespace: NS}
spec:
  project: default
  destination: DEST
  SOURCE
`
	src := "source: {repoURL: 'git@github.com:acme/gitops.git', path: apps/shop, targetRevision: main}"
	inCluster := "{server: 'https://kubernetes.default.svc'}"
	for _, tc := range []struct {
		name, source, dest, ns string
		want                   Found
	}{
		{name: "a Helm chart", source: "source: {repoURL: https://charts.example.com, chart: redis, targetRevision: 18.0.0}", dest: inCluster,
			want: Found{Cluster: "prod", NotRendered: "it installs the Helm chart redis from a chart repository: its objects are compared with the target that applies the Application", Suspended: "x"}},
		// A chart in the repository is rendered: its options are read.
		{name: "a Helm path", source: "source: {repoURL: https://github.com/acme/gitops, path: charts/shop, helm: {releaseName: shop}}", dest: inCluster,
			want: Found{Repo: "acme/gitops", Path: "charts/shop", Cluster: "prod", Suspended: "x"}},
		{name: "several sources", source: "sources: [{repoURL: https://github.com/acme/gitops, path: a}, {repoURL: https://github.com/acme/gitops, path: b}]", dest: inCluster,
			want: Found{Cluster: "prod", NotRendered: "it has 2 sources (spec.sources); driftback renders single-source kustomize Applications", Suspended: "x"}},
		{name: "a plugin", source: "source: {repoURL: https://github.com/acme/gitops, path: a, plugin: {name: cdk8s}}", dest: inCluster,
			want: Found{Repo: "acme/gitops", Path: "a", Cluster: "prod", NotRendered: "it is rendered by a config management plugin", Suspended: "x"}},
		{name: "an SSH URL on a branch, synced by hand", source: src, dest: inCluster,
			want: Found{Repo: "acme/gitops", Path: "apps/shop", Branch: "main", Cluster: "prod", Suspended: "x"}},
		// A name that is a key of clusters is not that cluster unless
		// mapped: an Application on dev cannot choose to be compared with
		// prod by naming it.
		{name: "a named destination app.yml does not map", source: src, dest: "{name: staging}",
			want: Found{Repo: "acme/gitops", Path: "apps/shop", Branch: "main", Suspended: "x",
				Notes: []string{`it applies to "staging", which discover.destinations does not map to one of app.yml's clusters: the pull request is compared in Git only`}}},
		{name: "a mapped destination server", source: src, dest: "{server: 'https://10.0.0.1:6443'}",
			want: Found{Repo: "acme/gitops", Path: "apps/shop", Branch: "main", Cluster: "edge", Suspended: "x"}},
		{name: "an unknown destination", source: src, dest: "{name: elsewhere}",
			want: Found{Repo: "acme/gitops", Path: "apps/shop", Branch: "main", Suspended: "x",
				Notes: []string{`it applies to "elsewhere", which discover.destinations does not map to one of app.yml's clusters: the pull request is compared in Git only`}}},
		{name: "a pinned commit", source: "source: {repoURL: 'https://github.com/acme/gitops', path: a, targetRevision: 0123456789abcdef0123456789abcdef01234567}", dest: inCluster,
			want: Found{Repo: "acme/gitops", Path: "a", Cluster: "prod", Suspended: "x", NotRendered: "it is pinned to commit 0123456789abcdef0123456789abcdef01234567: merging changes nothing it applies"}},
		{name: "an Application in a namespace Argo CD reconciles (application.namespaces)", source: src, dest: inCluster, ns: "team-a",
			want: Found{Repo: "acme/gitops", Path: "apps/shop", Branch: "main", Cluster: "prod", Suspended: "x"}},
		{name: "an Application in a namespace by a regular expression", source: src, dest: inCluster, ns: "ops-7",
			want: Found{Repo: "acme/gitops", Path: "apps/shop", Branch: "main", Cluster: "prod", Suspended: "x"}},
		// Argo CD never syncs it: whoever made it would only steer what
		// driftback compares.
		{name: "an Application in a namespace Argo CD ignores", source: src, dest: inCluster, ns: "tenant-b",
			want: Found{NotRendered: "Argo CD does not reconcile Applications in namespace tenant-b: only in argocd and the namespaces of application.namespaces in argocd-cmd-params-cm"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.ns
			if ns == "" {
				ns = "argocd"
			}
			y := strings.NewReplacer("SOURCE", tc.source, "DEST", tc.dest, "NS", ns).Replace(base)
			f := FromArgoCD(obj(t, y), Settings{On: "prod", Host: "github.com",
				Destinations: map[string]string{"https://10.0.0.1:6443": "edge"}, ArgoCDAppNamespaces: []string{"team-*", "/^ops-[0-9]+$/"},
				Projects: anyProject(t)})
			got := Found{Repo: f.Repo, Path: f.Path, Branch: f.Branch, Cluster: f.Cluster, NotRendered: f.NotRendered, Notes: f.Notes}
			if f.Suspended != "" {
				got.Suspended = "x"
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			wantApp := "shop"
			if ns != "argocd" {
				wantApp = ns + "_shop"
			}
			if f.Tracking.ArgoCDApp != wantApp {
				t.Errorf("tracked as %q, want %q (Argo CD's instance name)", f.Tracking.ArgoCDApp, wantApp)
			}
		})
	}
}

// anyProject is Argo CD's default project as it installs it: every source,
// destination and namespace.
func anyProject(t *testing.T) map[string]*unstructured.Unstructured {
	return map[string]*unstructured.Unstructured{"default": obj(t, `apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: default, namespace: argocd}
spec:
  sourceRepos: ['*']
  sourceNamespaces: ['*']
  destinations: [{namespace: '*', server: '*'}]
  clusterResourceWhitelist: [{group: '*', kind: '*'}]
`)}
}

// TestAppProjectsDecideWhatCounts: an Application counts only where its
// AppProject lets Argo CD sync it: the project exists, lets Applications of
// its namespace use it, and permits its source and its destination (deny
// patterns included). AppProjects that could not be read let none count.
func TestAppProjectsDecideWhatCounts(t *testing.T) {
	app := func(ns, project, repo, destNS string) *unstructured.Unstructured {
		return obj(t, "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: shop, namespace: "+ns+"}\nspec:\n  project: "+project+
			"\n  destination: {server: 'https://kubernetes.default.svc', namespace: "+destNS+"}\n  source: {repoURL: '"+repo+"', path: apps/shop}\n")
	}
	project := func(spec string) map[string]*unstructured.Unstructured {
		return map[string]*unstructured.Unstructured{"team": obj(t, "apiVersion: argoproj.io/v1alpha1\nkind: AppProject\nmetadata: {name: team, namespace: argocd}\nspec:\n"+spec)}
	}
	named := func(dest string) *unstructured.Unstructured {
		return obj(t, "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: shop, namespace: argocd}\nspec:\n  project: default"+
			"\n  destination: {name: "+dest+", namespace: shop}\n  source: {repoURL: 'https://github.com/acme/gitops.git', path: apps/shop}\n")
	}
	// Argo CD's default project as it installs it: servers only.
	stock := map[string]*unstructured.Unstructured{"default": obj(t, "apiVersion: argoproj.io/v1alpha1\nkind: AppProject\nmetadata: {name: default, namespace: argocd}\nspec:\n  sourceRepos: ['*']\n  destinations: [{server: '*', namespace: '*'}]\n")}
	inClusterOnly := map[string]*unstructured.Unstructured{"default": obj(t, "apiVersion: argoproj.io/v1alpha1\nkind: AppProject\nmetadata: {name: default, namespace: argocd}\nspec:\n  sourceRepos: ['*']\n  destinations: [{server: 'https://kubernetes.default.svc', namespace: '*'}]\n")}
	byName := map[string]*unstructured.Unstructured{"default": obj(t, "apiVersion: argoproj.io/v1alpha1\nkind: AppProject\nmetadata: {name: default, namespace: argocd}\nspec:\n  sourceRepos: ['*']\n  destinations: [{name: in-cluster, namespace: '*'}]\n")}
	const repo = "https://github.com/acme/gitops.git"
	teamOnly := project("  sourceRepos: ['https://github.com/acme/*']\n  destinations: [{server: 'https://kubernetes.default.svc', namespace: 'team-*'}]\n")
	for _, tc := range []struct {
		name     string
		app      *unstructured.Unstructured
		projects map[string]*unstructured.Unstructured
		refused  string // "" when it counts
	}{
		{"a project that does not exist", app("argocd", "team", repo, "team-a"), anyProject(t), "its AppProject team does not exist in argocd"},
		{"the default project", app("argocd", "", repo, "shop"), anyProject(t), ""},
		{"a permitted source and destination", app("argocd", "team", repo, "team-a"), teamOnly, ""},
		{"a destination the project leaves out", app("argocd", "team", repo, "kube-system"), teamOnly, "does not permit its destination https://kubernetes.default.svc, namespace \"kube-system\""},
		{"a source the project leaves out", app("argocd", "team", "https://github.com/other/gitops", "team-a"), teamOnly, "does not permit its source https://github.com/other/gitops"},
		{"a denied namespace", app("argocd", "team", repo, "kube-system"),
			project("  sourceRepos: ['*']\n  destinations: [{server: '*', namespace: '*'}, {server: '*', namespace: '!kube-system'}]\n"), "does not permit its destination"},
		{"an Application in another namespace the project does not take", app("team-a", "team", repo, "team-a"), teamOnly,
			"does not let Applications in namespace team-a use it (spec.sourceNamespaces)"},
		{"an Application in another namespace the project takes", app("team-a", "team", repo, "team-a"),
			project("  sourceNamespaces: ['team-*']\n  sourceRepos: ['*']\n  destinations: [{server: '*', namespace: 'team-*'}]\n"), ""},
		{"AppProjects that could not be read", app("argocd", "", repo, "shop"), nil, "could not be read"},
		{"destination.name in-cluster, the stock default project", named("in-cluster"), stock, ""},
		{"destination.name in-cluster, a project naming its server", named("in-cluster"), inClusterOnly, ""},
		{"destination.name of another cluster, a project naming the cluster it runs in", named("apps-prod"), inClusterOnly, "does not permit its destination apps-prod"},
		{"destination.name of another cluster, the stock default project", named("apps-prod"), stock, ""},
		{"destination.server of the cluster it runs in, a project naming in-cluster", app("argocd", "", repo, "shop"), byName, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := FromArgoCD(tc.app, Settings{On: "prod", Host: "github.com", ArgoCDAppNamespaces: []string{"team-*"}, Projects: tc.projects})
			switch {
			case tc.refused == "" && f.NotRendered != "":
				t.Errorf("refused: %s", f.NotRendered)
			case tc.refused != "" && !strings.Contains(f.NotRendered, tc.refused):
				t.Errorf("not rendered %q, want it to say %q", f.NotRendered, tc.refused)
			}
		})
	}
}
