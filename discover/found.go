// Package discover reads the GitOps reconcilers of a cluster — Flux
// Kustomizations with their GitRepository sources and Argo CD Applications —
// and says which targets they imply: the repository, path and branch each one
// applies, to which cluster, how it tracks and prunes, whether it is
// suspended, and what driftback cannot render. It only reads the cluster.
package discover

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/reconcile/prepare"
	"github.com/driftback/driftback/render"
)

// Reconciler is the controller a Found object belongs to.
type Reconciler string

// Reconcilers.
const (
	ReconcilerFlux   Reconciler = "flux"
	ReconcilerArgoCD Reconciler = "argocd"
)

// Found is one reconciler object and the target it implies.
type Found struct {
	Reconciler Reconciler `json:"reconciler"`
	// EnableHelm says the reconciler inflates the kustomizations'
	// helmCharts (Argo CD with --enable-helm in kustomize.buildOptions).
	EnableHelm bool `json:"enableHelm,omitempty"`
	// Object is "Kustomization flux-system/apps" or "Application argocd/shop".
	Object    string `json:"object"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// On is the cluster the object was read from.
	On string `json:"on"`
	// Repo is owner/name on the configured GitHub host; empty when the
	// source is elsewhere (NotRendered says so).
	Repo string `json:"repo,omitempty"`
	// Path is the directory the reconciler builds, relative to the
	// repository root, without "./" ("." for the root).
	Path string `json:"path,omitempty"`
	// Branch is the branch the reconciler follows; empty for the
	// repository's default branch.
	Branch string `json:"branch,omitempty"`
	// Cluster is the cluster the reconciler applies to, a key of app.yml's
	// clusters; empty when it is not one of them.
	Cluster string `json:"cluster,omitempty"`
	// Prune says the reconciler deletes what leaves Git.
	Prune bool `json:"prune"`
	// ServiceAccount is the account a Flux Kustomization applies as
	// (spec.serviceAccountName, in its namespace): what it may not patch is
	// never applied.
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// Tracking finds the live objects the reconciler owns.
	Tracking drift.Tracking `json:"tracking"`
	// Suspended says why merging changes nothing until someone acts
	// (Flux spec.suspend; an Argo CD Application without automated sync).
	Suspended string `json:"suspended,omitempty"`
	// Interval is how often the reconciler applies Git again (Flux
	// spec.interval); zero when it does not say.
	Interval time.Duration `json:"interval,omitempty"`
	// SelfHeal says the reconciler reverts live changes as soon as it sees
	// them (Argo CD selfHeal).
	SelfHeal bool `json:"selfHeal,omitempty"`
	// Ignore are the reconciler's own ignore rules (Argo CD ignoreDifferences).
	Ignore []object.IgnoreRule `json:"ignore,omitempty"`
	// Notes say what was read but cannot be honoured (an ignore rule in a
	// form driftback does not evaluate, a remote cluster).
	Notes []string `json:"notes,omitempty"`
	// NotRendered says why driftback cannot render this source (a Helm
	// chart, an OCI artifact, several sources); empty when it can.
	NotRendered string `json:"notRendered,omitempty"`
	// LenientSubstitution says an unset postBuild variable becomes empty
	// rather than failing the build.
	LenientSubstitution bool `json:"lenientSubstitution,omitempty"`
	// Flux is the Kustomization itself, which its build (patches, images,
	// targetNamespace, …) and substitution read; nil for Argo CD.
	Flux *unstructured.Unstructured `json:"-"`
	// DestinationNamespace is where an Argo CD Application puts namespaced objects that
	// name none (spec.destination.namespace).
	DestinationNamespace string `json:"destinationNamespace,omitempty"`
	// Application is the Argo CD Application itself, whose kustomize
	// options its build reads; nil for Flux.
	Application *unstructured.Unstructured `json:"-"`
	// Kustomize is an Argo CD Application's kustomize options; nil when it
	// has none or for Flux.
	Kustomize *ArgoKustomize `json:"kustomize,omitempty"`
	// Directory is an Argo CD Application's directory options
	// (spec.source.directory); nil when it has none or for Flux. Argo CD
	// reads a path without a kustomization or a chart as a directory
	// either way.
	Directory *prepare.ArgoCDDirectory `json:"directory,omitempty"`
	// Helm is an Argo CD Application's Helm options (spec.source.helm);
	// nil when it has none or for Flux. A path with a Chart.yaml is a Helm
	// source either way.
	Helm *ArgoHelm `json:"helm,omitempty"`
}

// ArgoHelm are the Helm options of an Argo CD Application source
// (spec.source.helm), as its repo-server passes them to helm template.
type ArgoHelm struct {
	// ReleaseName is the release's name (default: the Application's).
	ReleaseName string `json:"releaseName,omitempty"`
	// ValueFiles are values files, from the chart's directory, in order.
	ValueFiles []string `json:"valueFiles,omitempty"`
	// Values is a values document; ValuesObject, when set, replaces it.
	Values       string         `json:"values,omitempty"`
	ValuesObject map[string]any `json:"valuesObject,omitempty"`
	// Parameters are --set (--set-string with forceString) values.
	Parameters []ArgoHelmParameter `json:"parameters,omitempty"`
	// FileParameters are --set-file values.
	FileParameters []ArgoHelmParameter `json:"fileParameters,omitempty"`
	// Namespace, KubeVersion and APIVersions replace the destination's.
	Namespace   string   `json:"namespace,omitempty"`
	KubeVersion string   `json:"kubeVersion,omitempty"`
	APIVersions []string `json:"apiVersions,omitempty"`
	// SkipCrds leaves the chart's crds/ out; SkipSchemaValidation does not
	// check values against values.schema.json; IgnoreMissingValueFiles
	// passes over value files that are not there.
	SkipCrds                bool `json:"skipCrds,omitempty"`
	SkipSchemaValidation    bool `json:"skipSchemaValidation,omitempty"`
	IgnoreMissingValueFiles bool `json:"ignoreMissingValueFiles,omitempty"`
}

// ArgoHelmParameter is a Helm parameter of an Argo CD Application.
type ArgoHelmParameter struct {
	Name        string `json:"name"`
	Value       string `json:"value,omitempty"`
	Path        string `json:"path,omitempty"`
	ForceString bool   `json:"forceString,omitempty"`
}

// Key identifies the target a Found object implies: repository, path and
// cluster, as app.yml targets are matched.
func (f *Found) Key() string {
	return TargetKey(f.Repo, f.Path, f.Cluster)
}

// TargetKey is the identity discovered and configured targets are merged by.
func TargetKey(repo, p, cluster string) string {
	return strings.ToLower(repo) + "\x00" + render.CleanPath(p) + "\x00" + cluster
}

// ArgoKustomize are the kustomize options of an Argo CD Application source
// (spec.source.kustomize), which Argo CD applies to the path's
// kustomization before it builds.
type ArgoKustomize struct {
	NamePrefix        string            `json:"namePrefix,omitempty"`
	NameSuffix        string            `json:"nameSuffix,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	Images            []string          `json:"images,omitempty"`
	CommonLabels      map[string]string `json:"commonLabels,omitempty"`
	CommonAnnotations map[string]string `json:"commonAnnotations,omitempty"`
	// ForceCommonLabels and ForceCommonAnnotations let the options replace
	// labels and annotations the kustomization already sets.
	ForceCommonLabels      bool           `json:"forceCommonLabels,omitempty"`
	ForceCommonAnnotations bool           `json:"forceCommonAnnotations,omitempty"`
	Replicas               []ArgoReplicas `json:"replicas,omitempty"`
	// Patches are kustomize patches, each as its JSON object.
	Patches    []map[string]any `json:"patches,omitempty"`
	Components []string         `json:"components,omitempty"`
}

// ArgoReplicas sets a workload's replicas by name.
type ArgoReplicas struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// Sort orders found objects by cluster, then object.
func Sort(fs []*Found) {
	sort.Slice(fs, func(i, j int) bool {
		if fs[i].On != fs[j].On {
			return fs[i].On < fs[j].On
		}
		return fs[i].Object < fs[j].Object
	})
}

// Host is the GitHub host repositories are matched against: "github.com",
// or a GitHub Enterprise Server host.
type Host string

// HostOf derives the Git host from a REST API base: https://api.github.com/
// is github.com, https://HOST/api/v3/ is HOST.
func HostOf(apiURL string) Host {
	u := strings.TrimSpace(apiURL)
	if u == "" {
		return "github.com"
	}
	u = strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://")
	host, _, _ := strings.Cut(u, "/")
	host = strings.ToLower(host)
	if host == "api.github.com" {
		return "github.com"
	}
	return Host(strings.TrimPrefix(host, "api."))
}

// RepoOf returns owner/name for a Git URL on host h, in any of the forms
// reconcilers accept: https://h/owner/name(.git), ssh://git@h(:port)/owner/name,
// git@h:owner/name; ok is false for another host or another shape.
func RepoOf(raw string, h Host) (repo string, ok bool) {
	u := strings.TrimSpace(raw)
	var host, rest string
	switch {
	case strings.HasPrefix(u, "https://"), strings.HasPrefix(u, "http://"), strings.HasPrefix(u, "ssh://"):
		// Parsed as the fetchers parse it: a host hidden behind "?x@" or
		// "#@" is the host they reach.
		p, err := url.Parse(u)
		if err != nil || p.RawQuery != "" || p.Fragment != "" || p.Opaque != "" {
			return "", false
		}
		host, rest = p.Hostname(), strings.TrimPrefix(p.Path, "/")
	case strings.Contains(u, "@") && strings.Contains(u, ":") && !strings.Contains(u, "://"):
		// scp-like: git@host:owner/name
		at := strings.Index(u, "@")
		host, rest, _ = strings.Cut(u[at+1:], ":")
		if strings.ContainsAny(host, "/?#@") {
			return "", false
		}
	default:
		return "", false
	}
	want, _, _ := strings.Cut(string(h), ":") // a Git URL's port is not the API's
	if !strings.EqualFold(host, want) && !(h == "github.com" && strings.EqualFold(host, "www.github.com")) {
		return "", false
	}
	rest = strings.TrimSuffix(strings.TrimSuffix(rest, "/"), ".git")
	owner, name, found := strings.Cut(rest, "/")
	if !found || !validName.MatchString(owner) || !validName.MatchString(name) || owner == "." || owner == ".." || name == "." || name == ".." {
		return "", false
	}
	return owner + "/" + name, true
}

// validName is what GitHub allows in an owner's or a repository's name.
var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// parseDuration reads a Kubernetes duration ("10m", "1h30m"); zero when
// absent or malformed.
func parseDuration(s string) time.Duration {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < 0 {
		return 0
	}
	return d
}

func objectName(kind, namespace, name string) string {
	return fmt.Sprintf("%s %s/%s", kind, namespace, name)
}
