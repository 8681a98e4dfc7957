package app

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/review"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/internal/githubfake"
	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/report/jsonreport"
)

// The conformance suite: one case per shape that public Flux and Argo CD
// repositories have (docs/conformance.md says which repository showed each),
// end to end on the real apiserver with the reconcilers' real CRDs, through
// serve's pull-request flow and the GitHub fake. Each case puts the
// reconcilers' objects and what they applied in the cluster, opens a pull
// request, and checks what driftback decided for every object, every check
// and every source it does not render, and what `driftback targets` says.

// shape is one case of the suite.
type shape struct {
	name string
	// reconcilers are the Flux and Argo CD objects in the cluster, a YAML
	// stream in which NS is the test's namespace, SRCNS a second one and
	// HOST the GitHub host.
	reconcilers string
	// live are what the reconcilers applied before the pull request, by
	// field manager (kustomize-controller, argocd-controller, kubectl…).
	live map[string]string
	// base is the repository the pull request merges into; head holds what
	// the pull request changes (nil deletes a file).
	base, head map[string]any
	// branch is the branch the pull request merges into; "" is main, the
	// default branch. When it is another, main is base changed by
	// mainFiles.
	branch    string
	mainFiles map[string]any

	// targets are the discovered targets by path, with how `targets` says
	// they are built and what the reconciler finds there ("BUILD: " and a
	// prefix of TargetInfo.Source).
	targets map[string]string
	// objects are what merging does, by target path and object (Kind/ns/name
	// or Kind/name): create, update, delete, keep or unchanged. A target's
	// objects not listed must not be in its report.
	objects map[string]map[string]drift.Action
	// fields are field changes that must be in a target's report, as
	// "Kind/ns/name .path: live → desired" (values as JSON).
	fields map[string][]string
	// notRendered are the sources of the pull request that are not
	// rendered, by "Kind ns/name", with a part of the reason.
	notRendered map[string]string
	// notCompared are targets compared not at all, with a part of why.
	notCompared map[string]string
	// checks are the target checks' conclusions by path (those not listed
	// must be success), and aggregate the required check's.
	checks    map[string]string
	aggregate string
	// discovered is how many reconciler objects name this repository
	// (default: every Kustomization and Application of reconcilers).
	discovered int
	// listed are the sources `targets` lists as not rendered, by
	// "Kind ns/name", with a part of the reason; codify is what it says of
	// a target's drift, by path.
	listed map[string]string
	codify map[string]string
	// notes are a part of a note a target's report must carry, by path.
	notes map[string]string
	// never are strings that the comment, the check runs and the JSON
	// report must not hold (pieces of a Secret's value).
	never []string
}

// conformanceCases are the shapes; each fails on a build of driftback that
// gets it wrong (the issue that found it is named where one did).
func conformanceCases() []shape {
	deployment := func(name, image string, replicas string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: " + name + "}\nspec:\n  replicas: " + replicas +
			"\n  selector: {matchLabels: {app: " + name + "}}\n  template:\n    metadata: {labels: {app: " + name + "}}\n    spec:\n      containers: [{name: " + name + ", image: '" + image + "'}]\n"
	}
	service := func(name string) string {
		return "apiVersion: v1\nkind: Service\nmetadata: {name: " + name + "}\nspec:\n  ports: [{port: 80, targetPort: 80}]\n  selector: {app: " + name + "}\n"
	}
	inNS := func(y string) string {
		return strings.Replace(y, "metadata: {name: ", "metadata: {namespace: NS, name: ", 1)
	}
	gitRepository := "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: fleet, namespace: NS}\nspec: {interval: 1m, url: 'https://HOST/acme/gitops', ref: {branch: main}}\n"
	fluxKS := func(name, path string, extra string) string {
		return "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: " + name + ", namespace: NS}\nspec:\n  interval: 10m\n  path: '" + path + "'\n  prune: true\n  sourceRef: {kind: GitRepository, name: fleet}\n" + extra
	}
	argoApp := func(name, source, extra string) string {
		return "---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: " + name + ", namespace: NS}\nspec:\n  project: default\n  source: " + source +
			"\n  destination: {server: 'https://kubernetes.default.svc', namespace: NS}\n  syncPolicy: {automated: {prune: true}}\n" + extra
	}
	fluxLabels := func(name string) string {
		return "labels: {kustomize.toolkit.fluxcd.io/name: " + name + ", kustomize.toolkit.fluxcd.io/namespace: NS}"
	}
	withMeta := func(y, meta string) string { return strings.Replace(y, "metadata: {", "metadata: {"+meta+", ", 1) }
	ref := func(kind, name string) string { return kind + "/NS/" + name }

	return []shape{{
		// flux-local's test cluster: postBuild substitutes into objects that
		// hold integers, booleans, floats and lists (a HelmRelease's
		// install.remediation.retries: 3 panicked every pull request).
		name: "Flux postBuild from inline values, a ConfigMap and a Secret, on objects holding integers",
		reconcilers: gitRepository + fluxKS("apps", "./apps", `  targetNamespace: NS
  postBuild:
    substitute: {REPLICAS: "2", DOMAIN: shop.example.com}
    substituteFrom:
    - {kind: ConfigMap, name: cluster-vars}
    - {kind: Secret, name: cluster-secrets}
    - {kind: ConfigMap, name: not-there, optional: true}
`) + `---
apiVersion: v1
kind: ConfigMap
metadata: {name: cluster-vars, namespace: NS}
data: {ENV: Staging}
---
apiVersion: v1
kind: Secret
metadata: {name: cluster-secrets, namespace: NS}
stringData: {API_TOKEN: conformance-canary-7731}
`,
		live: map[string]string{"kustomize-controller": withMeta(inNS(deployment("web", "web:1", "2")), fluxLabels("apps")) + "---\n" + `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: podinfo, namespace: NS, ` + fluxLabels("apps") + `}
spec:
  interval: 5m
  chart: {spec: {chart: podinfo, sourceRef: {kind: HelmRepository, name: podinfo}}}
  install: {remediation: {retries: 3}}
  values: {replicaCount: 2, ratio: 0.5, enabled: true, env: staging, hosts: [a.shop.example.com, b]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cert-shop-example.com, namespace: NS, ` + fluxLabels("apps") + `}
data: {issuer: fallback, api: token conformance-canary-7731}
`},
		base: map[string]any{
			"apps/web.yaml": deployment("web", "web:1", "${REPLICAS}"),
			"apps/podinfo.yaml": `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: podinfo}
spec:
  interval: 5m
  chart: {spec: {chart: podinfo, sourceRef: {kind: HelmRepository, name: podinfo}}}
  install: {remediation: {retries: 3}}
  values:
    replicaCount: ${REPLICAS}
    ratio: 0.5
    enabled: true
    env: "${ENV,,}"
    hosts: ["a.${DOMAIN}", b]
`,
			"apps/cert.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: 'cert-${DOMAIN/./-}'}\ndata: {issuer: '${ISSUER:=fallback}', api: 'token ${API_TOKEN}'}\n",
		},
		head:    map[string]any{"apps/web.yaml": deployment("web", "web:2", "${REPLICAS}")},
		targets: map[string]string{"apps": "flux: plain manifests at main (Flux generates the kustomization)"},
		objects: map[string]map[string]drift.Action{"apps": {
			ref("Deployment", "web"): drift.ActionUpdate, ref("HelmRelease", "podinfo"): drift.ActionUnchanged,
			ref("ConfigMap", "cert-shop-example.com"): drift.ActionUnchanged,
		}},
		fields: map[string][]string{"apps": {ref("Deployment", "web") + ` .spec.template.spec.containers[name="web"].image: "web:1" → "web:2"`}},
	}, {
		// argoproj/argocd-example-apps kustomize-guestbook: the kustomization
		// names no namespace; Argo CD puts the objects in the destination's
		// (they were reported deleted and outside the scope at once).
		name:        "Argo CD kustomize without a namespace, placed by destination.namespace, tracked by label",
		reconcilers: argoApp("guestbook", "{repoURL: 'https://HOST/acme/gitops', path: guestbook}", ""),
		live: map[string]string{"argocd-controller": withMeta(inNS(deployment("guestbook-ui", "guestbook:0.1", "1")), "labels: {app.kubernetes.io/instance: guestbook}") + "---\n" +
			withMeta(inNS(service("guestbook-ui")), "labels: {app.kubernetes.io/instance: guestbook}")},
		base: map[string]any{
			"guestbook/kustomization.yaml": "resources: [deployment.yaml, service.yaml]\n",
			"guestbook/deployment.yaml":    deployment("guestbook-ui", "guestbook:0.1", "1"),
			"guestbook/service.yaml":       service("guestbook-ui"),
		},
		head:    map[string]any{"guestbook/deployment.yaml": deployment("guestbook-ui", "guestbook:0.1", "2")},
		targets: map[string]string{"guestbook": "argocd: a kustomization at main"},
		objects: map[string]map[string]drift.Action{"guestbook": {
			ref("Deployment", "guestbook-ui"): drift.ActionUpdate, ref("Service", "guestbook-ui"): drift.ActionUnchanged,
		}},
		fields: map[string][]string{"guestbook": {ref("Deployment", "guestbook-ui") + " .spec.replicas: 1 → 2"}},
	}, {
		// Argo CD's default tracking since v3: the tracking-id annotation it
		// writes on every sync is never drift.
		name: "Argo CD annotation tracking: the tracking-id annotation is the reconciler's",
		reconcilers: argoApp("annotated", "{repoURL: 'https://HOST/acme/gitops', path: guestbook}", "") +
			"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: argocd-cm, namespace: NS}\ndata: {application.resourceTrackingMethod: annotation}\n",
		live: map[string]string{"argocd-controller": withMeta(inNS(deployment("guestbook-ui", "guestbook:0.1", "1")),
			"annotations: {argocd.argoproj.io/tracking-id: 'annotated:apps/Deployment:NS/guestbook-ui'}") + "---\n" +
			withMeta(inNS(service("guestbook-ui")), "annotations: {argocd.argoproj.io/tracking-id: 'annotated:/Service:NS/guestbook-ui'}")},
		base: map[string]any{
			"guestbook/kustomization.yaml": "resources: [deployment.yaml, service.yaml]\n",
			"guestbook/deployment.yaml":    deployment("guestbook-ui", "guestbook:0.1", "1"),
			"guestbook/service.yaml":       service("guestbook-ui"),
		},
		head:    map[string]any{"guestbook/deployment.yaml": deployment("guestbook-ui", "guestbook:0.2", "1")},
		targets: map[string]string{"guestbook": "argocd: a kustomization at main"},
		objects: map[string]map[string]drift.Action{"guestbook": {ref("Deployment", "guestbook-ui"): drift.ActionUpdate, ref("Service", "guestbook-ui"): drift.ActionUnchanged}},
		fields: map[string][]string{"guestbook": {ref("Deployment", "guestbook-ui") +
			` .spec.template.spec.containers[name="guestbook-ui"].image: "guestbook:0.1" → "guestbook:0.2"`}},
	}, {
		// argocd-example-apps' plain YAML apps: Argo CD reads the directory.
		name:        "Argo CD plain directory with recurse, include and exclude",
		reconcilers: argoApp("plain", "{repoURL: 'https://HOST/acme/gitops', path: plain, directory: {recurse: true, exclude: 'test/*'}}", ""),
		live: map[string]string{"argocd-controller": withMeta(inNS(service("ui")), "labels: {app.kubernetes.io/instance: plain}") + "---\n" +
			withMeta(inNS(service("api")), "labels: {app.kubernetes.io/instance: plain}")},
		base: map[string]any{
			"plain/ui.yaml":          service("ui"),
			"plain/backend/api.yaml": service("api"),
			"plain/test/smoke.yaml":  service("smoke"),
			"plain/README.md":        "# not a manifest\n",
		},
		head:    map[string]any{"plain/backend/worker.yaml": service("worker")},
		targets: map[string]string{"plain": "argocd: plain manifests at main (Argo CD reads the directory)"},
		objects: map[string]map[string]drift.Action{"plain": {
			ref("Service", "ui"): drift.ActionUnchanged, ref("Service", "api"): drift.ActionUnchanged, ref("Service", "worker"): drift.ActionCreate,
		}},
	}, {
		// A Secret's variable in an object's identity, in the forms envsubst
		// reads: a substring, uppercased, its length (lowercased, ${V,,},
		// cannot be in a name: kustomize, Flux's too, splits names on commas). The objects are shown
		// by their names as Git writes them; nothing of the value shows.
		name: "Flux postBuild: a Secret's variable in names shows nothing of its value",
		reconcilers: gitRepository + fluxKS("apps", "./apps", `  targetNamespace: NS
  postBuild:
    substituteFrom: [{kind: Secret, name: token}]
`) + `---
apiVersion: v1
kind: Secret
metadata: {name: token, namespace: NS}
stringData: {TOKEN: SeCrEtVaLuE-4242xyz}
`,
		base: map[string]any{"apps/keep.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keep}\ndata: {a: '1'}\n"},
		head: map[string]any{"apps/named.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: 'a-${TOKEN:0:6}'}\ndata: {a: '1'}\n---\n" +
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: 'upper-${TOKEN^^}'}\ndata: {a: '1'}\n---\n" +
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: 'len-${#TOKEN}'}\ndata: {a: '1'}\n"},
		objects: map[string]map[string]drift.Action{"apps": {
			"ConfigMap/NS/a-${TOKEN:0:6}": drift.ActionCreate, "ConfigMap/NS/upper-${TOKEN^^}": drift.ActionCreate,
			"ConfigMap/NS/len-${#TOKEN}": drift.ActionCreate, ref("ConfigMap", "keep"): drift.ActionCreate,
		}},
		never: []string{"SeCrEt", "SECRETVALUE", "len-19"},
	}, {
		// argocd-example-apps' sync-waves and helm-hooks (plain directories)
		// and pre-post-sync (kustomize): hooks, some with a generateName,
		// which kustomize refuses. Argo CD runs them at sync and never
		// compares or prunes them: a live hook carrying the instance label
		// is not a prune either.
		name: "Argo CD hooks are not compared, built or pruned",
		reconcilers: argoApp("waves", "{repoURL: 'https://HOST/acme/gitops', path: sync-waves}", "") +
			argoApp("prepost", "{repoURL: 'https://HOST/acme/gitops', path: pre-post-sync}", ""),
		live: map[string]string{"argocd-controller": withMeta(inNS(service("backend")), "labels: {app.kubernetes.io/instance: waves}") + "---\n" +
			inNS("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: upgrade-sql-x7k2p, labels: {app.kubernetes.io/instance: waves}, annotations: {argocd.argoproj.io/hook: PreSync}}\ndata: {a: '1'}\n") + "---\n" +
			withMeta(inNS(service("web")), "labels: {app.kubernetes.io/instance: prepost}")},
		base: map[string]any{
			"sync-waves/manifests.yaml": service("backend") + "---\n" +
				"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: upgrade-sql-\n  annotations: {argocd.argoproj.io/hook: PreSync}\ndata: {a: '1'}\n",
			"pre-post-sync/kustomization.yaml": "resources: [web.yaml, hooks.yaml]\n",
			"pre-post-sync/web.yaml":           service("web"),
			"pre-post-sync/hooks.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: before\n  annotations: {argocd.argoproj.io/hook: PreSync}\n---\n" +
				"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: helm-test\n  annotations: {helm.sh/hook: test}\n",
		},
		head: map[string]any{
			"sync-waves/frontend.yaml": service("frontend"),
			"pre-post-sync/web.yaml":   strings.Replace(service("web"), "port: 80,", "port: 8080,", 1),
		},
		targets: map[string]string{"sync-waves": "argocd: plain manifests at main (Argo CD reads the directory)", "pre-post-sync": "argocd: a kustomization at main"},
		objects: map[string]map[string]drift.Action{
			"sync-waves":    {ref("Service", "backend"): drift.ActionUnchanged, ref("Service", "frontend"): drift.ActionCreate},
			"pre-post-sync": {ref("Service", "web"): drift.ActionUpdate},
		},
		notes: map[string]string{
			"sync-waves":    "Argo CD runs hooks at sync instead of comparing them, so they are not compared here: ConfigMap upgrade-sql-*",
			"pre-post-sync": "so they are not compared here: ConfigMap before, ConfigMap helm-test",
		},
	}, {
		// argocd-example-apps: jsonnet and a plugin are listed as not
		// rendered, with the reason, when a pull request touches them.
		name: "Argo CD sources driftback does not render are listed with the reason",
		reconcilers: argoApp("jsonnet", "{repoURL: 'https://HOST/acme/gitops', path: jsonnet-guestbook}", "") +
			argoApp("plugin", "{repoURL: 'https://HOST/acme/gitops', path: plugin-app, plugin: {name: cdk8s}}", ""),
		base: map[string]any{
			"jsonnet-guestbook/guestbook-ui.jsonnet": "{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'j' } }\n",
			"plugin-app/main.ts":                     "// cdk8s\n",
		},
		head: map[string]any{
			"jsonnet-guestbook/guestbook-ui.jsonnet": "{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'k' } }\n",
			"plugin-app/main.ts":                     "// cdk8s v2\n",
		},
		targets: map[string]string{"jsonnet-guestbook": "argocd: jsonnet at main"},
		notRendered: map[string]string{
			"Application NS/jsonnet": "Argo CD evaluates jsonnet (jsonnet-guestbook/guestbook-ui.jsonnet)",
			"Application NS/plugin":  "config management plugin",
		},
	}, {
		// argocd-example-apps' helm-guestbook: a chart found by its
		// Chart.yaml, with a helm: block (releaseName, a value file, a
		// parameter), rendered as the repo-server runs helm template; its
		// hook is Argo CD's, not compared.
		name: "Argo CD Helm chart in the repository, with its helm: options",
		reconcilers: argoApp("guestbook", "{repoURL: 'https://HOST/acme/gitops', path: helm-guestbook, helm: {releaseName: gb, valueFiles: [values-production.yaml], "+
			"parameters: [{name: service.port, value: '8080'}, {name: image.tag, value: '0.2', forceString: true}]}}", ""),
		live: map[string]string{"argocd-controller": withMeta(inNS(deployment("gb-guestbook", "guestbook:0.2", "2")), "labels: {app.kubernetes.io/instance: guestbook}") + "---\n" +
			withMeta(inNS(strings.Replace(service("gb-guestbook"), "port: 80,", "port: 8080,", 1)), "labels: {app.kubernetes.io/instance: guestbook}")},
		base: map[string]any{
			"helm-guestbook/Chart.yaml":                "apiVersion: v2\nname: guestbook\nversion: 0.1.0\n",
			"helm-guestbook/values.yaml":               "replicaCount: 1\nimage: {repository: guestbook, tag: '0.1'}\nservice: {port: 80}\n",
			"helm-guestbook/values-production.yaml":    "replicaCount: 2\n",
			"helm-guestbook/templates/deployment.yaml": deployment("{{ .Release.Name }}-guestbook", "{{ .Values.image.repository }}:{{ .Values.image.tag }}", "{{ .Values.replicaCount }}"),
			"helm-guestbook/templates/service.yaml":    strings.Replace(service("{{ .Release.Name }}-guestbook"), "port: 80,", "port: {{ .Values.service.port }},", 1),
			"helm-guestbook/templates/migrate.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: '{{ .Release.Name }}-migrate'\n  annotations: {helm.sh/hook: pre-upgrade}\n",
		},
		head:    map[string]any{"helm-guestbook/values-production.yaml": "replicaCount: 3\n"},
		targets: map[string]string{"helm-guestbook": "argocd: a Helm chart at main"},
		objects: map[string]map[string]drift.Action{"helm-guestbook": {
			ref("Deployment", "gb-guestbook"): drift.ActionUpdate, ref("Service", "gb-guestbook"): drift.ActionUnchanged,
		}},
		fields: map[string][]string{"helm-guestbook": {ref("Deployment", "gb-guestbook") + " .spec.replicas: 2 → 3"}},
		notes:  map[string]string{"helm-guestbook": "so they are not compared here: ConfigMap gb-migrate"},
	}, {
		// flux bootstrap's clusters/<name> and Argo CD's path ".": the
		// repository root ('.' doesn't exist).
		name:        "a kustomization at the repository root, as Flux writes it (./)",
		reconcilers: gitRepository + fluxKS("root", "./", ""),
		live:        map[string]string{"kustomize-controller": withMeta(inNS(service("root")), fluxLabels("root"))},
		base: map[string]any{
			"kustomization.yaml": "namespace: NS\nresources: [service.yaml]\n",
			"service.yaml":       service("root"),
		},
		head:    map[string]any{"service.yaml": strings.Replace(service("root"), "port: 80", "port: 8080", 1)},
		targets: map[string]string{".": "flux: a kustomization at main"},
		objects: map[string]map[string]drift.Action{".": {ref("Service", "root"): drift.ActionUpdate}},
	}, {
		name:        "a kustomization at the repository root, as Argo CD writes it (.)",
		reconcilers: argoApp("root", "{repoURL: 'https://HOST/acme/gitops', path: .}", ""),
		live:        map[string]string{"argocd-controller": withMeta(inNS(service("root")), "labels: {app.kubernetes.io/instance: root}")},
		base: map[string]any{
			"kustomization.yaml": "resources: [service.yaml]\n",
			"service.yaml":       service("root"),
		},
		head:    map[string]any{"service.yaml": strings.Replace(service("root"), "port: 80", "port: 8080", 1)},
		targets: map[string]string{".": "argocd: a kustomization at main"},
		objects: map[string]map[string]drift.Action{".": {ref("Service", "root"): drift.ActionUpdate}},
	}, {
		// Environment branches: a GitRepository on ref.branch production. The
		// scope came from main, which does not render the target's path.
		name: "a target on a branch other than the default: scope from that branch",
		reconcilers: strings.Replace(gitRepository, "branch: main", "branch: production", 1) +
			fluxKS("apps", "./apps", ""),
		live:      map[string]string{"kustomize-controller": withMeta(inNS(deployment("api", "api:7", "3")), fluxLabels("apps"))},
		branch:    "production",
		mainFiles: map[string]any{"README.md": "environments live on their branches\n", "apps/kustomization.yaml": nil, "apps/api.yaml": nil},
		base: map[string]any{
			"apps/kustomization.yaml": "namespace: NS\nresources: [api.yaml]\n",
			"apps/api.yaml":           deployment("api", "api:7", "3"),
		},
		head:    map[string]any{"apps/api.yaml": deployment("api", "api:8", "3")},
		objects: map[string]map[string]drift.Action{"apps": {ref("Deployment", "api"): drift.ActionUpdate}},
		fields:  map[string][]string{"apps": {ref("Deployment", "api") + ` .spec.template.spec.containers[name="api"].image: "api:7" → "api:8"`}},
	}, {
		// One target that does not render does not take the others down:
		// its check fails with the cause and a row says it was not compared.
		name:        "one target's failure is that target's",
		reconcilers: gitRepository + fluxKS("good", "./good", "") + fluxKS("broken", "./broken", ""),
		live:        map[string]string{"kustomize-controller": withMeta(inNS(service("good")), fluxLabels("good"))},
		base: map[string]any{
			"good/kustomization.yaml":   "namespace: NS\nresources: [service.yaml]\n",
			"good/service.yaml":         service("good"),
			"broken/kustomization.yaml": "namespace: NS\nresources: [service.yaml]\n",
			"broken/service.yaml":       service("broken"),
		},
		head: map[string]any{
			"good/service.yaml":         strings.Replace(service("good"), "port: 80", "port: 81", 1),
			"broken/kustomization.yaml": "namespace: NS\nresources: [service.yaml, missing.yaml]\n",
		},
		objects:     map[string]map[string]drift.Action{"good": {ref("Service", "good"): drift.ActionUpdate}, "broken": {}},
		notCompared: map[string]string{"broken": "it does not render"},
		checks:      map[string]string{"broken": "failure"},
		aggregate:   "failure",
	}, {
		// flux2-monitoring-example: a plain directory holding only
		// subdirectories with kustomizations, which Flux's generator lists.
		name:        "Flux plain directory of nested kustomizations",
		reconcilers: gitRepository + fluxKS("controllers", "./monitoring/controllers", ""),
		live: map[string]string{"kustomize-controller": withMeta(inNS(service("prometheus")), fluxLabels("controllers")) + "---\n" +
			withMeta(inNS(service("grafana")), fluxLabels("controllers"))},
		base: map[string]any{
			"monitoring/controllers/prometheus/kustomization.yaml": "namespace: NS\nresources: [service.yaml]\n",
			"monitoring/controllers/prometheus/service.yaml":       service("prometheus"),
			"monitoring/controllers/grafana/kustomization.yaml":    "namespace: NS\nresources: [service.yaml]\n",
			"monitoring/controllers/grafana/service.yaml":          service("grafana"),
		},
		head:    map[string]any{"monitoring/controllers/grafana/service.yaml": strings.Replace(service("grafana"), "port: 80", "port: 3000", 1)},
		targets: map[string]string{"monitoring/controllers": "flux: plain manifests at main (Flux generates the kustomization)"},
		codify:  map[string]string{"monitoring/controllers": "manual"},
		objects: map[string]map[string]drift.Action{"monitoring/controllers": {
			ref("Service", "prometheus"): drift.ActionUnchanged, ref("Service", "grafana"): drift.ActionUpdate,
		}},
	}, {
		// A substituteFrom that is not optional and not there: Flux fails the
		// reconcile; driftback says the variables were not substituted.
		name: "Flux substituteFrom a ConfigMap that is missing, optional and not",
		reconcilers: gitRepository + fluxKS("vars", "./vars", `  targetNamespace: NS
  postBuild:
    substituteFrom:
    - {kind: ConfigMap, name: absent-optional, optional: true}
    - {kind: ConfigMap, name: absent-required}
`),
		live: map[string]string{"kustomize-controller": withMeta(inNS("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {env: '${ENV:=dev}'}\n"), fluxLabels("vars"))},
		base: map[string]any{"vars/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {env: '${ENV:=dev}'}\n"},
		head: map[string]any{"vars/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {env: '${ENV:=dev}', tier: web}\n"},
		// kustomize-controller fails the whole build: a sync-fails danger on
		// the Kustomization, with its message, and nothing else applied.
		objects: map[string]map[string]drift.Action{"vars": {ref("Kustomization", "vars"): drift.ActionUnchanged}},
		notes:   map[string]string{"vars": `postBuild variables are not substituted: substitute from 'ConfigMap/absent-required' error`},
	}, {
		// flux2-hub-spoke-example: targetNamespace with patches; a
		// component; the source in another namespace, named with it.
		name: "Flux targetNamespace with patches and components, the source in another namespace",
		reconcilers: strings.Replace(gitRepository, "namespace: NS}", "namespace: SRCNS}", 1) + strings.Replace(fluxKS("apps", "./apps/production", `  targetNamespace: NS
  components: [../../components/monitoring]
  patches:
  - target: {kind: Deployment, name: podinfo}
    patch: |
      - {op: replace, path: /spec/replicas, value: 3}
`), "name: fleet}", "name: fleet, namespace: SRCNS}", 1),
		live: map[string]string{"kustomize-controller": withMeta(inNS(strings.Replace(deployment("podinfo", "podinfo:6.5.4", "3"),
			"metadata: {name: podinfo}", "metadata: {name: podinfo, annotations: {prometheus.io/scrape: 'true'}}", 1)), fluxLabels("apps"))},
		base: map[string]any{
			"apps/base/kustomization.yaml":             "resources: [podinfo.yaml]\n",
			"apps/base/podinfo.yaml":                   deployment("podinfo", "podinfo:6.5.4", "1"),
			"apps/production/kustomization.yaml":       "resources: [../base]\n",
			"components/monitoring/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncommonAnnotations: {prometheus.io/scrape: 'true'}\n",
		},
		head:    map[string]any{"apps/base/podinfo.yaml": deployment("podinfo", "podinfo:6.6.0", "1")},
		targets: map[string]string{"apps/production": "flux: a kustomization at main"},
		objects: map[string]map[string]drift.Action{"apps/production": {ref("Deployment", "podinfo"): drift.ActionUpdate}},
		fields: map[string][]string{"apps/production": {ref("Deployment", "podinfo") +
			` .spec.template.spec.containers[name="podinfo"].image: "podinfo:6.5.4" → "podinfo:6.6.0"`}},
	}, {
		// Sources a pull request cannot change, and a cluster driftback does
		// not reach: listed, with the reason, never silently skipped.
		name: "Flux sources that are not rendered: tags, semver, commits, OCI, buckets, ExternalArtifacts, remote clusters",
		reconcilers: `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: tagged, namespace: NS}
spec: {interval: 1m, url: 'https://HOST/acme/gitops', ref: {tag: v1.2.0}}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: ranged, namespace: NS}
spec: {interval: 1m, url: 'https://HOST/acme/gitops', ref: {semver: '>=1.0.0'}}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: pinned, namespace: NS}
spec: {interval: 1m, url: 'https://HOST/acme/gitops', ref: {commit: 0123456789abcdef0123456789abcdef01234567}}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: manifests, namespace: NS}
spec: {interval: 1m, url: 'oci://ghcr.io/acme/manifests', ref: {tag: latest}}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: Bucket
metadata: {name: artifacts, namespace: NS}
spec: {interval: 1m, bucketName: artifacts, endpoint: minio.example.com}
` + gitRepository +
			strings.Replace(fluxKS("tagged", "./apps", ""), "name: fleet}", "name: tagged}", 1) +
			strings.Replace(fluxKS("ranged", "./apps", ""), "name: fleet}", "name: ranged}", 1) +
			strings.Replace(fluxKS("pinned", "./apps", ""), "name: fleet}", "name: pinned}", 1) +
			strings.Replace(fluxKS("oci", "./", ""), "{kind: GitRepository, name: fleet}", "{kind: OCIRepository, name: manifests}", 1) +
			strings.Replace(fluxKS("bucket", "./", ""), "{kind: GitRepository, name: fleet}", "{kind: Bucket, name: artifacts}", 1) +
			strings.Replace(fluxKS("generated", "./", ""), "{kind: GitRepository, name: fleet}", "{kind: ExternalArtifact, name: podinfo}", 1) +
			fluxKS("remote", "./apps", "  kubeConfig: {secretRef: {name: spoke-kubeconfig}}\n"),
		base:       map[string]any{"apps/kustomization.yaml": "resources: []\n"},
		head:       map[string]any{"apps/kustomization.yaml": "resources: []\n# changed\n"},
		discovered: 4,
		notRendered: map[string]string{
			"Kustomization NS/tagged": "pinned to tag v1.2.0", "Kustomization NS/ranged": "follows tags matching >=1.0.0",
			"Kustomization NS/pinned": "pinned to commit", "Kustomization NS/remote": "remote cluster through the kubeconfig in Secret spoke-kubeconfig",
		},
		listed: map[string]string{
			"Kustomization NS/oci": "OCI artifact (OCIRepository NS/manifests)", "Kustomization NS/bucket": "a bucket (Bucket NS/artifacts)",
			"Kustomization NS/generated": "its source is ExternalArtifact NS/podinfo, not a Git repository", "Kustomization NS/tagged": "pinned to tag",
		},
	}, {
		// An Application that heals itself: its drift is reverted by Argo CD,
		// never proposed; one with several sources is listed, not guessed.
		name: "Argo CD self-heal and multi-source Applications",
		reconcilers: strings.Replace(argoApp("healing", "{repoURL: 'https://HOST/acme/gitops', path: healing}", ""), "automated: {prune: true}", "automated: {prune: true, selfHeal: true}", 1) +
			strings.Replace(argoApp("multi", "{repoURL: 'https://HOST/acme/gitops', path: multi}", ""),
				"  source: {repoURL: 'https://HOST/acme/gitops', path: multi}", "  sources: [{repoURL: 'https://HOST/acme/gitops', path: multi}, {repoURL: 'https://HOST/acme/values', ref: values}]", 1),
		live:       map[string]string{"argocd-controller": withMeta(inNS(service("healing")), "labels: {app.kubernetes.io/instance: healing}")},
		base:       map[string]any{"healing/kustomization.yaml": "resources: [service.yaml]\n", "healing/service.yaml": service("healing")},
		head:       map[string]any{"healing/service.yaml": strings.Replace(service("healing"), "port: 80", "port: 81", 1)},
		objects:    map[string]map[string]drift.Action{"healing": {ref("Service", "healing"): drift.ActionUpdate}},
		codify:     map[string]string{"healing": "off (the reconciler self-heals)"},
		discovered: 1,
		listed:     map[string]string{"Application NS/multi": "it has 2 sources"},
	}, {
		// argocd-example-apps' app of apps: Applications rendered from Git by
		// a root Application, and each discovered in its turn.
		name: "Argo CD app of apps: the children are objects of the root's render, and targets of their own",
		reconcilers: argoApp("app-of-apps", "{repoURL: 'https://HOST/acme/gitops', path: apps}", "") +
			argoApp("child-guestbook", "{repoURL: 'https://HOST/acme/gitops', path: guestbook}", ""),
		live: map[string]string{"argocd-controller": withMeta(inNS(service("guestbook-ui")), "labels: {app.kubernetes.io/instance: child-guestbook}")},
		base: map[string]any{
			"apps/guestbook.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: child-guestbook, namespace: NS}\nspec:\n  project: default\n" +
				"  source: {repoURL: 'https://HOST/acme/gitops', path: guestbook}\n  destination: {server: 'https://kubernetes.default.svc', namespace: NS}\n  syncPolicy: {automated: {prune: true}}\n",
			"guestbook/kustomization.yaml": "resources: [service.yaml]\n",
			"guestbook/service.yaml":       service("guestbook-ui"),
		},
		head: map[string]any{
			"apps/guestbook.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: child-guestbook, namespace: NS}\nspec:\n  project: default\n" +
				"  source: {repoURL: 'https://HOST/acme/gitops', path: guestbook}\n  destination: {server: 'https://kubernetes.default.svc', namespace: NS}\n  syncPolicy: {automated: {prune: true, selfHeal: true}}\n",
			"guestbook/service.yaml": strings.Replace(service("guestbook-ui"), "port: 80", "port: 8080", 1),
		},
		targets: map[string]string{"apps": "argocd: plain manifests at main (Argo CD reads the directory)", "guestbook": "argocd: a kustomization at main"},
		objects: map[string]map[string]drift.Action{
			"apps":      {ref("Application", "child-guestbook"): drift.ActionUpdate},
			"guestbook": {ref("Service", "guestbook-ui"): drift.ActionUpdate},
		},
		fields: map[string][]string{"apps": {ref("Application", "child-guestbook") + " .spec.syncPolicy.automated.selfHeal: (absent) → true"}},
	}}
}

// TestConformance runs every shape, side by side on one apiserver: Argo CD
// Application names are unique across the cases, as they are within one
// Argo CD, since label tracking finds an application's objects cluster-wide.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, c := range conformanceCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runShape(t, c)
		})
	}
}

func runShape(t *testing.T, c shape) {
	w := newWorld(t, func(cfg *config.Config) {
		cfg.Targets = nil
		cl := cfg.Clusters["test"]
		cl.Discover = &config.Discover{Flux: true, ArgoCD: true}
		cfg.Clusters["test"] = cl
	})
	ns := w.env.Namespace
	// SRCNS is a second namespace, for sources named across namespaces.
	srcNS := ns + "-src"
	if _, err := w.env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: srcNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.cfg.Clusters["test"].Discover.Namespaces = []string{ns, srcNS}
	// The operator names the repository the reconcilers follow: their
	// targets are written to and decide the required check.
	w.cfg.Clusters["test"].Discover.Repositories = map[string][]string{ns: {fullName}, srcNS: {fullName}}
	w.cfg.Clusters["test"].Discover.ArgoCDNamespace = ns
	kubetest.InstallCRDs(t, w.env, kubetest.ReconcilerCRDs(t)...)
	kubetest.ArgoCDDefaultProject(t, w.env, ns)
	w.logs.secret("conformance-canary-7731")
	for _, s := range c.never {
		w.logs.secret(s) // no log line may hold them either
	}
	host, _, _ := strings.Cut(string(discover.HostOf(w.gh.URL())), ":")
	subst := func(y string) string { return strings.NewReplacer("SRCNS", srcNS, "NS", ns, "HOST", host).Replace(y) }
	applyStream := func(manager, stream string) {
		for _, doc := range strings.Split(subst(stream), "\n---\n") {
			if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" {
				continue
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatalf("%v:\n%s", err, doc)
			}
			kubetest.Apply(t, w.env.Config, manager, u)
		}
	}
	applyStream("kubectl", c.reconcilers)
	managers := make([]string, 0, len(c.live))
	for m := range c.live {
		managers = append(managers, m)
	}
	sort.Strings(managers)
	for _, m := range managers {
		applyStream(m, c.live[m])
	}

	compared := w.captureComparisons()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.srv.App.targets.Run(ctx)

	files := map[string]any{}
	for k, v := range c.base {
		files[k] = subst(v.(string))
	}
	base := w.commit(plumbing.ZeroHash, files)
	changes := map[string]any{}
	for k, v := range c.head {
		if v == nil {
			changes[k] = nil
			continue
		}
		changes[k] = subst(v.(string))
	}
	head := w.commit(base, changes)
	branch := c.branch
	refs := map[string]plumbing.Hash{"refs/pull/1/head": head}
	if branch == "" {
		branch = "main"
		refs["refs/heads/main"] = base
	} else {
		refs["refs/heads/main"] = w.commit(base, c.mainFiles)
		refs["refs/heads/"+branch] = base
	}
	w.push(refs)
	w.gh.SetPull(fullName, githubfake.Pull{Number: 1, Title: c.name, User: "dev", HeadSHA: head.String(), HeadRef: "change",
		BaseSHA: base.String(), BaseRef: branch})

	// Discovery has read every reconciler object.
	want := c.discovered
	for _, doc := range strings.Split(c.reconcilers, "\n---\n") {
		if c.discovered == 0 && (strings.Contains(doc, "kind: Kustomization\n") || strings.Contains(doc, "kind: Application\n")) {
			want++
		}
	}
	eventually(t, func() bool {
		ts, skipped := w.srv.App.targetsOf(fullName)
		return len(ts)+len(skipped) == want
	}, fmt.Sprintf("%d reconciler objects to be discovered", want))

	if code := w.deliver("pull_request", "d-conformance", prPayload("opened", 1, head.String())); code != http.StatusAccepted {
		t.Fatalf("delivery: %d", code)
	}
	eventually(t, func() bool { rep, _ := compared(); return rep != nil }, "the pull request to be compared")
	w.waitIdle()
	rep, checks := compared()
	body := ""
	if cs := w.gh.Comments(fullName, 1); len(cs) > 0 {
		body = cs[0].Body
	}
	if strings.Contains(body, "internal error") || strings.Contains(fmt.Sprint(rep.Errors), "internal error") {
		t.Errorf("an internal error reached the pull request:\n%s", body)
	}
	if len(c.never) > 0 {
		js, _ := jsonreport.Marshal(rep)
		everything := body + "\n" + string(js)
		for _, r := range w.gh.CheckRuns(fullName, head.String()) {
			everything += "\n" + r.Title + "\n" + r.Summary + "\n" + r.Text
		}
		for _, s := range c.never {
			if strings.Contains(everything, subst(s)) {
				t.Errorf("the pull request shows %q:\n%s", subst(s), everything)
			}
		}
	}
	byPath := map[string]drift.Target{}
	for _, tg := range rep.Targets {
		byPath[tg.Path] = tg
	}
	for path, objs := range c.objects {
		tg, ok := byPath[path]
		if !ok {
			t.Errorf("%s: not compared at all; targets %v", path, keys(byPath))
			continue
		}
		if tg.NotCompared == "" && len(tg.Errors) > 0 {
			t.Errorf("%s: errors %v", path, tg.Errors)
		}
		if tg.LiveError != "" {
			t.Errorf("%s: the cluster was not read: %s", path, tg.LiveError)
		}
		if len(tg.OutOfScope) > 0 {
			t.Errorf("%s: outside its scope: %+v", path, tg.OutOfScope)
		}
		got := map[string]drift.Action{}
		for _, ch := range tg.Told() {
			got[refName(ch)] = ch.Action
		}
		wantObjs := map[string]drift.Action{}
		for k, v := range objs {
			wantObjs[subst(k)] = v
		}
		if fmt.Sprint(got) != fmt.Sprint(wantObjs) {
			t.Errorf("%s: what merging does:\n got %v\nwant %v\n%s", path, got, wantObjs, fieldsOf(tg))
		}
	}
	for path, fields := range c.fields {
		have := fieldsOf(byPath[path])
		for _, f := range fields {
			if !strings.Contains(have, subst(f)+"\n") {
				t.Errorf("%s: no field %q among:\n%s", path, subst(f), have)
			}
		}
	}
	for path, note := range c.notes {
		if n := strings.Join(byPath[path].Notes, "\n"); !strings.Contains(n, note) {
			t.Errorf("%s: notes %q, want one saying %q", path, n, note)
		}
	}
	for path, why := range c.notCompared {
		if tg := byPath[path]; !strings.Contains(tg.NotCompared, why) {
			t.Errorf("%s: not compared %q, want %q", path, tg.NotCompared, why)
		}
	}
	notRendered := map[string]string{}
	for _, n := range rep.NotRendered {
		notRendered[n.Source] = n.Reason
	}
	for src, why := range c.notRendered {
		if got, ok := notRendered[subst(src)]; !ok || !strings.Contains(got, subst(why)) {
			t.Errorf("not rendered %s: %q, want %q (all: %v)", subst(src), got, why, notRendered)
		}
	}
	if len(notRendered) != len(c.notRendered) {
		t.Errorf("not rendered: %v, want %d", notRendered, len(c.notRendered))
	}
	for _, ch := range checks {
		if ch.Unaffected {
			continue
		}
		path := ""
		for p, tg := range byPath {
			if "driftback / "+tg.Name == ch.Name {
				path = p
			}
		}
		want := c.checks[path]
		if want == "" {
			want = "success"
		}
		if ch.Conclusion != want {
			t.Errorf("check %s: %s %q, want %s", ch.Name, ch.Conclusion, ch.Title, want)
		}
	}
	agg := c.aggregate
	if agg == "" {
		agg = "success"
	}
	if len(c.objects) > 0 {
		wantAggregate(t, w.gh.CheckRuns(fullName, head.String()), agg)
	}

	// What `driftback targets` says, read from the repository the pull
	// request brought into the cache.
	list, err := ListTargets(ctx, w.cfg)
	if err != nil {
		t.Fatal(err)
	}
	sources, codify := map[string]string{}, map[string]string{}
	for _, tg := range list.Targets {
		sources[tg.Path], codify[tg.Path] = tg.Build+": "+tg.Source, tg.Codify
	}
	for path, want := range c.targets {
		if !strings.HasPrefix(sources[path], want) {
			t.Errorf("targets: %s: %q, want %q", path, sources[path], want)
		}
	}
	for path, want := range c.codify {
		if codify[path] != want {
			t.Errorf("targets: %s codify %q, want %q", path, codify[path], want)
		}
	}
	listed := map[string]string{}
	for _, n := range list.NotRendered {
		listed[n.Source] = n.Reason
	}
	for src, why := range c.listed {
		if got := listed[subst(src)]; !strings.Contains(got, subst(why)) {
			t.Errorf("targets: not rendered %s: %q, want %q (all: %v)", subst(src), got, subst(why), listed)
		}
	}
}

// captureComparisons records what the pull-request flow decides, before it
// publishes; the function returns the last report and checks (nil before).
func (w *world) captureComparisons() func() (*drift.Report, []review.CheckResult) {
	var mu sync.Mutex
	var rep *drift.Report
	var checks []review.CheckResult
	w.srv.App.compared = func(_ int, r *drift.Report, cs []review.CheckResult) {
		mu.Lock()
		defer mu.Unlock()
		rep, checks = r, cs
	}
	return func() (*drift.Report, []review.CheckResult) {
		mu.Lock()
		defer mu.Unlock()
		return rep, checks
	}
}

// refName is a change's object as the cases name it.
func refName(ch drift.Change) string {
	if ch.Namespace == "" {
		return ch.Kind + "/" + ch.Name
	}
	return ch.Kind + "/" + ch.Namespace + "/" + ch.Name
}

// fieldsOf lists a target's field changes, one a line, as the cases write
// them: "Kind/ns/name .path: live → desired".
func fieldsOf(tg drift.Target) string {
	var b strings.Builder
	for _, ch := range tg.Told() {
		for _, f := range ch.Fields {
			fmt.Fprintf(&b, "%s %s: %s → %s\n", refName(ch), f.Path, jsonText(f.Live), jsonText(f.Desired))
		}
	}
	return b.String()
}

func jsonText(v any) string {
	if v == nil {
		return "(absent)"
	}
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
