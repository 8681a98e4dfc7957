package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-github/v60/github"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/render"
)

// DriftLoop watches each target's cluster and turns live changes that stay
// into a pull request that writes them into the target's overlay (or an
// issue, for codify: report). Everything it decides on is read again from
// GitHub and the cluster, so a restart or another replica takes over where it
// left off; what it keeps in memory is only when it first saw each change.
type DriftLoop struct {
	app      *App
	log      *slog.Logger
	renderer *render.Renderer
	// debounce is how long a burst of watch events is collected.
	debounce time.Duration
	// checks counts finished target checks, failed or not.
	checks atomic.Int64
	// beforeAct, when set, runs between deciding and acting on GitHub (tests
	// use it to stop a replica there).
	beforeAct func(context.Context, prgen.Action)

	// runs makes each cluster's runs one at a time: a lost and regained
	// Lease must not run two loops.
	runs   map[string]*sync.Mutex
	mu     sync.Mutex
	states map[string]*targetState
	wake   map[string]chan struct{} // by cluster
	// watchers are the running loops' caches, by cluster; the pull-request
	// flow reads from them what they cover.
	watchers map[string]*drift.Watcher
}

// Watcher returns the watch caches of a cluster whose loop runs in this
// replica, or nil.
func (d *DriftLoop) Watcher(cluster string) *drift.Watcher {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.watchers[cluster]
}

// targetState is what the loop remembers of one target between checks.
type targetState struct {
	// seen maps each live change to when it was first seen with its value.
	seen map[string]time.Time
	// head is the default branch's commit last read, and when.
	info   *github.Repository
	head   string
	headAt time.Time
	// refresh asks for the head to be read again (a push, set by Nudge from
	// another goroutine).
	refresh atomic.Bool
	// present are the desired objects seen live, by identity: an object
	// missing live counts as deleted only after it was seen there (one Git
	// just added may not be applied yet).
	present map[string]bool
	// decided is the key of the last drift published (or found up to date)
	// and when: the same drift is not asked of GitHub again until the
	// interval passes.
	decided   string
	decidedAt time.Time
	// fields are the fields seen in drift, and who held them since: what
	// tells a fight from a change.
	fields map[string]*fieldWatch
}

// NewDriftLoop prepares the drift loop of an App.
func NewDriftLoop(a *App, log *slog.Logger) *DriftLoop {
	return &DriftLoop{
		app: a, log: log, debounce: 250 * time.Millisecond,
		renderer: render.New(render.Options{Origins: true, Cache: render.NewCache(256 << 20)}),
		states:   map[string]*targetState{}, wake: map[string]chan struct{}{},
	}
}

func targetKey(t Target) string { return strings.ToLower(t.Repo) + " " + t.Name }

// Run watches every cluster that has targets until ctx ends. Each cluster has
// its own goroutine, so a slow or unreachable cluster delays only its own
// targets.
func (d *DriftLoop) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, c := range d.Clusters() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = d.RunCluster(ctx, c) // ends with ctx
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// Clusters are the clusters with targets whose drift the loop watches.
// A cluster with discovery is one, as are the clusters its Argo CD
// destinations map to: their targets may appear at any time.
func (d *DriftLoop) Clusters() []string {
	seen := map[string]bool{}
	var out []string
	add := func(c string) {
		if c != "" && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	for _, t := range d.app.cfg.Targets {
		if t.Policy.Codify != config.CodifyOff {
			add(t.Cluster)
		}
	}
	// Discovery may name any cluster of app.yml (an Argo CD destination
	// named after it), so with discovery every cluster has a loop.
	if len(d.app.targets.discovering()) > 0 {
		for name := range d.app.cfg.Clusters {
			add(name)
		}
	}
	sort.Strings(out)
	return out
}

// watchedOn are the targets of a cluster with drift to watch: not off, and
// not left to a reconciler that reverts live changes itself.
func watchedOn(all []Target, cluster string) []Target {
	var out []Target
	for _, t := range all {
		if t.Cluster != cluster || t.Policy.Codify == config.CodifyOff || (t.found != nil && t.found.SelfHeal) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// targetsOn are the targets whose drift the loop watches on a cluster now:
// app.yml's and the discovered ones, glob paths expanded at each
// repository's default branch. A target whose reconciler reverts live
// changes itself (Argo CD selfHeal) has no drift to propose.
func (d *DriftLoop) targetsOn(ctx context.Context, cluster string) []Target {
	all, _ := d.app.targets.targets()
	watched := watchedOn(all, cluster)
	// A path a discovered target already has is not a glob's again: the
	// two would be checked with different policies, sharing one state.
	have := map[string]bool{}
	for _, t := range watched {
		if !isGlob(t.Path) {
			have[discover.TargetKey(t.Repo, t.Path, t.Cluster)] = true
		}
	}
	var out []Target
	for _, t := range watched {
		if !isGlob(t.Path) {
			out = append(out, t)
			continue
		}
		expanded, err := d.expandGlob(ctx, t)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Error("cannot expand a target's path", "repo", t.Repo, "path", t.Path, "err", err)
			}
			continue
		}
		for _, e := range expanded {
			if !have[discover.TargetKey(e.Repo, e.Path, e.Cluster)] {
				out = append(out, e)
			}
		}
	}
	return out
}

// RunCluster watches one cluster's targets until ctx ends. Runs of one
// cluster never overlap: a lost and regained Lease waits for the previous
// run to end.
func (d *DriftLoop) RunCluster(ctx context.Context, cluster string) error {
	d.mu.Lock()
	if d.runs == nil {
		d.runs = map[string]*sync.Mutex{}
	}
	run := d.runs[cluster]
	if run == nil {
		run = &sync.Mutex{}
		d.runs[cluster] = run
	}
	if d.wake[cluster] == nil {
		d.wake[cluster] = make(chan struct{}, 1)
	}
	d.mu.Unlock()
	run.Lock()
	defer run.Unlock()
	d.clusterLoop(ctx, cluster)
	return ctx.Err()
}

// wakeAll makes every cluster's loop look again: the targets changed.
func (d *DriftLoop) wakeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ch := range d.wake {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Nudge makes the loop look at a repository's targets now: its default
// branch moved.
func (d *DriftLoop) Nudge(repo string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	all, _ := d.app.targets.targets()
	for _, t := range all {
		if !strings.EqualFold(t.Repo, repo) {
			continue
		}
		if s := d.states[targetKey(t)]; s != nil {
			s.refresh.Store(true)
		}
		if ch := d.wake[t.Cluster]; ch != nil {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

func (d *DriftLoop) clusterLoop(ctx context.Context, cluster string) {
	log := d.log.With("cluster", cluster)
	var w *drift.Watcher
	backoff := time.Second
	for w == nil {
		cfg, err := restConfig(d.app.cfg.Clusters[cluster])
		if err == nil {
			if d.app.wrapKube != nil {
				cfg.Wrap(d.app.wrapKube)
			}
			w, err = drift.NewWatcher(ctx, cfg)
		}
		if err == nil {
			break
		}
		log.Error("cannot reach the cluster; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, d.app.cfg.Server.DriftInterval)
	}
	d.mu.Lock()
	wake := d.wake[cluster]
	if d.watchers == nil {
		d.watchers = map[string]*drift.Watcher{}
	}
	d.watchers[cluster] = w
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		if d.watchers[cluster] == w {
			delete(d.watchers, cluster)
		}
		d.mu.Unlock()
	}()
	for {
		next := d.app.cfg.Server.DriftInterval
		for _, t := range d.targetsOn(ctx, cluster) {
			if ctx.Err() != nil {
				return
			}
			tlog := log.With("repo", t.Repo, "target", t.Name)
			wait, err := d.check(ctx, w, t, tlog)
			d.checks.Add(1)
			if err != nil {
				d.state(t).refresh.Store(true)
			}
			if err != nil && ctx.Err() == nil {
				d.app.metrics.failure("drift_check")
				tlog.Error("drift check failed", "err", err)
			}
			if wait > 0 && wait < next {
				next = wait
			}
		}
		timer := time.NewTimer(next)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-w.Changed():
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
		// Collect the rest of a burst of changes into one check.
		select {
		case <-ctx.Done():
			return
		case <-time.After(d.debounce):
		}
	}
}

func (d *DriftLoop) state(t Target) *targetState {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.states[targetKey(t)]
	if !ok {
		s = &targetState{seen: map[string]time.Time{}, present: map[string]bool{}}
		d.states[targetKey(t)] = s
	}
	return s
}

// headInterval bounds how stale the default branch's head may be: a push
// delivered to another replica reaches the leader this way.
const headInterval = time.Minute

// errHeadMoved says the default branch moved during a check: it is checked
// again at the new head.
var errHeadMoved = errors.New("the default branch moved")

// check looks at one target once. wait is when it wants to look again: a
// change is waiting out its quiet period.
func (d *DriftLoop) check(ctx context.Context, w *drift.Watcher, t Target, log *slog.Logger) (wait time.Duration, err error) {
	defer func() {
		// A defect on one target must not stop the loop for the others.
		if r := recover(); r != nil {
			log.Error("drift check panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			wait, err = 0, fmt.Errorf("internal error: %v", r)
		}
	}()
	// A cluster or GitHub that stops answering must not hold the loop: watches
	// are long requests, so the bound is on the check, not the client.
	ctx, cancel := context.WithTimeout(ctx, d.app.cfg.Server.JobTimeout)
	defer cancel()
	for range 3 {
		wait, err = d.checkOnce(ctx, w, t, log)
		if !errors.Is(err, errHeadMoved) {
			return wait, err
		}
		d.state(t).refresh.Store(true)
	}
	return 0, errHeadMoved
}

// readHead finds a target's installation and reads its repository and the
// default branch's head again when due: on a push, after a failed check,
// and every interval; watch events alone cost GitHub nothing until the
// drift itself changes.
func (d *DriftLoop) readHead(ctx context.Context, t Target, st *targetState, now time.Time) (*github.Client, string, error) {
	a := d.app
	owner, name, _ := strings.Cut(t.Repo, "/")
	inst, err := a.clients.InstallationOf(ctx, owner, name)
	if err != nil {
		return nil, "", err
	}
	gh, err := a.clients.Client(inst)
	if err != nil {
		return nil, "", err
	}
	token, err := a.clients.Token(ctx, inst)
	if err != nil {
		return nil, "", err
	}
	if st.refresh.Swap(false) || st.info == nil || now.Sub(st.headAt) >= min(a.cfg.Server.DriftInterval, headInterval) {
		info, _, err := gh.Repositories.Get(ctx, owner, name)
		if err != nil {
			return nil, "", fmt.Errorf("read the repository: %w", err)
		}
		defaultRef := "refs/heads/" + info.GetDefaultBranch()
		refs, err := remoteRefs(ctx, info.GetCloneURL(), token)
		if err != nil {
			return nil, "", fmt.Errorf("list the repository's branches: %w", err)
		}
		if refs[defaultRef] == "" {
			return nil, "", fmt.Errorf("the default branch %s does not exist", info.GetDefaultBranch())
		}
		st.info, st.head, st.headAt = info, refs[defaultRef], now
	}
	return gh, token, nil
}

// expandGlob expands a glob target against the default branch's head.
func (d *DriftLoop) expandGlob(ctx context.Context, t Target) ([]Target, error) {
	st := d.state(t)
	_, token, err := d.readHead(ctx, t, st, d.app.now())
	if err != nil {
		return nil, err
	}
	defaultRef := "refs/heads/" + st.info.GetDefaultBranch()
	repo, release, err := d.app.cache.Fetch(ctx, st.info.GetFullName(), st.info.GetCloneURL(), token, []string{defaultRef}, []string{st.head})
	if err != nil {
		return nil, err
	}
	defer release()
	tree, err := render.GitTree(repo, st.head)
	if err != nil {
		return nil, err
	}
	return expandGlobs([]Target{t}, tree), nil
}

func (d *DriftLoop) checkOnce(ctx context.Context, w *drift.Watcher, t Target, log *slog.Logger) (time.Duration, error) {
	a := d.app
	owner, name, _ := strings.Cut(t.Repo, "/")
	st := d.state(t)
	now := a.now()
	gh, token, err := d.readHead(ctx, t, st, now)
	if err != nil {
		return 0, err
	}
	info := st.info
	if ok, why := writeBackable(t); !ok {
		log.Debug("drift is not proposed for this target", "why", why)
		return 0, nil
	}
	if t.Branch != "" && t.Branch != info.GetDefaultBranch() {
		log.Debug("the target follows another branch than the default; its drift is not proposed", "branch", t.Branch)
		return 0, nil
	}
	defaultRef := "refs/heads/" + info.GetDefaultBranch()
	repo, release, err := a.cache.Fetch(ctx, info.GetFullName(), info.GetCloneURL(), token, []string{defaultRef}, []string{st.head})
	if err != nil {
		return 0, err
	}
	var once sync.Once
	done := func() { once.Do(release) }
	defer done()
	if content, err := readCommitFile(repo, st.head, config.RepoConfigPath); err == nil && content != nil {
		refined, err := refine([]Target{t}, content)
		if err != nil {
			return 0, err
		}
		t = refined[0]
	}
	if t.Policy.Codify == config.CodifyOff {
		return 0, nil
	}
	tree, err := render.GitTree(repo, st.head)
	if err != nil {
		return 0, err
	}
	if t.found != nil && !tree.HasKustomization(t.Path) {
		// A plain directory (Flux generates its kustomization, Argo CD reads
		// its manifests), or a source driftback does not render, which the
		// targets list, /readyz and the pull requests touching it report.
		log.Debug("drift is not proposed for a path without a kustomization")
		return 0, nil
	}
	start := time.Now()
	vars := a.fluxVariables(ctx, t, true)
	b := buildTarget(ctx, d.renderer, tree, t, vars)
	a.metrics.render(time.Since(start))
	if b.absent {
		return 0, fmt.Errorf("%s has no kustomization at %s", t.Path, shortSHA(st.head))
	}
	if len(b.problems) > 0 {
		return 0, fmt.Errorf("%s does not render at %s: %s", t.Path, shortSHA(st.head), hideIn(strings.Join(b.problems, "; "), vars.Hidden))
	}
	desired := b.objs
	kinds, namespaces, err := watchScope(ctx, w, desired)
	if err != nil {
		return 0, err
	}
	if err := w.Watch(ctx, kinds, namespaces); err != nil {
		return 0, err
	}
	if err := w.WatchMetadata(ctx, namespaces); err != nil {
		return 0, err
	}
	opts := drift.DefaultOptions()
	opts.Ignore = t.Policy.Ignore
	if t.found != nil && t.found.Flux != nil {
		opts.Ignore = append(append([]drift.IgnoreRule{}, opts.Ignore...), fluxIfNotPresent(desired)...)
	}
	opts.IgnoreManagers = append(opts.IgnoreManagers, t.Policy.IgnoreManagers...)
	opts.NoPrune, opts.DefaultNamespace = reconcilerOptions(t)
	target, err := drift.Compare(ctx, w, drift.Input{Path: t.Path, Head: desired}, opts)
	if err != nil {
		return 0, err
	}
	live := d.liveChanges(ctx, w, t, target.Drift, desired, namespaces, opts.IgnoreManagers)
	live.changes = observedDeletions(st, desired, live.changes)
	fighting, fights := d.followFields(ctx, w, st, t, target.Drift, now)
	live.changes = withoutFights(live.changes, fighting)
	a.metrics.driftFights(t.Repo, t.Name, len(fights))
	ready, wait := d.quiet(st, t, live, now)
	a.metrics.driftedObjects(t.Repo, t.Name, len(live.changes)+len(live.unmanaged))
	log.Debug("drift checked", "head", shortSHA(st.head), "drifted", len(target.Drift), "ready", len(ready.changes)+len(ready.unmanaged), "waiting", wait)
	if wait > 0 {
		// A change is still settling, maybe a new value of one already
		// proposed: act once everything has stayed, not on a half picture.
		return wait, nil
	}
	unmanaged, err := d.unmanagedObjects(ctx, w, ready.unmanaged)
	if err != nil {
		return 0, err
	}
	key := st.head + "\n" + ready.key + "\n" + fightKey(fights)
	if key == st.decided && now.Sub(st.decidedAt) < a.cfg.Server.DriftInterval {
		return wait, nil // published, or found up to date, already
	}
	plan, err := prgen.Make(ctx, prgen.Input{
		Tree: tree, Overlay: t.Path, Renderer: d.renderer, Drift: ready.changes,
		Intents: ready.intents, Unmanaged: unmanaged, Adopt: t.Policy.AdoptUnmanaged,
	})
	if err != nil {
		return 0, err
	}
	plan.Fights = fights
	// Publishing fetches into the cache itself: let go of this read first.
	done()
	p := &driftPublisher{loop: d, gh: gh, owner: owner, repo: name, info: info, token: token, t: t, head: st.head, log: log}
	// Once begun, publishing is not cut short by a lost leadership or a
	// shutdown: a branch pushed without its pull request, or a pull request
	// without its labels, is avoided.
	pctx, cancel := withPublishBudget(ctx, d.app.publishTimeout())
	defer cancel()
	switch {
	case t.Policy.Codify == config.CodifyReport:
		err = p.publishIssue(pctx, plan)
	case plan.OnlyFights():
		// Nothing to write: a drift pull request still open for a field
		// now in a fight is closed, and the fight goes in the drift issue.
		rest := *plan
		rest.Fights = nil
		if err = p.publishPull(pctx, &rest); err == nil {
			err = p.publishIssue(pctx, plan)
		}
	default:
		err = p.publishPull(pctx, plan)
	}
	if err != nil {
		return 0, err
	}
	st.decided, st.decidedAt = key, now
	return wait, nil
}

// watchScope is what a render needs watched: its kinds and namespaces.
func watchScope(ctx context.Context, w *drift.Watcher, objs []*unstructured.Unstructured) ([]schema.GroupKind, []string, error) {
	kinds, err := w.Kinds(ctx)
	if err != nil {
		return nil, nil, err
	}
	namespaced := map[schema.GroupKind]bool{}
	for _, k := range kinds {
		namespaced[k.GroupKind()] = k.Namespaced
	}
	gks := map[schema.GroupKind]bool{}
	nss := map[string]bool{}
	for _, o := range objs {
		gk := o.GroupVersionKind().GroupKind()
		gks[gk] = true
		// Who autoscales a workload is read from the caches too.
		if _, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas"); ok {
			for _, a := range drift.AutoscalerKinds {
				if _, served := namespaced[a]; served {
					gks[a] = true
				}
			}
		}
		switch {
		case gk == schema.GroupKind{Kind: "Namespace"}:
			nss[o.GetName()] = true
		case o.GetNamespace() != "":
			nss[o.GetNamespace()] = true
		case namespaced[gk]:
			nss["default"] = true
		}
	}
	var outK []schema.GroupKind
	for gk := range gks {
		outK = append(outK, gk)
	}
	sort.Slice(outK, func(i, j int) bool { return outK[i].String() < outK[j].String() })
	var outN []string
	for ns := range nss {
		outN = append(outN, ns)
	}
	sort.Strings(outN)
	return outK, outN, nil
}

// liveChanges are the changes a person made: drifted fields written by a
// manager that is neither a GitOps applier nor an ignored controller,
// objects deleted from the cluster, and objects created in the target's
// namespaces that Git does not declare.
type liveChanges struct {
	changes   []drift.Change
	unmanaged []drift.Present
	intents   map[string]string
}

func (d *DriftLoop) liveChanges(ctx context.Context, w *drift.Watcher, t Target, changes []drift.Change, desired []*unstructured.Unstructured, namespaces []string, ignore []string) liveChanges {
	notPerson := map[string]bool{}
	for _, m := range append(append([]string(nil), drift.KnownAppliers...), ignore...) {
		notPerson[m] = true
	}
	out := liveChanges{intents: map[string]string{}}
	intentOf := func(ref drift.Ref) (string, bool) {
		objs, err := w.Get(ctx, []drift.Ref{ref})
		if err != nil || objs[ref.Key()] == nil {
			return "", false
		}
		v, ok := objs[ref.Key()].GetAnnotations()[config.IntentAnnotation]
		return v, ok
	}
	for _, ch := range changes {
		if ch.Action != drift.ActionUpdate && ch.Action != drift.ActionCreate {
			continue // unchanged, or not Git's (a prune belongs to the reconciler)
		}
		ref := ch.Ref()
		intent, hasIntent := "", false
		if ch.Action != drift.ActionCreate {
			intent, hasIntent = intentOf(ref)
		}
		if t.Policy.Codify == config.CodifyAnnotated && !hasIntent {
			continue
		}
		var fields []drift.Field
		for _, f := range ch.Fields {
			if f.Manager != "" && !notPerson[f.Manager] {
				fields = append(fields, f)
			}
		}
		if ch.Action == drift.ActionUpdate && len(fields) == 0 {
			continue
		}
		ch.Fields = fields
		out.changes = append(out.changes, ch)
		if hasIntent && intent != "" {
			out.intents[ref.String()] = intent
		}
	}
	inGit := map[string]bool{}
	for _, o := range desired {
		inGit[o.GroupVersionKind().Group+"/"+o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = true
	}
	for _, p := range w.InNamespaces(namespaces) {
		m := p.Metadata
		if inGit[p.Ref().Key()] || len(m.OwnerReferences) > 0 || len(m.ManagedFields) == 0 {
			continue
		}
		if _, ok := m.Annotations["kubernetes.io/service-account.name"]; ok {
			continue // a token the control plane fills
		}
		person := true
		for _, e := range m.ManagedFields {
			if notPerson[e.Manager] {
				person = false
			}
		}
		if !person {
			continue
		}
		intent, hasIntent := m.Annotations[config.IntentAnnotation]
		if t.Policy.Codify == config.CodifyAnnotated && !hasIntent {
			continue
		}
		if intent != "" {
			out.intents[p.Ref().String()] = intent
		}
		out.unmanaged = append(out.unmanaged, p)
	}
	return out
}

// ready is what has stayed for the quiet period, with a key that names it.
type ready struct {
	changes   []drift.Change
	unmanaged []drift.Present
	intents   map[string]string
	key       string
}

// quiet keeps the live changes that have stayed, each with the same value,
// for the target's quiet period; wait is when the next one will have.
func (d *DriftLoop) quiet(st *targetState, t Target, live liveChanges, now time.Time) (ready, time.Duration) {
	seen := map[string]time.Time{}
	var wait time.Duration
	pass := func(k string) bool {
		since, ok := st.seen[k]
		if !ok {
			since = now
		}
		seen[k] = since
		left := t.Policy.QuietPeriod - now.Sub(since)
		if left > 0 {
			if wait == 0 || left < wait {
				wait = left
			}
			return false
		}
		return true
	}
	var keys []string
	out := ready{intents: map[string]string{}}
	for _, ch := range live.changes {
		ref := ch.Ref().String()
		if ch.Action != drift.ActionUpdate {
			k := string(ch.Action) + " " + ref
			if pass(k) {
				out.changes = append(out.changes, ch)
				keys = append(keys, k)
			}
			continue
		}
		var fields []drift.Field
		for _, f := range ch.Fields {
			k := "field " + ref + " " + f.Path + " " + canonicalValue(f.Live)
			if pass(k) {
				fields = append(fields, f)
				keys = append(keys, k)
			}
		}
		if len(fields) > 0 {
			ch.Fields = fields
			out.changes = append(out.changes, ch)
			if v, ok := live.intents[ref]; ok {
				out.intents[ref] = v
			}
		}
	}
	for _, p := range live.unmanaged {
		k := "unmanaged " + p.Ref().String() + " " + string(p.Metadata.UID)
		if pass(k) {
			out.unmanaged = append(out.unmanaged, p)
			keys = append(keys, k)
			if v, ok := live.intents[p.Ref().String()]; ok {
				out.intents[p.Ref().String()] = v
			}
		}
	}
	st.seen = seen // a change that went away starts over if it comes back
	sort.Strings(keys)
	out.key = strings.Join(keys, "\n")
	return out, wait
}

// canonicalValue names a value compactly: the same value, the same name.
func canonicalValue(v any) string {
	b, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		b = []byte(fmt.Sprintf("%#v", v))
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// unmanagedObjects reads the whole objects a person created, for adoption.
func (d *DriftLoop) unmanagedObjects(ctx context.Context, w *drift.Watcher, ps []drift.Present) ([]*unstructured.Unstructured, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	refs := make([]drift.Ref, len(ps))
	for i, p := range ps {
		refs[i] = p.Ref()
	}
	objs, err := w.Get(ctx, refs)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, r := range refs {
		if o := objs[r.Key()]; o != nil {
			out = append(out, o)
		}
	}
	return out, nil
}

// observedDeletions keeps, of the objects Git has and the cluster does not,
// those this loop saw live before: one Git just added is the reconciler's to
// apply, not a person's deletion. It records what is live now.
func observedDeletions(st *targetState, desired []*unstructured.Unstructured, changes []drift.Change) []drift.Change {
	missing := map[string]bool{}
	for _, ch := range changes {
		if ch.Action == drift.ActionCreate {
			missing[ch.Ref().Key()] = true
		}
	}
	present := map[string]bool{}
	for _, o := range desired {
		gvk := o.GroupVersionKind()
		k := drift.Ref{Group: gvk.Group, Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()}.Key()
		if !missing[k] {
			present[k] = true
		}
	}
	var out []drift.Change
	for _, ch := range changes {
		k := ch.Ref().Key()
		if ch.Action == drift.ActionCreate && !st.present[k] {
			continue
		}
		if ch.Action == drift.ActionCreate {
			present[k] = true // still counts until it is back or gone from Git
		}
		out = append(out, ch)
	}
	st.present = present
	return out
}
