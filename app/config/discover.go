package config

// Discover is a cluster's discover: block: which reconcilers' objects
// targets are derived from.
type Discover struct {
	// Flux reads Flux Kustomizations (kustomize.toolkit.fluxcd.io/v1) and
	// their GitRepository sources.
	Flux bool `yaml:"flux"`
	// ArgoCD reads Argo CD Applications (argoproj.io/v1alpha1).
	ArgoCD bool `yaml:"argocd"`
	// Namespaces are where to look (default: every namespace).
	Namespaces []string `yaml:"namespaces"`
	// ArgoCDNamespace is Argo CD's own namespace, where argocd-cm lives
	// (default "argocd").
	ArgoCDNamespace string `yaml:"argocdNamespace"`
	// FluxSubstitution is how kustomize-controller substitutes postBuild
	// variables: "strict" (the default since Flux 2.9: a variable without a
	// value or default fails the build) or "lenient" (earlier releases, or
	// the StrictPostBuildSubstitutions feature gate off: it becomes empty).
	FluxSubstitution string `yaml:"fluxSubstitution"`
	// Destinations map an Argo CD destination (its name or server URL) to
	// a key of clusters; "https://kubernetes.default.svc" and "in-cluster"
	// are the cluster discovered on, and a destination name equal to a key
	// of clusters is that cluster.
	Destinations map[string]string `yaml:"destinations"`
}

// Enabled says the block asks for anything.
func (d *Discover) Enabled() bool { return d != nil && (d.Flux || d.ArgoCD) }
