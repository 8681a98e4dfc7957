package config

import (
	"path"
	"strings"
)

// Discover is a cluster's discover: block: which reconcilers' objects
// targets are derived from.
type Discover struct {
	// Flux reads Flux Kustomizations (kustomize.toolkit.fluxcd.io/v1) and
	// their GitRepository sources.
	Flux bool `yaml:"flux"`
	// ArgoCD reads Argo CD Applications (argoproj.io/v1alpha1).
	ArgoCD bool `yaml:"argocd"`
	// Namespaces are where reconciler objects count (default: Flux's and
	// Argo CD's own, flux-system and argocdNamespace). Whoever may create a
	// Kustomization or an Application in a namespace listed here steers
	// what driftback compares: list tenants' namespaces deliberately, and
	// bound them with Repositories. "*" is every namespace. Those left
	// out are counted, by namespace, in `driftback targets`, /readyz and
	// the drift dashboard.
	Namespaces []string `yaml:"namespaces"`
	// Repositories bound what a namespace's objects may name: namespace →
	// owner/name patterns (path.Match, case-insensitive, such as
	// "acme/team-a-*"). An object naming another repository is listed as
	// not rendered, with why. A namespace without an entry may name any.
	Repositories map[string][]string `yaml:"repositories"`
	// ArgoCDNamespace is Argo CD's own namespace, where argocd-cm lives
	// and the only one it reads AppProjects from: an Application whose
	// project is not there is a sync that fails (default "argocd").
	ArgoCDNamespace string `yaml:"argocdNamespace"`
	// FluxSubstitution is how kustomize-controller substitutes postBuild
	// variables: "strict" (the default since Flux 2.9: a variable without a
	// value or default fails the build) or "lenient" (earlier releases, or
	// the StrictPostBuildSubstitutions feature gate off: it becomes empty).
	FluxSubstitution string `yaml:"fluxSubstitution"`
	// FluxDefaultServiceAccount is the account, in its own namespace, that
	// a Kustomization without spec.serviceAccountName applies as when
	// kustomize-controller runs with --default-service-account (the
	// multi-tenancy lockdown). Such a Kustomization is compared only
	// within what that account may apply, as one that names it. Empty:
	// the controller's own account.
	FluxDefaultServiceAccount string `yaml:"fluxDefaultServiceAccount"`
	// Destinations map an Argo CD destination (its name or server URL) to
	// a key of clusters; "https://kubernetes.default.svc" and "in-cluster"
	// are the cluster discovered on. Nothing else is another cluster, not
	// even a name equal to a key of clusters: whoever may create an
	// Application would otherwise choose what it is compared with.
	Destinations map[string]string `yaml:"destinations"`
}

// Where lists the namespaces whose reconciler objects count; nil is every
// namespace.
func (d *Discover) Where() []string {
	switch {
	case len(d.Namespaces) == 1 && d.Namespaces[0] == "*":
		return nil
	case len(d.Namespaces) > 0:
		return d.Namespaces
	}
	var out []string
	if d.Flux {
		out = append(out, "flux-system")
	}
	if d.ArgoCD {
		out = append(out, d.ArgoNamespace())
	}
	return out
}

// ArgoNamespace is Argo CD's own namespace: ArgoCDNamespace or "argocd"
// (also when d is nil).
func (d *Discover) ArgoNamespace() string {
	if d == nil || d.ArgoCDNamespace == "" {
		return "argocd"
	}
	return d.ArgoCDNamespace
}

// Allows says whether an object in namespace may name repo (owner/name).
func (d *Discover) Allows(namespace, repo string) bool {
	patterns, ok := d.Repositories[namespace]
	if !ok {
		return true
	}
	for _, p := range patterns {
		if m, err := path.Match(strings.ToLower(p), strings.ToLower(repo)); err == nil && m {
			return true
		}
	}
	return false
}

// Enabled says the block asks for anything.
func (d *Discover) Enabled() bool { return d != nil && (d.Flux || d.ArgoCD) }
