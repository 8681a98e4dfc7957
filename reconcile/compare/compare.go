// Package compare builds one target at the two sides of a comparison (base,
// then head) as its reconciler builds it, with reconcile.Build, and keeps
// what the report must hide: the command line's way into the reconciler
// build, so that `diff`, the Action and serve build alike.
package compare

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/syncfail"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/reconcile"
	"github.com/driftback/driftback/reconcile/hide"
	"github.com/driftback/driftback/render"
)

// Build builds a path as serve builds a target: plainly (kustomize, then the
// charts of its HelmReleases and Argo CD Applications), as a Flux
// Kustomization does (Flux's generated or rewritten kustomization, postBuild
// substitution, commonMetadata and owner labels), or as an Argo CD
// Application does; with values from Secrets hidden in every report.
type Build struct {
	target reconcile.Target
	vars   reconcile.Vars
	// hidden are the objects whose source uses a Secret's variable, and
	// gitOnly their fields it sets.
	hidden  map[string]hide.AsWritten
	gitOnly map[string][]fieldpath.Path
	// releases are the Helm releases of each side built, in order.
	releases [][]reconcile.Release
	// notes are said of the build whatever it renders.
	notes []string
	// rendered says, when a chart is rendered, for what (Helm's default
	// capabilities).
	rendered string
	// Hooks are the Argo CD hooks of the last tree built (the head's),
	// Charts the values of its charts (nil when it has none).
	Hooks  []string
	Charts prgen.ChartValues
}

// Plain builds a path that no reconciler object names: kustomize, then the
// charts of the HelmReleases and Argo CD Applications it renders.
func Plain(path string) *Build {
	return &Build{target: reconcile.Target{Name: path, Path: path}}
}

// Flux builds ks. With c, its substituteFrom ConfigMaps and Secrets are
// read through it, as kustomize-controller reads them; without, only its
// inline substitute is known, and a Kustomization that reads more is not
// substituted (Notes says so).
func Flux(ctx context.Context, ks *unstructured.Unstructured, c client.Client) *Build {
	f := &discover.Found{Reconciler: discover.ReconcilerFlux, Object: fmt.Sprintf("Kustomization %s/%s", ks.GetNamespace(), ks.GetName()),
		Namespace: ks.GetNamespace(), Name: ks.GetName(), Flux: ks, Prune: true,
		Tracking: drift.Tracking{FluxName: ks.GetName(), FluxNamespace: ks.GetNamespace()}}
	if p, ok, _ := unstructured.NestedString(ks.Object, "spec", "path"); ok {
		f.Path = render.CleanPath(p)
	} else {
		f.Path = "."
	}
	unread := "postBuild variables are not substituted: they come from ConfigMaps and Secrets in the cluster (give --kubeconfig to read them); ${…} is left as written"
	return &Build{target: reconcile.Target{Name: f.Path, Path: f.Path, Found: f}, vars: reconcile.LoadFluxVariables(ctx, ks, false, c, unread)}
}

// ArgoCD builds an Argo CD Application's path as serve builds a discovered
// one: its kustomize options or its directory options, and its destination
// namespace for namespaced objects that name none. argoNamespace is Argo
// CD's own namespace.
func ArgoCD(app *unstructured.Unstructured, argoNamespace string) (*Build, error) {
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
	return &Build{target: reconcile.Target{Name: f.Path, Path: f.Path, Tracking: f.Tracking, Found: f}}, nil
}

// localHost names the local repository to discovery.
const localHost discover.Host = "repository.local"

// WithCharts renders Helm charts for caps and fetches those not in the
// repository through access (nil: none). With caps nil, no chart is
// rendered, for note's reason; otherwise note, when set, is said of a
// build that rendered one (what caps are).
func (b *Build) WithCharts(caps *reconcile.Capabilities, note string, access *reconcile.ChartAccess) *Build {
	b.vars.Helm, b.vars.Charts = caps, access
	if caps == nil {
		b.vars.HelmNote = note
	} else {
		b.rendered = note
	}
	return b
}

// Note adds what is to be said of the build (which reconciler object it
// builds as, and where that was found).
func (b *Build) Note(s string) { b.notes = append(b.notes, s) }

// HelmCharts inflates the kustomizations' helmCharts, as kustomize build
// --enable-helm (Argo CD with it in kustomize.buildOptions) does.
func (b *Build) HelmCharts(on bool) *Build {
	if f := b.target.Found; f != nil {
		found := *f
		found.EnableHelm = on
		b.target.Found = &found
	}
	b.target.EnableHelm = on
	return b
}

// InflatesHelmCharts says HelmCharts is on.
func (b *Build) InflatesHelmCharts() bool { return b.target.EnableHelm }

// Path is the directory built.
func (b *Build) Path() string { return b.target.Path }

// Found is the reconciler object the path is built as; nil for a plain
// path.
func (b *Build) Found() *discover.Found { return b.target.Found }

// Notes say what the build could not do, what the reconciler does that is
// not compared (Argo CD's hooks in the last tree built), and what the
// change does to its Helm releases.
func (b *Build) Notes() []string {
	out := slices.Clone(b.notes)
	if b.vars.Note != "" {
		out = append(out, b.vars.Note)
	}
	if len(b.Hooks) > 0 {
		out = append(out, reconcile.HooksNote(b.Hooks))
	}
	var base, head []reconcile.Release
	switch n := len(b.releases); {
	case n >= 2:
		base, head = b.releases[n-2], b.releases[n-1]
	case n == 1:
		head = b.releases[0]
	}
	for _, r := range head {
		if r.NotRendered == "" && b.rendered != "" {
			out = append(out, b.rendered)
			break
		}
	}
	return append(out, reconcile.ReleaseNotes(base, head)...)
}

// Tracking finds what the reconciler applied, for prune; the zero value
// for a plain path.
func (b *Build) Tracking() drift.Tracking {
	if f := b.target.Found; f != nil {
		return f.Tracking
	}
	return drift.Tracking{}
}

// DefaultNamespace is where the reconciler puts namespaced objects that name
// none (Argo CD's destination namespace), "" for the apiserver's default.
func (b *Build) DefaultNamespace() string {
	if f := b.target.Found; f != nil {
		return f.DestinationNamespace
	}
	return ""
}

// Objects builds the path at tree; nil, without problems, when the tree has
// nothing there.
func (b *Build) Objects(ctx context.Context, r *render.Renderer, tree *render.Tree) ([]*unstructured.Unstructured, []string) {
	return b.keep(reconcile.Build(ctx, r, tree, b.target, b.vars))
}

// Rendered finishes a plain path's render (objs, from a render of many
// overlays at once) as Objects would build it.
func (b *Build) Rendered(ctx context.Context, r *render.Renderer, tree *render.Tree, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, []string) {
	return b.keep(reconcile.Rendered(ctx, r, tree, b.target, b.vars, objs))
}

// keep remembers what a side's build hides, its releases and hooks.
func (b *Build) keep(built reconcile.Built) ([]*unstructured.Unstructured, []string) {
	b.vars.Hidden = append(b.vars.Hidden, built.Hidden...)
	for i, p := range built.Problems {
		built.Problems[i] = hide.In(p, b.vars.Hidden)
	}
	for k, v := range built.SecretObjects {
		if b.hidden == nil {
			b.hidden = map[string]hide.AsWritten{}
		}
		b.hidden[k] = v
	}
	for k, v := range built.GitOnly {
		if b.gitOnly == nil {
			b.gitOnly = map[string][]fieldpath.Path{}
		}
		b.gitOnly[k] = append(b.gitOnly[k], v...)
	}
	b.releases = append(b.releases, built.Releases)
	b.Hooks, b.Charts = built.Hooks, built.Charts
	return built.Objects, built.Problems
}

// GitOnly is the comparison's drift.Options.GitOnly for the trees built so
// far: the fields a Secret's value sets.
func (b *Build) GitOnly() func(*unstructured.Unstructured) []fieldpath.Path {
	return hide.GitOnlyFields(b.gitOnly)
}

// Fails marks a report whose target the reconciler fails to build at all
// (a substituteFrom object missing): a sync-fails danger on its object.
func (b *Build) Fails(t *drift.Target) {
	if ref, why := reconcile.BuildFailure(b.target, b.vars); why != "" {
		syncfail.Build(t, ref, why)
	}
	if n := len(b.releases); n > 0 {
		syncfail.Objects(t, reconcile.ReleaseFailures(b.releases[n-1]))
	}
}

// Hide takes out of a report every value that came from a Secret.
func (b *Build) Hide(t *drift.Target) {
	hide.Substituted(t, b.hidden)
	hide.Redact(t, b.vars.Hidden)
}

// KeepSecretValues builds with a Secret's variable's value where it is
// substituted (the drift of what it sets is then drift, shown hidden), as
// the drift loop does; a chart is still given stand-ins.
func (b *Build) KeepSecretValues() *Build {
	b.vars.KeepSecretValues = true
	return b
}

// WriteBack is what writing the drift of the last tree built (tree) back
// to Git reads of the build: the reconciler object whose fields take part
// in it, the kustomization it generates for a plain directory, its
// variables and the values of its charts; why not, when its variables
// could not be read.
func (b *Build) WriteBack(tree *render.Tree) (prgen.Input, string) {
	in := prgen.Input{Tree: tree, Overlay: b.target.Path, Charts: b.Charts, NotWritable: reconcile.NotWritable(b.target, tree)}
	in.Build, in.Generated = reconcile.WriteBack(b.target, tree)
	var ok bool
	if in.Variables, ok = reconcile.WriteBackVariables(b.target, b.vars); !ok {
		return in, "its postBuild variables could not be read: " + b.vars.Note
	}
	return in, ""
}
