package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-github/v60/github"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/repos"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/report"
)

// App holds what the pull-request flow needs across jobs.
type App struct {
	cfg      *config.Config
	clients  *Clients
	cache    *repos.Cache
	renderer *render.Renderer
	log      *slog.Logger
	now      func() time.Time

	mu       sync.Mutex
	clusters map[string]*clusterConn
	// kubeClients are controller-runtime clients by cluster, for libraries
	// that take one (Flux's variable loading).
	kubeClients map[string]client.Client
	// targets are app.yml's and the discovered ones.
	targets *targetSource
	// drift is woken when a default branch moves.
	drift *DriftLoop
	// metrics, when set, records render times and drift outcomes.
	metrics *Metrics
	// publishing serializes publishing per pull request: a find-or-create
	// that interleaved with another could create twice.
	publishing map[string]*sync.Mutex
	// PublishTimeout bounds the work of publishing; 0 means
	// DefaultPublishTimeout. Waits GitHub asks for are added to it.
	PublishTimeout time.Duration
	// wrapKube, when set, wraps the transport of every cluster client of the
	// pull-request flow; tests count the requests with it.
	wrapKube func(http.RoundTripper) http.RoundTripper
	// compared, when set, is given each pull request's report and checks
	// before they are published; tests read what was decided from it.
	compared func(pr int, rep *drift.Report, checks []CheckResult)
}

// publishLock returns the lock of one pull request's comment and checks.
func (a *App) publishLock(key string) *sync.Mutex {
	a.mu.Lock()
	defer a.mu.Unlock()
	l, ok := a.publishing[key]
	if !ok {
		l = &sync.Mutex{}
		a.publishing[key] = l
	}
	return l
}

type clusterConn struct {
	reader *drift.ClusterReader
	dryRun *drift.ServerDryRun
	err    error
}

// NewApp wires the pull-request flow.
func NewApp(cfg *config.Config, clients *Clients, cache *repos.Cache, log *slog.Logger) *App {
	return &App{
		cfg: cfg, clients: clients, cache: cache, log: log, now: time.Now,
		renderer:   render.New(render.DefaultOptions()),
		clusters:   map[string]*clusterConn{},
		publishing: map[string]*sync.Mutex{},
		targets:    newTargetSource(cfg, log),
	}
}

// prRequest is the work on one pull request at one head SHA.
type prRequest struct {
	installation int64
	owner, repo  string
	number       int
	sha          string
	// forceLive shows live data on a fork's pull request: a writer asked.
	forceLive bool
}

func (r prRequest) key() string { return fmt.Sprintf("%s/%s#%d", r.owner, r.repo, r.number) }

// targetsOf returns a repository's targets, from app.yml and discovery
// (glob paths not yet expanded), and the discovered sources of the
// repository that cannot be rendered.
func (a *App) targetsOf(fullName string) ([]Target, []*discover.Found) {
	return a.targets.targetsOf(fullName)
}

// processPR renders and compares the targets a pull request affects and
// publishes the comment and check runs.
func (a *App) processPR(ctx context.Context, req prRequest, log *slog.Logger) error {
	gh, err := a.clients.Client(req.installation)
	if err != nil {
		return err
	}
	pr, _, err := gh.PullRequests.Get(ctx, req.owner, req.repo, req.number)
	if err != nil {
		return fmt.Errorf("read the pull request: %w", err)
	}
	if pr.GetHead().GetSHA() != req.sha {
		log.Info("pull request moved on; a newer event reports it", "head", pr.GetHead().GetSHA())
		return nil
	}
	if pr.GetState() == "closed" {
		return nil
	}
	fullName := req.owner + "/" + req.repo
	repoInfo, _, err := gh.Repositories.Get(ctx, req.owner, req.repo)
	if err != nil {
		return fmt.Errorf("read the repository: %w", err)
	}
	token, err := a.clients.Token(ctx, req.installation)
	if err != nil {
		return fmt.Errorf("installation token: %w", err)
	}
	defaultBranch := repoInfo.GetDefaultBranch()
	baseSHA, headSHA := pr.GetBase().GetSHA(), pr.GetHead().GetSHA()
	refs := []string{"refs/heads/" + defaultBranch, fmt.Sprintf("refs/pull/%d/head", req.number)}
	if b := pr.GetBase().GetRef(); b != "" && b != defaultBranch {
		refs = append(refs, "refs/heads/"+b)
	}
	repo, release, err := a.cache.Fetch(ctx, fullName, repoInfo.GetCloneURL(), token, refs, []string{baseSHA, headSHA})
	if err != nil {
		return err
	}
	defer release()

	var problems []string
	a.targets.waitSynced(ctx, 30*time.Second)
	problems = append(problems, a.targets.problems()...)
	targets, unrenderable := a.targetsOf(fullName)
	if content, err := readDefaultBranchFile(repo, defaultBranch, config.RepoConfigPath); err == nil && content != nil {
		if targets, err = refine(targets, content); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if pr.GetDraft() && !anyDrafts(targets) {
		log.Info("draft pull request skipped")
		return nil
	}

	base, err := render.GitTree(repo, baseSHA)
	if err != nil {
		return err
	}
	head, err := render.GitTree(repo, headSHA)
	if err != nil {
		return err
	}
	changed, err := render.Changed(base, head)
	if err != nil {
		return err
	}
	targets = expandGlobs(targets, base, head)
	// What a pull request may read from the cluster is bounded by what its
	// targets render at the tip of the branch they follow, the one the pull
	// request merges into: a change cannot widen its own scope.
	baseBranch := pr.GetBase().GetRef()
	if baseBranch == "" {
		baseBranch = defaultBranch
	}
	scopeTree, err := branchTree(repo, baseBranch)
	if err != nil {
		return err
	}
	// Fail closed: a head repository that is missing (a deleted fork) or
	// different from the base is a fork.
	fork := !strings.EqualFold(pr.GetHead().GetRepo().GetFullName(), fullName)
	labels := map[string]bool{}
	for _, l := range pr.Labels {
		labels[l.GetName()] = true
	}
	if labels, err = writersLabels(ctx, gh, req, labels, targets, log); err != nil {
		return err
	}

	rep := &drift.Report{Targets: []drift.Target{}}
	// Checks keep the order of the targets.
	checks := make([]CheckResult, len(targets))
	var work []*targetWork
	var at []int
	for i, t := range targets {
		if why := cmp.Or(notRenderedAt(t, head), notRenderedAt(t, base)); why != "" {
			dup := *t.found
			dup.NotRendered = why
			unrenderable = append(unrenderable, &dup)
			checks[i] = CheckResult{Name: checkName(t), Conclusion: "success", unaffected: true}
			continue
		}
		if !affects(t, pr.GetBase().GetRef(), base, head, changed) {
			checks[i] = CheckResult{Name: checkName(t), Conclusion: "success", unaffected: true}
			continue
		}
		live := !fork || t.Policy.ForkLive || req.forceLive
		var w *targetWork
		var vars fluxVars
		if err := recovered("rendering the target", func() {
			vars = a.fluxVariables(ctx, t, live)
			w = a.renderTarget(ctx, t, base, head, vars)
			w.live = live
			if w.live {
				w.defaults = a.renderDefaults(ctx, t, scopeTree, vars)
			}
		}); err != nil {
			log.Error("a target failed", "target", t.Name, "err", hideIn(err.Error(), vars.Hidden))
			w = &targetWork{t: t, in: drift.Input{Path: t.Path}, problems: []string{err.Error()}, hidden: vars.Hidden}
		}
		work = append(work, w)
		at = append(at, i)
	}
	rep.Errors, rep.NotRendered = problems, notRendered(touched(unrenderable, changed))
	history := a.historyAnalysis(gh, req, repo, baseSHA)
	reverts := revertsOf(repo, baseSHA, headSHA, log)
	for _, w := range work {
		w.history, w.reverts = history, reverts
	}
	readers := a.snapshots(ctx, work)
	for j, w := range work {
		var target drift.Target
		var check CheckResult
		if err := recovered("comparing the target", func() {
			target, check = a.compareTarget(ctx, w, readers[w.t.Cluster], labels)
		}); err != nil {
			log.Error("a target failed", "target", w.t.Name, "err", hideIn(err.Error(), w.hidden))
			target, check = comparisonFailed(w, err)
		}
		rep.Targets = append(rep.Targets, target)
		checks[at[j]] = check
	}
	if a.compared != nil {
		a.compared(req.number, rep, checks)
	}
	lock := a.publishLock(req.key())
	lock.Lock()
	defer lock.Unlock()
	bot, err := a.clients.BotLogin(ctx)
	if err != nil {
		return err
	}
	if len(rep.Targets) == 0 && len(problems) == 0 && len(rep.NotRendered) == 0 {
		existing, err := ourComments(ctx, gh, bot, req.owner, req.repo, req.number)
		if err != nil {
			return err
		}
		if len(existing) == 0 {
			// Nothing to say and nothing said before: stay quiet.
			return a.publishChecks(ctx, gh, req, headSHA, checks)
		}
	}
	var failing []report.Failing
	for _, c := range checks {
		if c.failing != nil {
			failing = append(failing, *c.failing)
		}
	}
	parts := report.Comment(rep, report.CommentOptions{Failing: failing})
	parts[len(parts)-1] += "\n" + report.Footer(headSHA, a.now())
	// Publishing is find-or-create by marker and by check name, so a failed
	// attempt is simply repeated: what it created is found, not duplicated.
	// Once begun it is not cancelled (by shutdown or a newer commit, which
	// waits for the lock): a comment set is never left half written.
	ctx, cancel := withPublishBudget(ctx, a.publishTimeout())
	defer cancel()
	err = retryPublish(ctx, func() error {
		if err := publishComment(ctx, gh, bot, req.owner, req.repo, req.number, parts); err != nil {
			return err
		}
		return a.publishChecks(ctx, gh, req, headSHA, checks)
	})
	// A wait longer than a worker holds on: the whole publish runs again
	// once GitHub's limit allows, so the comment is not left half written.
	if wait, ok := rateLimitWait(err); ok {
		return &RetryLater{Wait: wait, Err: err}
	}
	return err
}

// DefaultPublishTimeout bounds the work of publishing one pull request's
// comment and checks, or one drift pull request; waits GitHub asks for
// (Retry-After) are added to it.
const DefaultPublishTimeout = 45 * time.Second

func (a *App) publishTimeout() time.Duration {
	if a.PublishTimeout > 0 {
		return a.PublishTimeout
	}
	return DefaultPublishTimeout
}

// retryPublish repeats an idempotent publish a few times with backoff.
func retryPublish(ctx context.Context, publish func() error) error {
	var err error
	for attempt := range 3 {
		if err = publish(); err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 2 * time.Second):
		}
	}
	return err
}

// refreshDefaultBranch fetches the default branch's new head into the cache
// and renders the repository's targets there, so the desired state is ready
// (and cached) before the next pull request or drift check needs it.
func (a *App) refreshDefaultBranch(ctx context.Context, installation int64, owner, repo, sha string, log *slog.Logger) error {
	gh, err := a.clients.Client(installation)
	if err != nil {
		return err
	}
	info, _, err := gh.Repositories.Get(ctx, owner, repo)
	if err != nil {
		return fmt.Errorf("read the repository: %w", err)
	}
	token, err := a.clients.Token(ctx, installation)
	if err != nil {
		return err
	}
	fullName := owner + "/" + repo
	r, release, err := a.cache.Fetch(ctx, fullName, info.GetCloneURL(), token, []string{"refs/heads/" + info.GetDefaultBranch()}, []string{sha})
	if err != nil {
		return err
	}
	defer release()
	tree, err := render.GitTree(r, sha)
	if err != nil {
		return err
	}
	var paths []string
	targets, _ := a.targetsOf(fullName)
	for _, t := range expandGlobs(targets, tree) {
		// Targets a reconciler builds its own way are rendered when first
		// compared.
		plain := t.found == nil || (t.found.Flux == nil && t.found.Kustomize == nil)
		if plain && tree.HasKustomization(t.Path) {
			paths = append(paths, t.Path)
		}
	}
	res, err := a.renderer.Render(ctx, tree, paths)
	if err != nil {
		return err
	}
	log.Info("desired state refreshed", "targets", len(paths), "problems", len(res.Problems()))
	if a.drift != nil {
		a.drift.Nudge(fullName)
	}
	return nil
}

// publishChecks writes the aggregate check run and one per affected target,
// after one listing of the runs already on the commit: k+1 writes for k
// affected targets, however many targets the repository has.
func (a *App) publishChecks(ctx context.Context, gh *github.Client, req prRequest, sha string, checks []CheckResult) error {
	existing, err := listCheckRuns(ctx, gh, a.cfg.GitHub.AppID, req.owner, req.repo, sha)
	if err != nil {
		return err
	}
	for _, c := range append([]CheckResult{aggregateCheck(checks)}, checks...) {
		if c.unaffected {
			continue
		}
		if err := publishCheck(ctx, gh, req.owner, req.repo, sha, existing[c.Name], c); err != nil {
			return err
		}
	}
	return nil
}

// AggregateCheckName is the check run that sums up a pull request for every
// target: the one to require in branch protection. Its conclusion is the
// worst of the affected targets' own check runs.
const AggregateCheckName = "driftback"

func aggregateCheck(checks []CheckResult) CheckResult {
	rank := map[string]int{"success": 0, "neutral": 1, "failure": 2}
	agg := CheckResult{Name: AggregateCheckName, Conclusion: "success"}
	var rows []report.CheckRow
	unaffected, failing, neutral := 0, 0, 0
	for _, c := range checks {
		if c.unaffected {
			unaffected++
			continue
		}
		rows = append(rows, report.CheckRow{Target: strings.TrimPrefix(c.Name, "driftback / "), Conclusion: c.Conclusion, Title: c.Title})
		switch c.Conclusion {
		case "failure":
			failing++
		case "neutral":
			neutral++
		}
		if rank[c.Conclusion] > rank[agg.Conclusion] {
			agg.Conclusion = c.Conclusion
		}
	}
	agg.Title = report.AggregateTitle(len(rows), len(checks), failing, neutral)
	agg.Summary = report.AggregateSummary(rows, unaffected)
	return agg
}

func anyDrafts(ts []Target) bool {
	for _, t := range ts {
		if t.Policy.Drafts {
			return true
		}
	}
	return false
}

func checkName(t Target) string { return "driftback / " + t.Name }

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// targetWork is one affected target of a pull request, rendered.
type targetWork struct {
	t        Target
	in       drift.Input
	problems []string // render problems: nothing is compared
	// live says live cluster data may be shown (not a fork, or approved).
	live bool
	// ignore are ignore rules the build adds (Flux's IfNotPresent objects).
	ignore []drift.IgnoreRule
	// notes say what the reconciler does that changes what merging means.
	notes []string
	// hooks are the Argo CD hooks of the last build: run at sync, not compared.
	hooks []string
	// hidden are values substituted from Secrets, never shown.
	hidden []string
	// history analyses what restoring earlier state does not restore;
	// nil skips it.
	history func(ctx context.Context, t *drift.Target, live drift.LiveReader) error
	// reverts are the pull request's revert commits.
	reverts []string
	// secretObjects are the objects (by kind and name) whose Git source
	// uses a variable from a Secret: none of their values is shown.
	secretObjects map[string]asWritten
	// defaults is the default branch's render of the target, which bounds
	// its scope; scope is set when the cluster is read.
	defaults []*unstructured.Unstructured
	scope    *drift.Scope
}

// renderDefaults renders a target at the tip of the branch it follows, for
// its scope. A failure leaves the scope to app.yml alone: it fails closed.
func (a *App) renderDefaults(ctx context.Context, t Target, tree *render.Tree, vars fluxVars) []*unstructured.Unstructured {
	b := buildTarget(ctx, a.renderer, tree, t, vars)
	if len(b.problems) > 0 {
		a.log.Warn("the target's branch does not render; its scope is app.yml's alone", "target", t.Name, "err", hideIn(strings.Join(b.problems, "; "), vars.Hidden))
		return nil
	}
	return b.objs
}

// scopeOf is what a pull request may read from the cluster for a target:
// what the default branch renders, widened by app.yml.
func scopeOf(ctx context.Context, live drift.LiveReader, w *targetWork) (*drift.Scope, error) {
	scope, err := drift.ScopeOf(ctx, live, w.defaults)
	if err != nil {
		return nil, err
	}
	if err := scope.Widen(w.t.Scope.Namespaces, w.t.Scope.ClusterKinds); err != nil {
		return nil, err
	}
	return scope, nil
}

// renderTarget renders one target at base and head.
func (a *App) renderTarget(ctx context.Context, t Target, base, head *render.Tree, vars fluxVars) *targetWork {
	w := &targetWork{t: t, in: drift.Input{Path: t.Path}, notes: targetNotes(t, vars), hidden: vars.Hidden}
	objects := func(tree *render.Tree) []*unstructured.Unstructured {
		start := time.Now()
		b := buildTarget(ctx, a.renderer, tree, t, vars)
		if !b.absent {
			a.metrics.render(time.Since(start))
		}
		w.problems = append(w.problems, b.problems...)
		w.hooks = b.hooks
		for k, v := range b.secretObjects {
			if w.secretObjects == nil {
				w.secretObjects = map[string]asWritten{}
			}
			w.secretObjects[k] = v
		}
		return b.objs
	}
	// An overlay new in this pull request has an empty base: everything in it
	// is a change of the pull request, not drift.
	w.in.Base, w.in.HasBase = objects(base), true
	w.in.Head = objects(head)
	if len(w.hooks) > 0 {
		w.notes = append(w.notes, hooksNote(w.hooks))
	}
	if t.found != nil && t.found.Flux != nil {
		w.ignore = fluxIfNotPresent(w.in.Head)
	}
	return w
}

// hooksNote says which Argo CD hooks the head holds: run at sync, not compared.
func hooksNote(hooks []string) string {
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

// targetNotes are what the reconciler does with a target that changes what
// merging means.
func targetNotes(t Target, vars fluxVars) []string {
	var out []string
	if f := t.found; f != nil {
		if f.Suspended != "" {
			out = append(out, f.Suspended)
		}
		out = append(out, f.Notes...)
	}
	if vars.note != "" {
		out = append(out, vars.note)
	}
	return out
}

// affects says whether a pull request into branch can change what a
// target applies.
func affects(t Target, branch string, base, head *render.Tree, changed []string) bool {
	if t.Branch != "" && branch != "" && t.Branch != branch {
		return false
	}
	if t.found != nil && !base.HasKustomization(t.Path) && !head.HasKustomization(t.Path) {
		// A plain directory Flux generates a kustomization for, or Argo CD
		// reads as manifests: any change under it counts.
		return len(touched([]*discover.Found{{Path: t.Path}}, changed)) > 0
	}
	// What the reconciler builds reads more than the kustomization says (a
	// Kustomization's or an Application's components): its closure counts.
	if b, h, ok := reconcilerTrees(t, base, head); ok {
		base, head = b, h
	}
	return len(render.Affected(base, head, []string{t.Path}, changed)) > 0
}

// reconcilerTrees are the trees a target's reconciler builds, for finding
// what a change affects; ok is false for plain kustomize or when either
// cannot be built (the plain trees then decide).
func reconcilerTrees(t Target, base, head *render.Tree) (*render.Tree, *render.Tree, bool) {
	f := t.found
	build := func(tree *render.Tree) (*render.Tree, error) {
		switch {
		case !tree.HasKustomization(t.Path):
			return tree, nil
		case f.Flux != nil:
			return render.FluxTree(tree, t.Path, f.Flux)
		default:
			return render.ArgoCDTree(tree, t.Path, argoOptions(f.Kustomize))
		}
	}
	if f == nil || (f.Flux == nil && f.Kustomize == nil) {
		return nil, nil, false
	}
	b, err := build(base)
	if err != nil {
		return nil, nil, false
	}
	h, err := build(head)
	if err != nil {
		return nil, nil, false
	}
	return b, h, true
}

// touched are the sources with a changed file under their path.
func touched(fs []*discover.Found, changed []string) []*discover.Found {
	var out []*discover.Found
	for _, f := range fs {
		for _, c := range changed {
			if f.Path == "." || f.Path == "" || c == f.Path || strings.HasPrefix(c, f.Path+"/") {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// clusterRead is what one cluster gives the targets of a pull request: a
// snapshot of their live objects, or why there is none.
type clusterRead struct {
	reader drift.LiveReader
	err    string
}

// snapshots reads, per cluster, the live objects of every target of the pull
// request that may show live data, planned as one set of reads per cluster.
func (a *App) snapshots(ctx context.Context, work []*targetWork) map[string]*clusterRead {
	byCluster := map[string][]*targetWork{}
	for _, w := range work {
		if w.live && w.t.Cluster != "" && len(w.problems) == 0 {
			byCluster[w.t.Cluster] = append(byCluster[w.t.Cluster], w)
		}
	}
	out := map[string]*clusterRead{}
	for name, ws := range byCluster {
		if err := recovered("reading the cluster", func() { out[name] = a.snapshot(ctx, name, ws) }); err != nil {
			out[name] = &clusterRead{err: fmt.Sprintf("cluster %s could not be read: %v", name, err)}
		}
	}
	return out
}

// snapshot reads one cluster's live objects for the targets of a pull
// request on it, each within its scope.
func (a *App) snapshot(ctx context.Context, name string, ws []*targetWork) *clusterRead {
	conn := a.cluster(name)
	if conn.err != nil {
		return &clusterRead{err: fmt.Sprintf("cluster %s: %v", name, conn.err)}
	}
	// Only what each target's scope covers is read, with every object
	// where the reconciler puts it, as this cluster's kinds say.
	var all []*unstructured.Unstructured
	for _, w := range ws {
		_, ns := reconcilerOptions(w.t)
		for _, objs := range []*[]*unstructured.Unstructured{&w.defaults, &w.in.Base, &w.in.Head} {
			placed, err := drift.Place(ctx, conn.reader, *objs, ns)
			if err != nil {
				return &clusterRead{err: fmt.Sprintf("cluster %s could not be read: %v", name, err)}
			}
			*objs = placed
		}
		var err error
		if w.scope, err = scopeOf(ctx, conn.reader, w); err != nil {
			return &clusterRead{err: fmt.Sprintf("cluster %s could not be read: %v", name, err)}
		}
		in, _, err := w.scope.Split(ctx, conn.reader, append(append([]*unstructured.Unstructured{}, w.in.Base...), w.in.Head...))
		if err != nil {
			return &clusterRead{err: fmt.Sprintf("cluster %s could not be read: %v", name, err)}
		}
		all = append(all, in...)
	}
	// The drift loop's caches, where this replica runs it, answer what
	// they hold without a request; the rest is read from the cluster.
	var base drift.LiveReader = conn.reader
	if w := a.drift.Watcher(name); w != nil && a.cfg.Clusters[name].Mode != drift.ModeDryRun {
		base = w
	}
	snap, err := drift.NewSnapshot(ctx, base, all)
	if err != nil {
		return &clusterRead{err: fmt.Sprintf("cluster %s could not be read: %v", name, err)}
	}
	return &clusterRead{reader: snap}
}

// compareTarget compares one rendered target with its cluster's snapshot
// (nil when live data may not be shown) and decides its check run.
func (a *App) compareTarget(ctx context.Context, w *targetWork, read *clusterRead, labels map[string]bool) (result drift.Target, check CheckResult) {
	t, in, renderProblems := w.t, w.in, w.problems
	check = CheckResult{Name: checkName(t)}
	if len(renderProblems) > 0 {
		check.Conclusion, check.Title = "failure", "The overlay does not render"
		check.Summary = report.RenderProblemsSummary(renderProblems)
		target := drift.Target{Name: t.Name, Path: t.Path, Cluster: t.Cluster, Errors: renderProblems, Notes: w.notes,
			NotCompared: "it does not render"}
		hideSubstituted(&target, w.secretObjects)
		redact(&target, w.hidden)
		redact(&check, w.hidden)
		return target, check
	}
	defer func() {
		result.Notes = w.notes
		// Values substituted from Secrets are never shown: not in the
		// comment, not in the check run.
		redact(&result, w.hidden)
		redact(&check, w.hidden)
	}()

	opts := drift.DefaultOptions()
	opts.Ignore = append(append([]drift.IgnoreRule{}, t.Policy.Ignore...), w.ignore...)
	opts.NoPrune, opts.DefaultNamespace = reconcilerOptions(t)
	opts.IgnoreManagers = append(opts.IgnoreManagers, t.Policy.IgnoreManagers...)
	opts.Tracking = t.Tracking
	opts.Scope = w.scope

	var reader drift.LiveReader
	liveErr := ""
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
			opts.Scope = &drift.Scope{} // fail closed: read nothing
		}
		if a.cfg.Clusters[t.Cluster].Mode == drift.ModeDryRun {
			opts.Mode, opts.DryRun = drift.ModeDryRun, a.cluster(t.Cluster).dryRun
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
		target.LiveError = liveErr
	}
	target.Cluster, target.Name = t.Cluster, t.Name
	target.Reverts = w.reverts
	if reader != nil && target.LiveError == "" && w.history != nil {
		if err := w.history(ctx, target, reader); err != nil {
			target.Errors = append(target.Errors, "what a restore does not bring back could not be checked: "+err.Error())
		}
	}
	// Before any summary is written from it: values substituted from
	// Secrets are never shown.
	hideSubstituted(target, w.secretObjects)
	redact(target, w.hidden)
	check.Summary, check.Text = report.CheckSummary(target), ""

	dangers := target.Dangers()
	var failing []string
	for _, reason := range t.Policy.FailOn {
		if dangers[reason] > 0 {
			failing = append(failing, fmt.Sprintf("%s (%d)", reason, dangers[reason]))
		}
	}
	sort.Strings(failing)
	// Dangers are known from Git, so they fail the check whether the cluster
	// was read or not; a comparison that is not whole is never a success.
	switch {
	case len(failing) > 0 && !labels[t.Policy.AckLabel]:
		check.Conclusion = "failure"
		check.failing = &report.Failing{Target: t.Name, Reasons: failing, AckLabel: t.Policy.AckLabel}
		check.Title = report.DangerousTitle(failing)
		check.Summary = report.DangerousSummary(t.Name, failing, t.Policy.AckLabel, check.Summary)
	case target.LiveError != "":
		check.Conclusion, check.Title = "neutral", "Git change only: the cluster was not read"
		check.Summary = report.GitOnlySummary(target.LiveError, check.Summary)
	case len(target.Errors) > 0:
		check.Conclusion, check.Title = "neutral", report.IncompleteTitle(len(target.Errors))
	case len(target.OutOfScope) > 0:
		check.Conclusion, check.Title = "neutral", report.OutOfScopeTitle(len(target.OutOfScope))
	case len(failing) > 0:
		check.Conclusion, check.Title = "success", report.AcknowledgedTitle(t.Policy.AckLabel)
	default:
		check.Conclusion, check.Title = "success", report.CheckTitle(target)
	}
	return *target, check
}

// writersLabels keeps, of the pull request's labels that acknowledge a
// target's dangers, those that someone with write permission applied last:
// GitHub lets the triage role label, and an acknowledgement counts only from
// someone who could merge, as a /driftback command does.
func writersLabels(ctx context.Context, gh *github.Client, req prRequest, labels map[string]bool, targets []Target, log *slog.Logger) (map[string]bool, error) {
	ack := map[string]bool{}
	for _, t := range targets {
		if labels[t.Policy.AckLabel] {
			ack[t.Policy.AckLabel] = true
		}
	}
	if len(ack) == 0 {
		return labels, nil
	}
	by := map[string]string{}
	opts := &github.ListOptions{PerPage: 100}
	for {
		events, resp, err := gh.Issues.ListIssueEvents(ctx, req.owner, req.repo, req.number, opts)
		if err != nil {
			return nil, fmt.Errorf("read who labelled the pull request: %w", err)
		}
		for _, e := range events { // oldest first: the last one counts
			if e.GetEvent() == "labeled" && ack[e.GetLabel().GetName()] {
				by[e.GetLabel().GetName()] = e.GetActor().GetLogin()
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	out := maps.Clone(labels)
	writer := map[string]bool{}
	for l := range ack {
		who := by[l]
		ok, seen := writer[who]
		if !seen && who != "" {
			perm, _, err := gh.Repositories.GetPermissionLevel(ctx, req.owner, req.repo, who)
			if err != nil {
				return nil, fmt.Errorf("read %s's permission: %w", who, err)
			}
			switch perm.GetPermission() {
			case "admin", "maintain", "write":
				ok = true
			}
			writer[who] = ok
		}
		if !ok {
			delete(out, l)
			log.Info("danger acknowledgement ignored: the label was not applied by someone with write permission", "label", l, "by", who)
		}
	}
	return out, nil
}

// comparisonFailed is a target that could not be compared at all: a
// failing check and a row that says why, whatever happened to the others.
func comparisonFailed(w *targetWork, err error) (drift.Target, CheckResult) {
	t := w.t
	check := CheckResult{Name: checkName(t), Conclusion: "failure", Title: "Comparison failed", Summary: report.ComparisonFailedSummary(err)}
	target := drift.Target{Name: t.Name, Path: t.Path, Cluster: t.Cluster, Errors: []string{err.Error()}, Notes: w.notes,
		NotCompared: "comparing it failed"}
	redact(&target, w.hidden)
	redact(&check, w.hidden)
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

// cluster connects to a named cluster once.
func (a *App) cluster(name string) *clusterConn {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.clusters[name]; ok {
		return c
	}
	c := &clusterConn{}
	cfg, err := restConfig(a.cfg.Clusters[name])
	if err == nil {
		cfg.Timeout = 30 * time.Second
		if a.wrapKube != nil {
			cfg.Wrap(a.wrapKube)
		}
		cfg.UserAgent = "driftback"
		c.reader, err = drift.NewClusterReader(cfg)
		if err == nil && a.cfg.Clusters[name].Mode == drift.ModeDryRun {
			c.dryRun, err = drift.NewServerDryRun(cfg)
		}
	}
	c.err = err
	if err == nil {
		a.clusters[name] = c // a failure is retried on the next job
	}
	return c
}

// restConfig connects to a cluster with its configured client limits.
func restConfig(c config.Cluster) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if c.InCluster {
		cfg, err = rest.InClusterConfig()
	} else {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if c.Kubeconfig != "" {
			rules.ExplicitPath = c.Kubeconfig
		}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context}).ClientConfig()
	}
	if err != nil {
		return nil, err
	}
	return drift.Configure(cfg, drift.ClientLimits{QPS: c.QPS, Burst: c.Burst}), nil
}

// branchTree is the tree at the tip of a branch.
func branchTree(repo *git.Repository, branch string) (*render.Tree, error) {
	lock := render.RepoLock(repo)
	lock.Lock()
	ref, err := repo.Reference(plumbing.NewBranchReferenceName(branch), true)
	lock.Unlock()
	if err != nil {
		return nil, fmt.Errorf("read the branch %s: %w", branch, err)
	}
	return render.GitTree(repo, ref.Hash().String())
}

// readDefaultBranchFile reads a file at the tip of the default branch; nil
// when it does not exist.
func readDefaultBranchFile(repo *git.Repository, branch, path string) ([]byte, error) {
	lock := render.RepoLock(repo)
	lock.Lock()
	ref, err := repo.Reference(plumbing.NewBranchReferenceName(branch), true)
	lock.Unlock()
	if err != nil {
		return nil, err
	}
	return readCommitFile(repo, ref.Hash().String(), path)
}

// readCommitFile reads a file at a commit; nil when it does not exist.
func readCommitFile(repo *git.Repository, sha, path string) ([]byte, error) {
	lock := render.RepoLock(repo)
	lock.Lock()
	defer lock.Unlock()
	commit, err := repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return nil, err
	}
	f, err := commit.File(path)
	if errors.Is(err, object.ErrFileNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s, err := f.Contents()
	return []byte(s), err
}

// errorComment tells the pull request that driftback failed on it.
func (a *App) errorComment(ctx context.Context, req prRequest, cause error) {
	gh, err := a.clients.Client(req.installation)
	if err != nil {
		return
	}
	body := report.ErrorComment(cause, req.sha, a.now())
	lock := a.publishLock(req.key())
	lock.Lock()
	defer lock.Unlock()
	bot, err := a.clients.BotLogin(ctx)
	if err == nil {
		err = publishComment(ctx, gh, bot, req.owner, req.repo, req.number, []string{body})
	}
	var tooLarge *render.TooLargeError
	if err == nil && errors.As(cause, &tooLarge) {
		// Nothing of the pull request was compared: the required check
		// says so, and fails, rather than waiting for a run that never comes.
		err = a.publishTooLarge(ctx, gh, req, tooLarge)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		a.log.Error("could not report the failure on the pull request", "err", err)
	}
}

// publishTooLarge sets the required check of a pull request whose commit is
// too large to compare to a failure that says so.
func (a *App) publishTooLarge(ctx context.Context, gh *github.Client, req prRequest, cause *render.TooLargeError) error {
	existing, err := listCheckRuns(ctx, gh, a.cfg.GitHub.AppID, req.owner, req.repo, req.sha)
	if err != nil {
		return err
	}
	check := CheckResult{Name: AggregateCheckName, Conclusion: "failure", Title: "Too large to compare", Summary: report.TooLargeSummary(cause.Error())}
	return publishCheck(ctx, gh, req.owner, req.repo, req.sha, existing[check.Name], check)
}
