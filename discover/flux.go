package discover

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/render"
)

// The Flux kinds discovery reads.
var (
	FluxKustomizations  = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
	FluxGitRepositories = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"}
)

// FluxSSAAnnotation on an object in Git changes how kustomize-controller
// applies it: "Ignore" never applies it, "IfNotPresent" only creates it.
const FluxSSAAnnotation = "kustomize.toolkit.fluxcd.io/ssa"

// Settings say how found objects map onto app.yml.
type Settings struct {
	// On is the cluster the objects are read from.
	On string
	// Host is the GitHub host repositories must be on.
	Host Host
	// Destinations map an Argo CD destination name or server URL to one of
	// app.yml's clusters: the only way a destination is another cluster.
	Destinations map[string]string
	// ArgoCDNamespace is Argo CD's own namespace (default "argocd"): an
	// Application elsewhere is tracked as "<namespace>_<name>".
	ArgoCDNamespace string
	// ArgoCDInstanceLabel is the label Argo CD tracks with
	// (application.instanceLabelKey; default app.kubernetes.io/instance).
	ArgoCDInstanceLabel string
	// ArgoCDTrackingMethod is application.resourceTrackingMethod; empty
	// matches both the label and the annotation.
	ArgoCDTrackingMethod string
	// ArgoCDResync is the application controller's resync period
	// (argocd-cm timeout.reconciliation); zero for Argo CD's default,
	// negative when refresh is off.
	ArgoCDResync time.Duration
	// ArgoCDEnableHelm says argocd-cm's kustomize.buildOptions holds
	// --enable-helm: Argo CD inflates kustomizations' helmCharts.
	ArgoCDEnableHelm bool
	// ArgoCDAppNamespaces are the namespaces besides its own whose
	// Applications Argo CD reconciles (application.namespaces in
	// argocd-cmd-params-cm: globs, or regular expressions between slashes).
	// An Application anywhere else is one Argo CD ignores.
	ArgoCDAppNamespaces []string
	// Projects are Argo CD's AppProjects by name, read from its namespace;
	// nil when they could not be read, and then no Application counts.
	Projects map[string]*unstructured.Unstructured
	// AnyProject leaves the AppProject unchecked: the person running
	// driftback named the Application (diff --argocd-app).
	AnyProject bool
	// FluxLenientSubstitution says kustomize-controller substitutes an
	// unset variable with nothing rather than failing.
	FluxLenientSubstitution bool
	// FluxDefaultServiceAccount is the account a Kustomization without
	// spec.serviceAccountName applies as (kustomize-controller's
	// --default-service-account); empty for the controller's own.
	FluxDefaultServiceAccount string
}

// FromFlux derives the target of a Flux Kustomization; sources are the
// GitRepositories read, by "namespace/name".
func FromFlux(ks *unstructured.Unstructured, sources map[string]*unstructured.Unstructured, s Settings) *Found {
	f := &Found{
		Reconciler: ReconcilerFlux,
		Object:     objectName("Kustomization", ks.GetNamespace(), ks.GetName()),
		Namespace:  ks.GetNamespace(), Name: ks.GetName(),
		On:                  s.On,
		Cluster:             s.On,
		Flux:                ks.DeepCopy(),
		LenientSubstitution: s.FluxLenientSubstitution,
		Tracking:            drift.Tracking{FluxName: ks.GetName(), FluxNamespace: ks.GetNamespace()},
	}
	spec := func(fields ...string) string {
		v, _, _ := unstructured.NestedString(ks.Object, append([]string{"spec"}, fields...)...)
		return v
	}
	p, _, _ := unstructured.NestedString(ks.Object, "spec", "path")
	f.Path = render.CleanPath(p)
	f.Prune, _, _ = unstructured.NestedBool(ks.Object, "spec", "prune")
	if f.ServiceAccount = spec("serviceAccountName"); f.ServiceAccount == "" {
		f.ServiceAccount = s.FluxDefaultServiceAccount
	}
	f.Interval = parseDuration(spec("interval"))
	if suspend, _, _ := unstructured.NestedBool(ks.Object, "spec", "suspend"); suspend {
		f.Suspended = "the Kustomization is suspended (spec.suspend): merging changes nothing on this cluster until reconciliation resumes"
	}
	if secret := spec("kubeConfig", "secretRef", "name"); secret != "" {
		f.Cluster = ""
		f.NotRendered = fmt.Sprintf("it applies to a remote cluster through the kubeconfig in Secret %s, which driftback does not read; add that cluster to app.yml and a target for it", secret)
	}
	kind, name, ns := spec("sourceRef", "kind"), spec("sourceRef", "name"), spec("sourceRef", "namespace")
	if ns == "" {
		ns = ks.GetNamespace()
	}
	switch kind {
	case "GitRepository":
	case "OCIRepository":
		f.NotRendered = "its source is an OCI artifact (OCIRepository " + ns + "/" + name + "), not a Git repository"
		return f
	case "Bucket":
		f.NotRendered = "its source is a bucket (Bucket " + ns + "/" + name + "), not a Git repository"
		return f
	default:
		f.NotRendered = fmt.Sprintf("its source is %s %s/%s, not a Git repository", orUnknown(kind), ns, name)
		return f
	}
	src := sources[ns+"/"+name]
	if src == nil {
		f.NotRendered = "its GitRepository " + ns + "/" + name + " does not exist or cannot be read"
		return f
	}
	url, _, _ := unstructured.NestedString(src.Object, "spec", "url")
	repo, ok := RepoOf(url, s.Host)
	if !ok {
		f.NotRendered = fmt.Sprintf("its GitRepository %s/%s is not a repository on %s", ns, name, s.Host)
		return f
	}
	f.Repo = repo
	ref := func(field string) string {
		v, _, _ := unstructured.NestedString(src.Object, "spec", "ref", field)
		return v
	}
	switch {
	case strings.HasPrefix(ref("name"), "refs/heads/"):
		f.Branch = strings.TrimPrefix(ref("name"), "refs/heads/")
	case ref("name") != "":
		f.NotRendered = "its GitRepository follows the Git reference " + ref("name") + ", not a branch"
	case ref("commit") != "":
		f.NotRendered = "its GitRepository is pinned to commit " + ref("commit") + ": merging changes nothing it applies"
	case ref("semver") != "":
		f.NotRendered = "its GitRepository follows tags matching " + ref("semver") + ", not a branch"
	case ref("tag") != "":
		f.NotRendered = "its GitRepository is pinned to tag " + ref("tag") + ": merging changes nothing it applies"
	case ref("branch") != "":
		f.Branch = ref("branch")
	default:
		// source-controller follows master when the GitRepository names
		// no reference at all.
		f.Branch = "master"
	}
	if suspend, _, _ := unstructured.NestedBool(src.Object, "spec", "suspend"); suspend && f.Suspended == "" {
		f.Suspended = "its GitRepository " + ns + "/" + name + " is suspended: merging changes nothing on this cluster until it resumes"
	}
	if provider := spec("decryption", "provider"); provider != "" {
		f.Notes = append(f.Notes, "objects encrypted with "+provider+" are compared by their encrypted content: which keys changed, never their values")
	}
	return f
}

func orUnknown(s string) string {
	if s == "" {
		return "a source of no kind"
	}
	return s
}
