// Package build renders a target as its reconciler builds it: plain kustomize,
// a Flux Kustomization (its generated kustomization, postBuild variables read
// from the cluster, commonMetadata) or an Argo CD Application (its kustomize
// options, destination namespace, hooks left out), and hides what came from
// a Secret.
package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/argocd"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/reconcile/charts"
	"github.com/driftback/driftback/reconcile/hide"
	"github.com/driftback/driftback/reconcile/prepare"
	"github.com/driftback/driftback/render"
)

// Target is what a build reads of a target: where it is, and the reconciler
// object it was found as (nil when app.yml alone names it).
type Target struct {
	Name, Repo, Path, Cluster string
	Tracking                  drift.Tracking
	Found                     *discover.Found
	// EnableHelm inflates helmCharts (kustomize build --enable-helm) for
	// a path no reconciler object names.
	EnableHelm bool
}

// Built is a target rendered the way its reconciler builds it.
type Built struct {
	Objects  []*unstructured.Unstructured
	Problems []string
	// Absent says the tree has nothing at the target's path.
	Absent bool
	// SecretObjects are the objects, by substitutedKey, whose source uses a
	// variable that came from a Secret, with their identity as written.
	SecretObjects map[string]hide.AsWritten
	// Hooks names the Argo CD hooks left out of objs: Argo CD runs them at
	// sync and never compares or prunes them.
	Hooks []string
	// Releases are the Helm releases of the render, their objects among
	// Objects when they could be rendered.
	Releases []Release
	// Hidden are values read from Secrets for the releases (valuesFrom),
	// never shown.
	Hidden []string
	// Charts traces drift on the releases' objects to their values; nil
	// when none was rendered.
	Charts prgen.ChartValues
	// GitOnly are, for objects of SecretObjects (by substitutedKey), the
	// fields that take a Secret's value in the cluster: rendered from
	// stand-ins, they are compared Git against Git (GitOnlyFields).
	GitOnly map[string][]fieldpath.Path
}

// Target renders t at tree as its reconciler builds it: plain
// kustomize, Flux's generated kustomization then its postBuild
// substitution, commonMetadata and owner labels, or Argo CD's kustomize
// options and destination namespace, without its hooks. Objects Flux never applies (kustomize.toolkit.fluxcd.io/ssa:
// Ignore) are left out.
func Build(ctx context.Context, r *render.Renderer, tree *render.Tree, t Target, vars Vars) Built {
	f := t.Found
	if isArgoCDChart(t, tree) {
		return argoCDChart(ctx, r, tree, t, vars)
	}
	tree, opts, absent, err := targetTree(t, tree)
	if opts.EnableHelm && vars.Helm != nil {
		// As Argo CD passes them: --helm-kube-version, --helm-api-versions.
		opts.HelmKubeVersion, opts.HelmAPIVersions = vars.Helm.KubeVersion, vars.Helm.APIVersions
	}
	if opts.EnableHelm && err == nil && !absent {
		// What kustomize would helm pull: from trusted repositories only.
		var fetcher *charts.Fetcher
		var trust *charts.Trust
		if vars.Charts != nil {
			fetcher, trust = vars.Charts.Fetcher, vars.Charts.Trust
		}
		pulled, problems := charts.Pulled(ctx, tree, t.Path, fetcher, trust)
		if len(problems) > 0 {
			return Built{Problems: problems}
		}
		tree = tree.With(pulled)
	}
	switch {
	case err != nil:
		return Built{Problems: []string{err.Error()}}
	case absent:
		return Built{Absent: true}
	}
	res, err := r.RenderWith(ctx, tree, []string{t.Path}, opts)
	if err != nil {
		return Built{Problems: []string{err.Error()}}
	}
	var b Built
	o := res.Overlays[0]
	for _, p := range o.Problems {
		b.Problems = append(b.Problems, p.Error())
	}
	objs, err := o.Objects()
	if err != nil {
		b.Problems = append(b.Problems, err.Error())
		return b
	}
	var secrets *secretUse
	if f != nil && f.Flux != nil && len(b.Problems) == 0 {
		ks := f.Flux
		if vars.Skip {
			ks = ks.DeepCopy()
			unstructured.RemoveNestedField(ks.Object, "spec", "postBuild")
		}
		uses := usesVariables(objs, vars.secretNames)
		// An identity written with a Secret's variable is shown as written.
		refs := variableRefs(vars.secretNames)
		written := make([]hide.AsWritten, len(objs))
		for i, o := range objs {
			if uses[i] && refs.MatchString(o.GetName()) {
				written[i].Name = o.GetName()
			}
			if uses[i] && refs.MatchString(o.GetNamespace()) {
				written[i].Namespace = o.GetNamespace()
			}
		}
		raw := objs
		if objs, err = prepare.FluxFinish(objs, ks, vars.FluxVariables); err != nil {
			b.Problems = append(b.Problems, err.Error())
			return b
		}
		if secrets, err = standInSecrets(raw, objs, uses, ks, vars); err != nil {
			b.Problems = append(b.Problems, hide.In(err.Error(), vars.Hidden))
			return b
		}
		if secrets != nil {
			b.GitOnly = maps.Clone(secrets.gitOnly)
		}
		for i, o := range objs {
			if uses[i] {
				if b.SecretObjects == nil {
					b.SecretObjects = map[string]hide.AsWritten{}
				}
				b.SecretObjects[hide.Key(o.GetKind(), o.GetName())] = written[i]
			}
		}
		objs = withoutFluxIgnored(objs)
	}
	if f != nil && f.Reconciler == discover.ReconcilerArgoCD {
		b.Hooks = o.Hooks
	}
	return finish(ctx, r, tree, f, vars, objs, secrets, b)
}

// Rendered finishes the render of a plain overlay (t names no reconciler
// object) as Build does: its HelmReleases' and Argo CD Applications'
// charts rendered. For callers that render many overlays at once.
func Rendered(ctx context.Context, r *render.Renderer, tree *render.Tree, t Target, vars Vars, objs []*unstructured.Unstructured) Built {
	if t.Found != nil {
		return Build(ctx, r, tree, t, vars)
	}
	return finish(ctx, r, tree, nil, vars, objs, nil, Built{})
}

// finish renders the charts of a target's kustomize build, drops what its
// reconciler does not compare and places what it places.
func finish(ctx context.Context, r *render.Renderer, tree *render.Tree, f *discover.Found, vars Vars, objs []*unstructured.Unstructured, secrets *secretUse, b Built) Built {
	var err error
	var ks *unstructured.Unstructured
	if f != nil {
		ks = f.Flux
	}
	rb := helmReleases(ctx, r, tree, ks, objs, vars, secrets, b.SecretObjects)
	apps := chartApplications(ctx, r, rb.objects, vars, secrets)
	rb.objects, rb.releases, rb.problems = apps.objects, append(rb.releases, apps.releases...), append(rb.problems, apps.problems...)
	objs, b.Releases, b.Hidden = rb.objects, rb.releases, rb.hidden
	for k, v := range rb.gitOnly {
		if b.GitOnly == nil {
			b.GitOnly = map[string][]fieldpath.Path{}
		}
		b.GitOnly[k] = v
	}
	for k, v := range rb.secretObjects {
		if b.SecretObjects == nil {
			b.SecretObjects = map[string]hide.AsWritten{}
		}
		b.SecretObjects[k] = v
	}
	if len(rb.problems) > 0 {
		b.Problems = append(b.Problems, rb.problems...)
		return b
	}
	if len(rb.traced) > 0 {
		b.Charts = &chartValues{r: r, releases: rb.traced}
	}
	if f != nil && f.Reconciler == discover.ReconcilerArgoCD {
		objs = slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool {
			if argocd.IsHook(o.GetAnnotations()) {
				b.Hooks = append(b.Hooks, o.GetKind()+" "+o.GetName())
				return true
			}
			return false
		})
	}
	if f != nil && f.DestinationNamespace != "" {
		// Argo CD places namespaced objects that name no namespace in its
		// destination's before it compares, syncs or prunes; so does every
		// read of the target's scope.
		if objs, err = object.Place(ctx, nil, objs, f.DestinationNamespace); err != nil {
			b.Problems = append(b.Problems, err.Error())
			return b
		}
	}
	b.Objects = objs
	return b
}

// Affects says whether a change (the files changed between base and head)
// affects what t's reconciler builds: the closure of its kustomization as
// the reconciler prepares it, any file under a plain directory it reads as
// manifests, and the charts in the repository its HelmReleases install,
// with their values files.
func Affects(t Target, base, head *render.Tree, changed []string) bool {
	if t.Found != nil && !base.HasKustomization(t.Path) && !head.HasKustomization(t.Path) {
		return under(changed, t.Path)
	}
	// What the reconciler builds reads more than the kustomization says (a
	// Kustomization's or an Application's components): its closure counts.
	if b, h, ok := affectTrees(t, base, head); ok {
		base, head = b, h
	}
	if len(render.Affected(base, head, []string{t.Path}, changed)) > 0 {
		return true
	}
	for _, tree := range []*render.Tree{base, head} {
		for _, p := range prepare.ChartPaths(tree, tree.ClosureFiles(t.Path)) {
			if under(changed, p) {
				return true
			}
		}
	}
	return false
}

// under says whether one of paths is dir or below it ("." holds all).
func under(paths []string, dir string) bool {
	for _, c := range paths {
		if dir == "." || dir == "" || c == dir || strings.HasPrefix(c, dir+"/") {
			return true
		}
	}
	return false
}

// affectTrees are the trees t's reconciler builds, for finding what a
// change affects; ok is false for plain kustomize or when either cannot be
// built (the plain trees then decide).
func affectTrees(t Target, base, head *render.Tree) (*render.Tree, *render.Tree, bool) {
	f := t.Found
	if f == nil || (f.Flux == nil && f.Kustomize == nil) {
		return nil, nil, false
	}
	prep := func(tree *render.Tree) (*render.Tree, error) {
		switch {
		case !tree.HasKustomization(t.Path):
			return tree, nil
		case f.Flux != nil:
			return prepare.FluxTree(tree, t.Path, f.Flux)
		default:
			return prepare.ArgoCDTree(tree, t.Path, ArgoOptions(f.Kustomize))
		}
	}
	b, err := prep(base)
	if err != nil {
		return nil, nil, false
	}
	h, err := prep(head)
	if err != nil {
		return nil, nil, false
	}
	return b, h, true
}

// targetTree is reconcilerTree with the reconciler's objects as
// discovered.
func targetTree(t Target, tree *render.Tree) (*render.Tree, render.BuildOptions, bool, error) {
	if f := t.Found; f != nil {
		return reconcilerTree(t, tree, f.Flux, f.Kustomize)
	}
	return reconcilerTree(t, tree, nil, nil)
}

// reconcilerTree is the tree t's reconciler builds from tree, Git's, and
// how it renders it: Flux's generated kustomization for the Kustomization
// ks, Argo CD's kustomization edited with the Application's kustomize
// options argo, or its directory of manifests. absent says the tree holds
// nothing the reconciler builds at the path.
func reconcilerTree(t Target, tree *render.Tree, ks *unstructured.Unstructured, argo *discover.ArgoKustomize) (out *render.Tree, opts render.BuildOptions, absent bool, err error) {
	f := t.Found
	switch {
	case f != nil && f.Flux != nil:
		if !tree.HasDir(t.Path) {
			return nil, opts, true, nil
		}
		opts.LoadAnywhere = true
		out, err = prepare.FluxTree(tree, t.Path, ks)
	case f != nil && f.Reconciler == discover.ReconcilerArgoCD && !tree.HasKustomization(t.Path):
		// Argo CD reads a path without a kustomization as a directory of
		// manifests, or as a Helm chart (not rendered: said elsewhere).
		if !tree.HasDir(t.Path) || NotRenderedAt(t, tree) != "" {
			return nil, opts, true, nil
		}
		opts.WithoutArgoCDHooks = true
		out, err = prepare.ArgoCDDirectoryTree(tree, t.Path, argoDirectory(f))
	case f != nil && argo != nil:
		out, err = prepare.ArgoCDTree(tree, t.Path, ArgoOptions(argo))
	default:
		if !tree.HasKustomization(t.Path) {
			return nil, opts, true, nil
		}
		out = tree
	}
	opts.EnableHelm = t.EnableHelm || (f != nil && f.EnableHelm)
	return out, opts, false, err
}

// NotRenderedAt says why driftback does not render what a target's
// reconciler builds at its path in tree, or "" when it does: Argo CD's Helm
// charts and jsonnet.
func NotRenderedAt(t Target, tree *render.Tree) string {
	f := t.Found
	if f == nil || f.Reconciler != discover.ReconcilerArgoCD || !tree.HasDir(t.Path) {
		return ""
	}
	switch prepare.ArgoCDSourceType(tree, t.Path) {
	case "Kustomize":
		return ""
	case "Helm":
		return ""
	}
	var js *prepare.JsonnetError
	if _, err := prepare.ArgoCDDirectoryTree(tree, t.Path, argoDirectory(f)); errors.As(err, &js) {
		return js.Error()
	}
	return ""
}

// argoDirectory are an Application's directory options; Argo CD's
// defaults when it sets none.
func argoDirectory(f *discover.Found) prepare.ArgoCDDirectory {
	if f.Directory != nil {
		return *f.Directory
	}
	return prepare.ArgoCDDirectory{}
}

// ReconcilerOptions are what a target's reconciler changes in the
// comparison: with prune off it deletes nothing that leaves Git, and an Argo
// CD Application puts objects without a namespace in its destination's.
func ReconcilerOptions(t Target) (noPrune, defaultNamespace string) {
	f := t.Found
	if f == nil {
		return "", ""
	}
	if !f.Prune {
		noPrune = "prune is off for " + f.Object + ": the reconciler leaves it in place"
	}
	return noPrune, f.DestinationNamespace
}

// withoutFluxIgnored drops the objects kustomize-controller never applies.
func withoutFluxIgnored(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if strings.EqualFold(o.GetAnnotations()[discover.FluxSSAAnnotation], "ignore") ||
			strings.EqualFold(o.GetLabels()[discover.FluxSSAAnnotation], "ignore") {
			continue
		}
		out = append(out, o)
	}
	return out
}

// FluxIfNotPresent are ignore rules for objects Flux only creates
// (kustomize.toolkit.fluxcd.io/ssa: IfNotPresent): once they exist, their
// changes are never applied.
func FluxIfNotPresent(objs []*unstructured.Unstructured) []object.IgnoreRule {
	var out []object.IgnoreRule
	for _, o := range objs {
		if strings.EqualFold(o.GetAnnotations()[discover.FluxSSAAnnotation], "ifnotpresent") ||
			strings.EqualFold(o.GetLabels()[discover.FluxSSAAnnotation], "ifnotpresent") {
			gvk := o.GroupVersionKind()
			out = append(out, object.IgnoreRule{Group: gvk.Group, Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()})
		}
	}
	return out
}

// ArgoOptions are an Application's kustomize options as the renderer takes them.
func ArgoOptions(k *discover.ArgoKustomize) prepare.ArgoCDKustomize {
	o := prepare.ArgoCDKustomize{
		NamePrefix: k.NamePrefix, NameSuffix: k.NameSuffix, Namespace: k.Namespace,
		Images: k.Images, CommonLabels: k.CommonLabels, CommonAnnotations: k.CommonAnnotations,
		ForceCommonLabels: k.ForceCommonLabels, ForceCommonAnnotations: k.ForceCommonAnnotations,
		Patches: k.Patches, Components: k.Components,
	}
	if len(k.Replicas) > 0 {
		o.Replicas = map[string]int64{}
		for _, r := range k.Replicas {
			o.Replicas[r.Name] = r.Count
		}
	}
	return o
}

// Vars are what one target's build reads from its cluster: its postBuild
// variables, and the capabilities its Helm charts are rendered for.
type Vars struct {
	// Helm is the cluster's capabilities; nil leaves Helm releases
	// unrendered, for HelmNote's reason.
	Helm     *Capabilities
	HelmNote string
	// Charts fetches the charts that are not in the target's repository;
	// nil fetches none.
	Charts *ChartAccess
	prepare.FluxVariables
	// Skip leaves substitution out: the variables could not, or may not,
	// be read.
	Skip bool
	// KeepSecretValues keeps a Secret's variable's value in the objects it
	// builds (the drift loop, which renders the branch a target follows,
	// where no pull request guesses: a hand edit of such a field is
	// drift). Otherwise those fields hold its stand-in, and are compared
	// Git against Git. A chart is given stand-ins either way.
	KeepSecretValues bool
	// Note says why, for the comment.
	Note string
	// Fails says the reconciler fails to build the target at all (a
	// substituteFrom object that is missing and not optional), with its
	// message: a sync-fails danger (BuildFailure).
	Fails string
	// secretNames are the variables that came from Secrets.
	secretNames []string
}

// LoadFluxVariables reads the variables a Kustomization's postBuild
// substitutes: its inline substitute, and its substituteFrom ConfigMaps and
// Secrets through c. Without c, a Kustomization that reads any is not
// substituted, with unread as the note why.
func LoadFluxVariables(ctx context.Context, ks *unstructured.Unstructured, lenient bool, c client.Client, unread string) Vars {
	if _, ok, _ := unstructured.NestedMap(ks.Object, "spec", "postBuild"); !ok {
		return Vars{}
	}
	from, _, _ := unstructured.NestedSlice(ks.Object, "spec", "postBuild", "substituteFrom")
	inline, _, _ := unstructured.NestedStringMap(ks.Object, "spec", "postBuild", "substitute")
	v := Vars{FluxVariables: prepare.FluxVariables{Values: map[string]string{}, Lenient: lenient}}
	if len(from) > 0 {
		if c == nil {
			return Vars{Skip: true, Note: unread}
		}
		var err error
		var loaded map[string]string
		collect := fluxkustomize.ContextWithSecretVarsCollector(ctx, func(m map[string]string) {
			for name, s := range m {
				v.Hidden = append(v.Hidden, s)
				v.secretNames = append(v.secretNames, name)
			}
		})
		loaded, err = fluxkustomize.LoadVariables(collect, c, *ks)
		switch {
		case apierrors.IsNotFound(err):
			// kustomize-controller fails the whole build: nothing of it
			// is applied until the object exists.
			msg := hide.In(err.Error(), v.Hidden)
			return Vars{Skip: true, Fails: "kustomize-controller fails this Kustomization's build: " + msg, Note: "postBuild variables are not substituted: " + msg}
		case err != nil:
			return Vars{Skip: true, Note: "postBuild variables are not substituted: " + hide.In(err.Error(), v.Hidden)}
		}
		for k, val := range loaded {
			v.Values[k] = val
		}
	}
	for k, val := range inline {
		v.Values[k] = strings.ReplaceAll(val, "\n", "")
	}
	// Longest first, so a value that contains another is hidden whole.
	sort.Slice(v.Hidden, func(i, j int) bool { return len(v.Hidden[i]) > len(v.Hidden[j]) })
	return v
}

// usesVariables says, for each object, whether its source refers to one of
// the variables, in any form envsubst reads ($NAME, ${NAME}, ${NAME:-x},
// ${NAME^^}, ${#NAME}, …): a value derived from a Secret can be shown transformed, so
// such objects are hidden whole rather than searched for the value.
func usesVariables(objs []*unstructured.Unstructured, names []string) []bool {
	out := make([]bool, len(objs))
	re := variableRefs(names)
	if re == nil {
		return out
	}
	for i, o := range objs {
		b, err := json.Marshal(o.Object)
		out[i] = err != nil || re.Match(b)
	}
	return out
}

// variableRefs matches a reference to one of the variables, nil for none.
func variableRefs(names []string) *regexp.Regexp {
	if len(names) == 0 {
		return nil
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	return regexp.MustCompile(`\$\{?[#!]?(` + strings.Join(quoted, "|") + `)([^A-Za-z0-9_]|$)`)
}

// Kube returns a controller-runtime client of a cluster, for the libraries
// that take one (Flux's variable loading).
type Kube func(cluster string) (client.Client, error)

// Variables reads a Flux target's postBuild variables from the cluster its
// Kustomization lives on, as kustomize-controller does. live false (a fork's
// pull request) reads nothing from the cluster.
func Variables(ctx context.Context, t Target, live bool, kube Kube) Vars {
	f := t.Found
	if f == nil || f.Flux == nil {
		return Vars{}
	}
	if !live {
		return LoadFluxVariables(ctx, f.Flux, f.LenientSubstitution, nil,
			"postBuild variables are not substituted on this pull request: they come from ConfigMaps and Secrets in the cluster, which a fork's pull request does not read")
	}
	c, err := kube(f.On)
	if err != nil {
		return Vars{Skip: true, Note: "postBuild variables are not substituted: " + err.Error()}
	}
	return LoadFluxVariables(ctx, f.Flux, f.LenientSubstitution, c, "")
}

// BuildFailure is the reconciler object of t and why its reconciler fails
// to build it at all; "" when it does not (syncfail.Build).
func BuildFailure(t Target, vars Vars) (object.Ref, string) {
	if vars.Fails == "" || t.Found == nil || t.Found.Flux == nil {
		return object.Ref{}, ""
	}
	ks := t.Found.Flux
	gvk := ks.GroupVersionKind()
	return object.Ref{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: ks.GetNamespace(), Name: ks.GetName()}, vars.Fails
}

// HooksNote says which Argo CD hooks the head holds: run at sync, not compared.
func HooksNote(hooks []string) string {
	const most = 10
	total := len(hooks)
	hooks = slices.Sorted(slices.Values(hooks))
	more := ""
	if total > most {
		more = fmt.Sprintf(" and %d more", total-most)
		hooks = hooks[:most]
	}
	return fmt.Sprintf("Argo CD runs hooks at sync instead of comparing them, so they are not compared here: %s%s",
		strings.Join(hooks, ", "), more)
}

// Notes are what the reconciler does with a target that changes what
// merging means.
func Notes(t Target, vars Vars) []string {
	var out []string
	if f := t.Found; f != nil {
		if f.Suspended != "" {
			out = append(out, f.Suspended)
		}
		out = append(out, f.Notes...)
	}
	if vars.Note != "" {
		out = append(out, vars.Note)
	}
	return out
}

// WriteBack is what the drift loop writes t's drift back with: the
// reconciler object whose own fields take part in its build, every render
// of the write-back being its reconciler's (nil for a target app.yml
// names), and for a plain directory of manifests the kustomization its
// reconciler generates (not in Git: a write-back edits only the manifest
// files).
func WriteBack(t Target, tree *render.Tree) (b *prgen.Build, generated string) {
	f := t.Found
	if f == nil {
		return nil, ""
	}
	if !tree.HasKustomization(t.Path) {
		generated = path.Join(t.Path, "kustomization.yaml")
	}
	b = &prgen.Build{}
	switch {
	case f.Flux != nil:
		b.Object, b.Options = f.Flux, []string{"spec"}
		if _, subst, _ := unstructured.NestedMap(f.Flux.Object, "spec", "postBuild"); !subst {
			// Without variables, what follows the build still happens.
			b.Finish = func(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
				return prepare.FluxFinish(objs, f.Flux, prepare.FluxVariables{})
			}
		}
	case f.Application != nil:
		b.Object, b.Options = f.Application, []string{"spec", "source", "kustomize"}
	default:
		return nil, generated
	}
	b.Tree = func(tree *render.Tree, obj *unstructured.Unstructured) (*render.Tree, render.BuildOptions, error) {
		ks, argo := obj, (*discover.ArgoKustomize)(nil)
		if f.Flux == nil {
			ks, argo = nil, discover.ApplicationKustomize(obj)
		}
		out, opts, absent, err := reconcilerTree(t, tree, ks, argo)
		if err == nil && absent {
			err = fmt.Errorf("%s: nothing its reconciler builds", t.Path)
		}
		if err == nil && generated != "" && !out.Has(generated) {
			err = fmt.Errorf("%s: the reconciler's generated kustomization is not where it is expected", t.Path)
		}
		return out, opts, err
	}
	return b, generated
}

// Parent is the target whose reconciler applied t's own reconciler object
// (the flux-system Kustomization that applies a cluster directory's
// Kustomizations, an app of apps), among all, on the same cluster and
// repository: its index in all, false when there is not exactly one.
func Parent(t Target, all []Target) (int, bool) {
	f := t.Found
	if f == nil {
		return -1, false
	}
	obj := f.Flux
	if obj == nil {
		obj = f.Application
	}
	if obj == nil {
		return -1, false
	}
	var out []int
	for i, p := range all {
		pf := p.Found
		if pf == nil || pf.Object == f.Object || pf.On != f.On || !strings.EqualFold(p.Repo, t.Repo) || !pf.Tracking.Owns(obj) {
			continue
		}
		out = append(out, i)
	}
	if len(out) != 1 {
		return -1, false
	}
	return out[0], true
}

// Sources are where t's reconciler takes each object it applies from in
// tree: by "Kind/namespace/name", the file; nil when it does not render.
// A write-back finds there the manifest of an object it applies (another
// reconciler object, a variables ConfigMap) among copies of one name.
func Sources(ctx context.Context, r *render.Renderer, tree *render.Tree, t Target) map[string]string {
	f := t.Found
	rt, opts, absent, err := targetTree(t, tree)
	if err != nil || absent {
		return nil
	}
	res, err := r.RenderWith(ctx, rt, []string{t.Path}, opts)
	if err != nil {
		return nil
	}
	o := res.Overlays[0]
	objs, err := o.Objects()
	if err != nil || len(o.Origins) != len(objs) {
		return nil
	}
	out := map[string]string{}
	for i, obj := range objs {
		if p := o.Origins[i].Path; p != "" {
			ns := obj.GetNamespace()
			if ns == "" && f != nil {
				ns = f.DestinationNamespace
			}
			out[obj.GetKind()+"/"+ns+"/"+obj.GetName()] = p
		}
	}
	return out
}

// WriteBackVariables are a Flux target's postBuild variables as the
// write-back needs them: where each is set and how the reconciler
// substitutes them; nil for a target whose reconciler substitutes none, and
// ok false when the variables could not be read (its drift is then not
// written back).
func WriteBackVariables(t Target, vars Vars) (v *prgen.Variables, ok bool) {
	f := t.Found
	if f == nil || f.Flux == nil {
		return nil, true
	}
	ks := f.Flux
	if _, has, _ := unstructured.NestedMap(ks.Object, "spec", "postBuild"); !has {
		return nil, true
	}
	if vars.Skip {
		return nil, false
	}
	v = &prgen.Variables{
		Values: vars.Values, Secret: map[string]bool{}, Inline: map[string]bool{},
		Kustomization: ks.GetNamespace() + "/" + ks.GetName(),
		Substitute: func(objs []*unstructured.Unstructured, values map[string]string) ([]*unstructured.Unstructured, error) {
			fv := vars.FluxVariables
			fv.Values = values
			return prepare.FluxFinish(objs, ks, fv)
		},
	}
	for _, n := range vars.secretNames {
		v.Secret[n] = true
	}
	inline, _, _ := unstructured.NestedStringMap(ks.Object, "spec", "postBuild", "substitute")
	for n := range inline {
		v.Inline[n] = true
	}
	from, _, _ := unstructured.NestedSlice(ks.Object, "spec", "postBuild", "substituteFrom")
	for _, s := range from {
		m, _ := s.(map[string]any)
		if kind, _ := m["kind"].(string); kind == "ConfigMap" {
			name, _ := m["name"].(string)
			v.ConfigMaps = append(v.ConfigMaps, ks.GetNamespace()+"/"+name)
		}
	}
	return v, true
}

// Applier is the service account a found reconciler object applies as
// (namespace, name): a Flux Kustomization's spec.serviceAccountName,
// kustomize-controller's own, or Argo CD's application controller in
// argoNamespace; empty when no reconciler object was found.
func Applier(f *discover.Found, argoNamespace string) (namespace, name string) {
	switch {
	case f == nil:
		return "", ""
	case f.Reconciler == discover.ReconcilerArgoCD:
		if argoNamespace == "" {
			argoNamespace = "argocd"
		}
		return argoNamespace, "argocd-application-controller"
	case f.ServiceAccount != "":
		return f.Namespace, f.ServiceAccount
	}
	return "flux-system", "kustomize-controller"
}
