package app

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/render"
)

// FluxBuild builds a Flux Kustomization's path as serve builds a discovered
// one, for `driftback diff --flux-kustomization`: Flux's generated or
// rewritten kustomization, postBuild substitution, commonMetadata and owner
// labels, with values from Secrets hidden in every report.
type FluxBuild struct {
	target Target
	vars   fluxVars
	// hidden are the objects whose source uses a Secret's variable.
	hidden map[string]bool
}

// NewFluxBuild builds ks. With c, its substituteFrom ConfigMaps and Secrets
// are read through it, as kustomize-controller reads them; without, only its
// inline substitute is known, and a Kustomization that reads more is not
// substituted (Note says so).
func NewFluxBuild(ctx context.Context, ks *unstructured.Unstructured, c client.Client) *FluxBuild {
	f := &discover.Found{Reconciler: discover.ReconcilerFlux, Object: fmt.Sprintf("Kustomization %s/%s", ks.GetNamespace(), ks.GetName()),
		Namespace: ks.GetNamespace(), Name: ks.GetName(), Flux: ks, Prune: true}
	if p, ok, _ := unstructured.NestedString(ks.Object, "spec", "path"); ok {
		f.Path = render.CleanPath(p)
	} else {
		f.Path = "."
	}
	unread := "postBuild variables are not substituted: they come from ConfigMaps and Secrets in the cluster (give --kubeconfig to read them); ${…} is left as written"
	return &FluxBuild{target: Target{Name: f.Path, Path: f.Path, found: f}, vars: loadFluxVariables(ctx, ks, false, c, unread)}
}

// Path is the directory the Kustomization builds.
func (b *FluxBuild) Path() string { return b.target.Path }

// Note says what the build could not do, or "".
func (b *FluxBuild) Note() string { return b.vars.note }

// Tracking finds what the Kustomization applied, for prune.
func (b *FluxBuild) Tracking() drift.Tracking {
	return drift.Tracking{FluxName: b.target.found.Name, FluxNamespace: b.target.found.Namespace}
}

// Objects renders the Kustomization at tree; nil, without problems, when the
// tree has nothing at its path.
func (b *FluxBuild) Objects(ctx context.Context, r *render.Renderer, tree *render.Tree) ([]*unstructured.Unstructured, []string) {
	built := buildTarget(ctx, r, tree, b.target, b.vars)
	for i, p := range built.problems {
		built.problems[i] = hideIn(p, b.vars.Hidden)
	}
	b.secret(built.secretObjects)
	return built.objs, built.problems
}

// secret remembers the objects whose source uses a Secret's variable.
func (b *FluxBuild) secret(objects map[string]bool) {
	for k := range objects {
		if b.hidden == nil {
			b.hidden = map[string]bool{}
		}
		b.hidden[k] = true
	}
}

// Hide takes out of a report every value substituted from a Secret.
func (b *FluxBuild) Hide(t *drift.Target) {
	hideSubstituted(t, b.hidden)
	redact(t, b.vars.Hidden)
}
