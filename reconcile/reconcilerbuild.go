package reconcile

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/reconcile/hide"
	"github.com/driftback/driftback/render"
)

// ReconcilerBuild builds a reconciler's path as serve builds a discovered target:
// a Flux Kustomization's (`driftback diff --flux-kustomization`: Flux's
// generated or rewritten kustomization, postBuild substitution,
// commonMetadata and owner labels, with values from Secrets hidden in every
// report) or an Argo CD Application's (`--argocd-app`).
type ReconcilerBuild struct {
	target Target
	vars   Vars
	// hidden are the objects whose source uses a Secret's variable, and
	// gitOnly their fields it sets.
	hidden  map[string]hide.AsWritten
	gitOnly map[string][]fieldpath.Path
	// hooks are the Argo CD hooks of the last tree built (the head's).
	Hooks []string
}

// NewFluxBuild builds ks. With c, its substituteFrom ConfigMaps and Secrets
// are read through it, as kustomize-controller reads them; without, only its
// inline substitute is known, and a Kustomization that reads more is not
// substituted (Notes says so).
func NewFluxBuild(ctx context.Context, ks *unstructured.Unstructured, c client.Client) *ReconcilerBuild {
	f := &discover.Found{Reconciler: discover.ReconcilerFlux, Object: fmt.Sprintf("Kustomization %s/%s", ks.GetNamespace(), ks.GetName()),
		Namespace: ks.GetNamespace(), Name: ks.GetName(), Flux: ks, Prune: true,
		Tracking: drift.Tracking{FluxName: ks.GetName(), FluxNamespace: ks.GetNamespace()}}
	if p, ok, _ := unstructured.NestedString(ks.Object, "spec", "path"); ok {
		f.Path = render.CleanPath(p)
	} else {
		f.Path = "."
	}
	unread := "postBuild variables are not substituted: they come from ConfigMaps and Secrets in the cluster (give --kubeconfig to read them); ${…} is left as written"
	return &ReconcilerBuild{target: Target{Name: f.Path, Path: f.Path, Found: f}, vars: LoadFluxVariables(ctx, ks, false, c, unread)}
}

// NewArgoCDBuild builds an Argo CD Application's path as serve builds a
// discovered one, for `driftback diff --argocd-app`: its kustomize options
// or its directory options, and its destination namespace for namespaced
// objects that name none. argoNamespace is Argo CD's own namespace.
func NewArgoCDBuild(app *unstructured.Unstructured, argoNamespace string) (*ReconcilerBuild, error) {
	// The local repository stands for the Application's repoURL, wherever
	// that is hosted.
	app = app.DeepCopy()
	if _, ok, _ := unstructured.NestedString(app.Object, "spec", "source", "repoURL"); ok {
		if err := unstructured.SetNestedField(app.Object, "https://"+string(localHost)+"/local/repository", "spec", "source", "repoURL"); err != nil {
			return nil, err
		}
	}
	f := discover.FromArgoCD(app, discover.Settings{ArgoCDNamespace: argoNamespace, Host: localHost, AnyProject: true})
	if f.NotRendered != "" {
		return nil, fmt.Errorf("Application %s/%s is not rendered: %s", app.GetNamespace(), app.GetName(), f.NotRendered)
	}
	if f.Path == "" {
		f.Path = "."
	}
	return &ReconcilerBuild{target: Target{Name: f.Path, Path: f.Path, Tracking: f.Tracking, Found: f}}, nil
}

// localHost names the local repository to discovery.
const localHost discover.Host = "repository.local"

// Path is the directory the Kustomization builds.
func (b *ReconcilerBuild) Path() string { return b.target.Path }

// Notes say what the build could not do, and what the reconciler does
// that is not compared (Argo CD's hooks in the last tree built).
func (b *ReconcilerBuild) Notes() []string {
	var out []string
	if b.vars.Note != "" {
		out = append(out, b.vars.Note)
	}
	if len(b.Hooks) > 0 {
		out = append(out, HooksNote(b.Hooks))
	}
	return out
}

// Tracking finds what the reconciler applied, for prune.
func (b *ReconcilerBuild) Tracking() drift.Tracking { return b.target.Found.Tracking }

// DefaultNamespace is where the reconciler puts namespaced objects that name
// none (Argo CD's destination namespace), "" for the apiserver's default.
func (b *ReconcilerBuild) DefaultNamespace() string { return b.target.Found.DestinationNamespace }

// Objects renders the Kustomization at tree; nil, without problems, when the
// tree has nothing at its path.
func (b *ReconcilerBuild) Objects(ctx context.Context, r *render.Renderer, tree *render.Tree) ([]*unstructured.Unstructured, []string) {
	Built := Build(ctx, r, tree, b.target, b.vars)
	for i, p := range Built.Problems {
		Built.Problems[i] = hide.In(p, b.vars.Hidden)
	}
	b.secret(Built.SecretObjects)
	for k, v := range Built.GitOnly {
		if b.gitOnly == nil {
			b.gitOnly = map[string][]fieldpath.Path{}
		}
		b.gitOnly[k] = append(b.gitOnly[k], v...)
	}
	b.Hooks = Built.Hooks
	return Built.Objects, Built.Problems
}

// secret remembers the objects whose source uses a Secret's variable.
func (b *ReconcilerBuild) secret(objects map[string]hide.AsWritten) {
	for k, v := range objects {
		if b.hidden == nil {
			b.hidden = map[string]hide.AsWritten{}
		}
		b.hidden[k] = v
	}
}

// GitOnly is the comparison's drift.Options.GitOnly for the trees built so
// far: the fields a Secret's variable sets.
func (b *ReconcilerBuild) GitOnly() func(*unstructured.Unstructured) []fieldpath.Path {
	return hide.GitOnlyFields(b.gitOnly)
}

// Hide takes out of a report every value substituted from a Secret.
func (b *ReconcilerBuild) Hide(t *drift.Target) {
	hide.Substituted(t, b.hidden)
	hide.Redact(t, b.vars.Hidden)
}
