// Package review is the pull-request flow's judgement: given a pull
// request's trees, its targets, its clusters and its labels, it renders what
// each affected target applies at base and head, reads what the cluster
// holds within the target's scope, compares them, and decides each target's
// check run. It knows nothing of GitHub or HTTP: its caller reads the pull
// request and publishes what it returns.
package review

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/admission"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/drift/scope"
	"github.com/driftback/driftback/drift/syncfail"
	"github.com/driftback/driftback/reconcile"
	"github.com/driftback/driftback/reconcile/charts"
	"github.com/driftback/driftback/reconcile/hide"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/render/removal"
	"github.com/driftback/driftback/report"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Reviewer reviews pull requests.
type Reviewer struct {
	Renderer *render.Renderer
	// Cluster connects to a named cluster (once, the caller keeps it).
	Cluster func(name string) Cluster
	// Kube is the controller-runtime client of a cluster, for Flux's
	// postBuild variables.
	Kube reconcile.Kube
	// Capabilities reads a cluster's version and APIs, which its Helm
	// charts are rendered for.
	Capabilities reconcile.CapabilitiesOf
	// Charts fetches the charts that are not in a repository; nil
	// fetches none.
	Charts *reconcile.Charts
	Log    *slog.Logger
	// Rendered, when set, is told how long each render took.
	Rendered func(time.Duration)
	// ArgoCDNamespace is Argo CD's own namespace on a cluster, where the
	// AppProjects of Applications in other namespaces are; nil is "argocd".
	ArgoCDNamespace func(cluster string) string
	// PodSecurity is a cluster's PodSecurity admission configuration; nil
	// is Kubernetes' default.
	PodSecurity func(cluster string) admission.PodSecurity
}

// policies keeps the admission policies compiled between reviews.
var policies = admission.NewPolicies()

// Cluster is one cluster as a review reads it.
type Cluster struct {
	// Reader reads the cluster; Err says why there is none.
	Reader *livestate.ClusterReader
	Err    error
	// DryRun is set in dry-run mode: the API server says what applying
	// would change.
	DryRun *livestate.ServerDryRun
	// Cache, when set, answers what it holds without a request (the drift
	// loop's watch caches, where this replica runs it).
	Cache object.LiveReader
}

// Input is one pull request, as the review needs it.
type Input struct {
	// Targets are the repository's targets (globs expanded); Unrenderable
	// its discovered sources driftback does not render; Problems what
	// reading them found.
	Targets      []targets.Target
	Unrenderable []*discover.Found
	Problems     []string
	// Base and Head are the pull request's trees, Changed the paths that
	// differ; Scope is the tip of the branch it merges into (Branch), whose
	// render bounds what may be read from a cluster.
	Base, Head, Scope *render.Tree
	// Tip is the base branch's tip when Base is the merge base (the pull
	// request conflicts, or its test merge is not there); nil otherwise.
	Tip     *render.Tree
	Changed []string
	Branch  string
	// DefaultBranch is the repository's: the branch a target that names
	// none follows.
	DefaultBranch string
	// Fork says the head comes from another repository: live data is shown
	// only where the target allows it or ForceLive (a writer approved the
	// commit).
	Fork, ForceLive bool
	// Labels are the pull request's labels, acknowledgements only from writers.
	Labels map[string]bool
	// History analyses what restoring earlier state does not restore,
	// reading within the target's scope; nil skips it. Reverts are the pull
	// request's revert commits.
	History func(context.Context, *drift.Target, object.LiveReader, *scope.Scope) error
	Reverts []string
}

// Review compares the targets a pull request affects: the report for its
// comment, and one check per target of in.Targets, in their order (an
// unaffected target's says so).
func (r *Reviewer) Review(ctx context.Context, in Input) (*drift.Report, []CheckResult) {
	rep := &drift.Report{Targets: []drift.Target{}}
	checks := make([]CheckResult, len(in.Targets))
	unrenderable := in.Unrenderable
	var work []*targetWork
	var at []int
	trust := r.Charts.TrustIn(in.Scope)
	for i, t := range in.Targets {
		if why := cmp.Or(reconcile.NotRenderedAt(t.Build(), in.Head), reconcile.NotRenderedAt(t.Build(), in.Base)); why != "" {
			dup := *t.Found
			dup.NotRendered = why
			unrenderable = append(unrenderable, &dup)
			checks[i] = CheckResult{Name: checkName(t), Conclusion: "success", Unaffected: true}
			continue
		}
		if !Affects(t, in.Branch, in.DefaultBranch, in.Base, in.Head, in.Changed) {
			checks[i] = CheckResult{Name: checkName(t), Conclusion: "success", Unaffected: true}
			continue
		}
		work = append(work, r.render(ctx, t, in, trust))
		at = append(at, i)
	}
	rep.Errors, rep.NotRendered = in.Problems, targets.NotRendered(targets.Touched(unrenderable, in.Changed))
	readers := r.snapshots(ctx, work)
	for j, w := range work {
		var target drift.Target
		var check CheckResult
		if err := recovered("comparing the target", func() {
			target, check = r.compareTarget(ctx, w, readers[w.t.Cluster], in.Labels)
		}); err != nil {
			r.Log.Error("a target failed", "target", w.t.Name, "err", hide.In(err.Error(), w.hidden))
			target, check = comparisonFailed(w, err)
		}
		rep.Targets = append(rep.Targets, target)
		check.Advisory = w.t.Unnamed
		checks[at[j]] = check
	}
	return rep, checks
}

// render renders one affected target at base and head, and at the tip of
// its branch for its scope when live data may be shown; its charts come
// from the repositories trust allows.
func (r *Reviewer) render(ctx context.Context, t targets.Target, in Input, trust *charts.Trust) *targetWork {
	live := !in.Fork || t.Policy.ForkLive || in.ForceLive
	var w *targetWork
	var vars reconcile.Vars
	if err := recovered("rendering the target", func() {
		vars = reconcile.Variables(ctx, t.Build(), live, r.Kube)
		vars.Helm, vars.HelmNote = reconcile.HelmCapabilities(ctx, t.Build(), live, r.Capabilities)
		vars.Charts = r.Charts.Access(t.Build(), trust, live, r.Kube)
		var defaults []*unstructured.Unstructured
		var sc *scope.Scope
		if live {
			defaults, sc, vars.Charts = r.renderDefaults(ctx, t, in.Scope, vars)
		}
		w = r.renderTarget(ctx, t, in.Tip, in.Base, in.Head, vars)
		w.live, w.defaults, w.scope = live, defaults, sc
	}); err != nil {
		r.Log.Error("a target failed", "target", t.Name, "err", hide.In(err.Error(), vars.Hidden))
		w = &targetWork{t: t, in: drift.Input{Path: t.Path}, Problems: []string{err.Error()}, hidden: vars.Hidden}
	}
	w.history, w.reverts = in.History, in.Reverts
	return w
}

func (r *Reviewer) rendered(d time.Duration) {
	if r.Rendered != nil {
		r.Rendered(d)
	}
}

// Failing are the targets whose checks fail on dangers, for the comment's
// way to accept them.
func Failing(checks []CheckResult) []report.Failing {
	var out []report.Failing
	for _, c := range checks {
		if c.Failing != nil {
			out = append(out, *c.Failing)
		}
	}
	return out
}

// TooLarge is the aggregate check of a pull request whose commit is too
// large to compare: it fails, and says so.
func TooLarge(cause *render.TooLargeError) CheckResult {
	return CheckResult{Name: AggregateCheckName, Conclusion: "failure", Title: "Too large to compare", Summary: report.TooLargeSummary(cause.Error())}
}

// CheckResult is one target's check run.
type CheckResult struct {
	Name       string
	Conclusion string // success, failure or neutral
	Title      string
	Summary    string
	Text       string
	// Failing is set when the check fails on dangers: the comment says how
	// to accept them.
	Failing *report.Failing
	// Unaffected targets get no check run of their own: the aggregate
	// counts them.
	Unaffected bool
	// Advisory checks are of a target whose repository app.yml does not
	// name (a reconciler object chose it): their failure never fails the
	// aggregate check.
	Advisory bool
}

// AggregateCheckName is the check run that sums up a pull request for every
// target: the one to require in branch protection. Its conclusion is the
// worst of the affected targets' own check runs; an advisory target's
// failure counts as neutral.
const AggregateCheckName = "driftback"

// Aggregate is the check that sums up a pull request's checks.
func Aggregate(checks []CheckResult) CheckResult {
	rank := map[string]int{"success": 0, "neutral": 1, "failure": 2}
	agg := CheckResult{Name: AggregateCheckName, Conclusion: "success"}
	var rows []report.CheckRow
	unaffected, failing, neutral := 0, 0, 0
	for _, c := range checks {
		if c.Unaffected {
			unaffected++
			continue
		}
		rows = append(rows, report.CheckRow{Target: strings.TrimPrefix(c.Name, "driftback / "), Conclusion: c.Conclusion, Title: c.Title, Advisory: c.Advisory})
		conclusion := c.Conclusion
		if c.Advisory && conclusion == "failure" {
			// Whoever made the reconciler object chose the repository: its
			// target cannot fail, or block, the repository's pull requests.
			conclusion = "neutral"
		}
		switch conclusion {
		case "failure":
			failing++
		case "neutral":
			neutral++
		}
		if rank[conclusion] > rank[agg.Conclusion] {
			agg.Conclusion = conclusion
		}
	}
	agg.Title = report.AggregateTitle(len(rows), len(checks), failing, neutral)
	agg.Summary = report.AggregateSummary(rows, unaffected)
	return agg
}

// AnyDrafts says whether a target compares draft pull requests.
func AnyDrafts(ts []targets.Target) bool {
	for _, t := range ts {
		if t.Policy.Drafts {
			return true
		}
	}
	return false
}

func checkName(t targets.Target) string { return targetCheckName(t.Name) }

// targetCheckName is the check run of the target named name.
func targetCheckName(name string) string { return "driftback / " + name }

// targetWork is one affected target of a pull request, rendered.
type targetWork struct {
	t        targets.Target
	in       drift.Input
	Problems []string // render problems: nothing is compared
	// live says live cluster data may be shown (not a fork, or approved).
	live bool
	// ignore are ignore rules the build adds (Flux's IfNotPresent objects).
	ignore []object.IgnoreRule
	// notes say what the reconciler does that changes what merging means.
	notes []string
	// fails is the reconciler object whose build fails at all, and why
	// ("" when it does not).
	failsOn object.Ref
	fails   string
	// releaseFails are the head's releases helm-controller fails, by
	// HelmRelease ("Kind/namespace/name").
	releaseFails map[string]string
	// hooks are the Argo CD hooks of the last build: run at sync, not compared.
	Hooks []string
	// hidden are values substituted from Secrets, never shown.
	hidden []string
	// history analyses what restoring earlier state does not restore;
	// nil skips it.
	history func(ctx context.Context, t *drift.Target, live object.LiveReader, sc *scope.Scope) error
	// reverts are the pull request's revert commits.
	reverts []string
	// secretObjects are the objects (by kind and name) whose Git source
	// uses a variable from a Secret: none of their values is shown.
	SecretObjects map[string]hide.AsWritten
	// gitOnly are, of those, the fields rendered from a Secret's
	// stand-ins, compared Git against Git.
	gitOnly map[string][]fieldpath.Path
	// defaults is the default branch's render of the target, which bounds
	// its scope; scope is set when the cluster is read.
	defaults []*unstructured.Unstructured
	scope    *scope.Scope
	// base and head are the trees compared: they name the change of Git
	// that removes a pruned object.
	base, head *render.Tree
}

// renderDefaults renders a target at the tip of the branch it follows, for
// its scope. A failure leaves the scope to app.yml alone: it fails closed.
// The chart reads of the pull request's own renders (access) go through
// that scope: the namespaces it covers, what the branch's render read
// itself (a HelmRepository's credentials in another namespace), and
// source-controller's repositories anywhere (an address, no secret); the
// scope is nil, and the access reads only those, when the cluster cannot
// be read.
func (r *Reviewer) renderDefaults(ctx context.Context, t targets.Target, tree *render.Tree, vars reconcile.Vars) ([]*unstructured.Unstructured, *scope.Scope, *reconcile.ChartAccess) {
	access := vars.Charts
	var reads *charts.Reads
	if access != nil && access.Live != nil {
		reads = charts.NewReads(access.Live)
		own := *access
		own.Live = reads
		vars.Charts = &own
	}
	b := reconcile.Build(ctx, r.Renderer, tree, t.Build(), vars)
	var defaults []*unstructured.Unstructured
	if len(b.Problems) > 0 {
		r.Log.Warn("the target's branch does not render; its scope is app.yml's alone", "target", t.Name, "err", hide.In(strings.Join(b.Problems, "; "), vars.Hidden))
	} else {
		defaults = b.Objects
	}
	if access == nil || access.Live == nil {
		return defaults, nil, access
	}
	scoped := *access
	sc := r.scopeEarly(ctx, t, defaults)
	scoped.Live = charts.NewScoped(access.Live, func(kind, namespace, name string) bool {
		return (sc != nil && namespace != "" && sc.CoversNamespace(namespace)) || reads.Has(kind, namespace, name) || charts.SourceKind(kind)
	})
	return defaults, sc, &scoped
}

// scopeEarly is t's scope, before its cluster's snapshot is read, for the
// reads its render makes; nil (nothing read) when the cluster cannot be
// read.
func (r *Reviewer) scopeEarly(ctx context.Context, t targets.Target, defaults []*unstructured.Unstructured) *scope.Scope {
	if r.Cluster == nil || t.Cluster == "" {
		return nil
	}
	conn := r.Cluster(t.Cluster)
	if conn.Err != nil || conn.Reader == nil {
		return nil
	}
	_, ns := reconcile.ReconcilerOptions(t.Build())
	placed, err := object.Place(ctx, conn.Reader, defaults, ns)
	if err != nil {
		return nil
	}
	sc, err := scopeOf(ctx, conn.Reader, &targetWork{t: t, defaults: placed})
	if err != nil {
		return nil
	}
	return sc
}

// scopeOf is what a pull request may read from the cluster for a target:
// what the default branch renders (of it, what the Kustomization's service
// account may apply), widened by app.yml.
func scopeOf(ctx context.Context, live object.LiveReader, w *targetWork) (*scope.Scope, error) {
	scope, err := scope.Of(ctx, live, w.defaults)
	if err != nil {
		return nil, err
	}
	if f := w.t.Found; f != nil && f.ServiceAccount != "" {
		if scope, err = applicableBy(ctx, live, scope, f.Namespace, f.ServiceAccount, w.defaults); err != nil {
			return nil, err
		}
	}
	if err := scope.Widen(w.t.Scope.Namespaces, w.t.Scope.ClusterKinds); err != nil {
		return nil, err
	}
	return scope, nil
}

// renderTarget renders one target at base and head.
func (r *Reviewer) renderTarget(ctx context.Context, t targets.Target, tip, base, head *render.Tree, vars reconcile.Vars) *targetWork {
	w := &targetWork{t: t, in: drift.Input{Path: t.Path}, notes: reconcile.Notes(t.Build(), vars), hidden: vars.Hidden, base: base, head: head}
	w.failsOn, w.fails = reconcile.BuildFailure(t.Build(), vars)
	var releases []reconcile.Release
	objects := func(tree *render.Tree) []*unstructured.Unstructured {
		start := time.Now()
		b := reconcile.Build(ctx, r.Renderer, tree, t.Build(), vars)
		releases = b.Releases
		if !b.Absent {
			r.rendered(time.Since(start))
		}
		w.Problems = append(w.Problems, b.Problems...)
		w.hidden = hide.With(w.hidden, b.Hidden)
		w.Hooks = b.Hooks
		for k, v := range b.SecretObjects {
			if w.SecretObjects == nil {
				w.SecretObjects = map[string]hide.AsWritten{}
			}
			w.SecretObjects[k] = v
		}
		for k, v := range b.GitOnly {
			if w.gitOnly == nil {
				w.gitOnly = map[string][]fieldpath.Path{}
			}
			w.gitOnly[k] = append(w.gitOnly[k], v...)
		}
		return b.Objects
	}
	// An overlay new in this pull request has an empty base: everything in it
	// is a change of the pull request, not drift.
	var atTip []*unstructured.Unstructured
	if tip != nil {
		// Compared from a merge base: what the base branch gained since
		// is not the pull request's to prune.
		b := reconcile.Build(ctx, r.Renderer, tip, t.Build(), vars)
		w.hidden = hide.With(w.hidden, b.Hidden)
		if len(b.Problems) == 0 {
			atTip = b.Objects
		} else {
			w.in.TipUnknown = hide.In(b.Problems[0], w.hidden)
		}
	}
	w.in.Base, w.in.HasBase = objects(base), true
	w.in.Newer = drift.NewerThan(atTip, w.in.Base)
	baseReleases := releases
	w.in.Head = objects(head)
	w.notes = append(w.notes, reconcile.ReleaseNotes(baseReleases, releases)...)
	w.releaseFails = reconcile.ReleaseFailures(releases)
	if len(w.Hooks) > 0 {
		w.notes = append(w.notes, reconcile.HooksNote(w.Hooks))
	}
	if t.Found != nil && t.Found.Flux != nil {
		w.ignore = reconcile.FluxIfNotPresent(w.in.Head)
	}
	return w
}

// Affects says whether a pull request into branch can change what a
// target applies: only one into the branch the target follows (the
// repository's default branch when it names none). A pull request into
// any other branch changes nothing the reconciler applies, and must not
// have its base branch, which its author may have pushed, decide what is
// read from the cluster.
func Affects(t targets.Target, branch, defaultBranch string, base, head *render.Tree, changed []string) bool {
	follows := t.Branch
	if follows == "" {
		follows = defaultBranch
	}
	if follows != "" && branch != "" && follows != branch {
		return false
	}
	return reconcile.Affects(t.Build(), base, head, changed)
}

// clusterRead is what one cluster gives the targets of a pull request: a
// snapshot of their live objects, or why there is none.
type clusterRead struct {
	reader object.LiveReader
	err    string
}

// snapshots reads, per cluster, the live objects of every target of the pull
// request that may show live data, planned as one set of reads per cluster.
func (r *Reviewer) snapshots(ctx context.Context, work []*targetWork) map[string]*clusterRead {
	byCluster := map[string][]*targetWork{}
	for _, w := range work {
		if w.live && w.t.Cluster != "" && len(w.Problems) == 0 {
			byCluster[w.t.Cluster] = append(byCluster[w.t.Cluster], w)
		}
	}
	out := map[string]*clusterRead{}
	for name, ws := range byCluster {
		if err := recovered("reading the cluster", func() { out[name] = r.snapshot(ctx, name, ws) }); err != nil {
			out[name] = &clusterRead{err: fmt.Sprintf("cluster %s could not be read: %v", name, err)}
		}
	}
	return out
}

// snapshot reads one cluster's live objects for the targets of a pull
// request on it, each within its scope.
func (r *Reviewer) snapshot(ctx context.Context, name string, ws []*targetWork) *clusterRead {
	conn := r.Cluster(name)
	if conn.Err != nil {
		return &clusterRead{err: fmt.Sprintf("cluster %s: %v", name, conn.Err)}
	}
	// Only what each target's scope covers is read, with every object
	// where the reconciler puts it, as this cluster's kinds say.
	var all []*unstructured.Unstructured
	for _, w := range ws {
		_, ns := reconcile.ReconcilerOptions(w.t.Build())
		for _, objs := range []*[]*unstructured.Unstructured{&w.defaults, &w.in.Base, &w.in.Head} {
			placed, err := object.Place(ctx, conn.Reader, *objs, ns)
			if err != nil {
				return &clusterRead{err: fmt.Sprintf("cluster %s could not be read: %v", name, err)}
			}
			*objs = placed
		}
		if w.scope == nil {
			var err error
			if w.scope, err = scopeOf(ctx, conn.Reader, w); err != nil {
				return &clusterRead{err: fmt.Sprintf("cluster %s could not be read: %v", name, err)}
			}
		}
		in, _, err := w.scope.Split(ctx, conn.Reader, append(append([]*unstructured.Unstructured{}, w.in.Base...), w.in.Head...))
		if err != nil {
			return &clusterRead{err: fmt.Sprintf("cluster %s could not be read: %v", name, err)}
		}
		all = append(all, in...)
	}
	// The drift loop's caches, where this replica runs it, answer what
	// they hold without a request; the rest is read from the cluster.
	var base object.LiveReader = conn.Reader
	if conn.Cache != nil {
		base = conn.Cache
	}
	snap, err := livestate.NewSnapshot(ctx, base, all)
	if err != nil {
		return &clusterRead{err: fmt.Sprintf("cluster %s could not be read: %v", name, err)}
	}
	return &clusterRead{reader: snap}
}

// compareTarget compares one rendered target with its cluster's snapshot
// (nil when live data may not be shown) and decides its check run.
func (r *Reviewer) compareTarget(ctx context.Context, w *targetWork, read *clusterRead, labels map[string]bool) (result drift.Target, check CheckResult) {
	t, in, renderProblems := w.t, w.in, w.Problems
	check = CheckResult{Name: checkName(t)}
	if len(renderProblems) > 0 {
		check.Conclusion, check.Title = "failure", "The overlay does not render"
		check.Summary = report.RenderProblemsSummary(renderProblems)
		target := drift.Target{Name: t.Name, Path: t.Path, Cluster: t.Cluster, Errors: renderProblems, Notes: w.notes,
			NotCompared: "it does not render"}
		hide.Substituted(&target, w.SecretObjects)
		hide.Redact(&target, w.hidden)
		hide.Redact(&check, w.hidden)
		return target, check
	}
	defer func() {
		result.Notes = w.notes
		// Values substituted from Secrets are never shown: not in the
		// comment, not in the check run.
		hide.Redact(&result, w.hidden)
		hide.Redact(&check, w.hidden)
	}()

	opts := drift.DefaultOptions()
	opts.Ignore = append(append([]object.IgnoreRule{}, t.Policy.Ignore...), w.ignore...)
	opts.NoPrune, opts.DefaultNamespace = reconcile.ReconcilerOptions(t.Build())
	opts.IgnoreManagers = append(opts.IgnoreManagers, t.Policy.IgnoreManagers...)
	opts.Tracking = t.Tracking
	opts.Scope = w.scope
	// A pull request's author may not read the cluster's Secrets: their
	// values, and what a chart renders from them, are compared Git
	// against Git, so a guess in Git reads the same whether it is the live
	// value or not.
	opts.SecretsFromGit = true
	opts.GitOnly = hide.GitOnlyFields(w.gitOnly)

	var reader object.LiveReader
	liveErr := ""
	// A fork's pull request, or a target without a cluster, is compared in
	// Git by choice; any other reason the cluster is not read is a failure.
	notAsked := !w.live || t.Cluster == ""
	switch {
	case !w.live:
		liveErr = "this pull request comes from a fork: live cluster data is shown after someone with write access reviews the head and comments /driftback diff <commit>"
	case t.Cluster == "":
		liveErr = "the target names no cluster"
	case read == nil:
		liveErr = fmt.Sprintf("cluster %s was not read", t.Cluster)
	case read.err != "":
		liveErr = read.err
	default:
		reader = read.reader
		if opts.Scope == nil {
			opts.Scope = &scope.Scope{} // fail closed: read nothing
		}
		if d := r.Cluster(t.Cluster).DryRun; d != nil {
			opts.Mode, opts.DryRun = drift.ModeDryRun, d
		}
	}
	var target *drift.Target
	var err error
	if reader != nil {
		target, err = drift.Compare(ctx, reader, in, opts)
		if err != nil {
			liveErr = fmt.Sprintf("cluster %s could not be read: %v", t.Cluster, err)
			target = nil
		}
	}
	if target == nil {
		if target, err = drift.Compare(ctx, nil, in, opts); err != nil {
			return comparisonFailed(w, err)
		}
		target.LiveError, target.LiveNotAsked = liveErr, notAsked
	}
	target.Cluster, target.Name = t.Cluster, t.Name
	target.Reverts = w.reverts
	removal.Explain(w.base, w.head, t.Path, target) // which change of Git removes each pruned object
	if reader != nil {
		argoNS := ""
		if r.ArgoCDNamespace != nil {
			argoNS = r.ArgoCDNamespace(t.Cluster)
		}
		// What the reconciler cannot apply, read within the scope.
		if err := syncfail.Mark(ctx, scope.NewReader(reader, opts.Scope), in.Head, opts.DefaultNamespace, argoNS, target); err != nil {
			target.Errors = append(target.Errors, "whether the sync fails could not be checked: "+err.Error())
		}
		// What the cluster's own admission refuses: its rules read whole,
		// the rest within the scope.
		ao := admission.Options{DefaultNamespace: opts.DefaultNamespace, GitOnly: opts.GitOnly, Policies: policies}
		if r.PodSecurity != nil {
			ao.PodSecurity = r.PodSecurity(t.Cluster)
		}
		if ns, name := reconcile.Applier(t.Build().Found, argoNS); name != "" {
			ao.Applier = admission.ServiceAccount(ns, name)
		}
		if r.Capabilities != nil {
			if caps, err := r.Capabilities(ctx, t.Cluster); err == nil && caps != nil {
				ao.KubeVersion = caps.KubeVersion // Pod Security's "latest" is the cluster's
			}
		}
		admission.Check(ctx, reader, opts.Scope, admission.Input{Base: in.Base, Head: in.Head}, ao, target)
	}
	syncfail.Objects(target, w.releaseFails)
	if w.fails != "" {
		syncfail.Build(target, w.failsOn, w.fails)
	}
	// What a revert does not restore is known from Git alone too (a
	// restored CRD comes back empty); the cluster adds what it holds.
	if w.history != nil {
		if err := w.history(ctx, target, reader, opts.Scope); err != nil {
			target.Errors = append(target.Errors, "what a restore does not bring back could not be checked: "+err.Error())
		}
	}
	// Before any summary is written from it: values substituted from
	// Secrets are never shown.
	hide.Substituted(target, w.SecretObjects)
	hide.Redact(target, w.hidden)
	judged := Judge(t.Name, target, t.Policy, labels)
	check.Conclusion, check.Title, check.Summary, check.Text, check.Failing = judged.Conclusion, judged.Title, judged.Summary, judged.Text, judged.Failing
	return *target, check
}

// Judge is the check run of a compared target under its policy. It fails
// on the dangers the policy names, unless a label someone with write
// permission applied accepts them: dangers are known from Git, so they fail
// the check whether the cluster was read or not. A comparison that is not
// whole (the cluster not read, errors, objects outside the scope) is never
// a success; a target not compared at all fails.
func Judge(name string, target *drift.Target, policy config.Policy, labels map[string]bool) CheckResult {
	check := CheckResult{Name: targetCheckName(name)}
	if target.NotCompared != "" {
		check.Conclusion, check.Title = "failure", report.NotComparedTitle(target.NotCompared)
		check.Summary = report.RenderProblemsSummary(target.Errors)
		return check
	}
	check.Summary = report.CheckSummary(target, nil)
	dangers := target.Dangers()
	var failing []string
	var failOn []drift.DangerReason
	for _, reason := range policy.FailOn {
		if dangers[reason] > 0 {
			failing = append(failing, fmt.Sprintf("%s (%d)", reason, dangers[reason]))
			failOn = append(failOn, reason)
		}
	}
	sort.Strings(failing)
	slices.Sort(failOn)
	switch {
	case len(failing) > 0 && !labels[policy.AckLabel]:
		check.Conclusion = "failure"
		check.Failing = &report.Failing{Target: name, Reasons: failing, On: failOn, AckLabel: policy.AckLabel}
		check.Title = report.DangerousTitle(failing)
		check.Summary = report.CheckSummary(target, check.Failing)
	case target.LiveError != "":
		check.Conclusion, check.Title = "neutral", "Git change only: the cluster was not read"
		check.Summary = report.GitOnlySummary(target.LiveError, check.Summary)
	case len(target.Errors) > 0:
		check.Conclusion, check.Title = "neutral", report.IncompleteTitle(len(target.Errors))
	case len(target.OutOfScope) > 0:
		check.Conclusion, check.Title = "neutral", report.OutOfScopeTitle(len(target.OutOfScope))
	case len(target.Unread) > 0:
		check.Conclusion, check.Title = "neutral", report.Plural(len(target.Unread), "object")+" not compared with the cluster: the live state does not hold their kind"
	case len(failing) > 0:
		check.Conclusion, check.Title = "success", report.AcknowledgedTitle(policy.AckLabel)
	default:
		check.Conclusion, check.Title = "success", report.CheckTitle(target)
	}
	return check
}

// comparisonFailed is a target that could not be compared at all: a
// failing check and a row that says why, whatever happened to the others.
func comparisonFailed(w *targetWork, err error) (drift.Target, CheckResult) {
	t := w.t
	check := CheckResult{Name: checkName(t), Conclusion: "failure", Title: "Comparison failed", Summary: report.ComparisonFailedSummary(err)}
	target := drift.Target{Name: t.Name, Path: t.Path, Cluster: t.Cluster, Errors: []string{err.Error()}, Notes: w.notes,
		NotCompared: "comparing it failed"}
	hide.Redact(&target, w.hidden)
	hide.Redact(&check, w.hidden)
	return target, check
}

// recovered runs one target's (or one cluster's) step of a job: a panic in
// it (a bug, or input no one foresaw) becomes an error of that step, and the
// other targets of the pull request are compared and published as usual.
func recovered(step string, f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error while %s: %v", step, r)
		}
	}()
	f()
	return nil
}
