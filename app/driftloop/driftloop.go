// Package driftloop watches each target's cluster and turns live changes that
// stay into a pull request that writes them into the target's sources (or an
// issue, in report mode): per-cluster watches, quiet periods, fights between
// two writers, what to propose, and which replica runs which cluster.
package driftloop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/driftback/driftback/app/metrics"
	"github.com/driftback/driftback/app/repos"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/reconcile"
	"github.com/driftback/driftback/reconcile/hide"

	ghapp "github.com/driftback/driftback/app/github"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/driftback/driftback/app/auditlog"
	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/report"
)

// DriftLoop watches each target's cluster and turns live changes that stay
// into a pull request that writes them into the target's overlay (or an
// issue, for codify: report). Everything it decides on is read again from
// GitHub and the cluster, so a restart or another replica takes over where it
// left off; what it keeps in memory is only when it first saw each change.
type DriftLoop struct {
	deps     Deps
	log      *slog.Logger
	renderer *render.Renderer
	// Debounce is how long a burst of watch events is collected.
	Debounce time.Duration
	// checks counts finished target checks, failed or not.
	checks atomic.Int64
	// BeforeAct, when set, runs between deciding and acting on GitHub (tests
	// use it to stop a replica there).
	BeforeAct func(context.Context, prgen.Action)
	// WrapKube, when set, wraps the transport of the loop's cluster clients
	// (tests count the requests with it).
	WrapKube func(http.RoundTripper) http.RoundTripper

	// runs makes each cluster's runs one at a time: a lost and regained
	// Lease must not run two loops.
	runs   map[string]*sync.Mutex
	mu     sync.Mutex
	states map[string]*targetState
	wake   map[string]chan struct{} // by cluster
	// watchers are the running loops' caches, by cluster; the pull-request
	// flow reads from them what they cover.
	watchers map[string]*livestate.Watcher
	// dashboards are the repositories' drift dashboards, by repository.
	dashboards map[string]*repoDashboard
}

// Watcher returns the watch caches of a cluster whose loop runs in this
// replica, or nil.
func (d *DriftLoop) Watcher(cluster string) *livestate.Watcher {
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
	info   *ghapp.Repository
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
	// view is the target's part of its repository's dashboard after the
	// last check; nil when the dashboard does not show it.
	view *report.DashboardTarget
	// issueMoved says the target's drift issue, if it had one, was
	// closed for the dashboard.
	issueMoved bool
	// checkAnswered is the latest "check again now" request acted on.
	checkAnswered time.Time
	// plan and outcome are the drift last published and where it stands
	// on GitHub, which the dashboard shows until the next publish.
	plan    *prgen.Plan
	outcome ghapp.PullOutcome
}

// Deps are what the drift loop works with, from the process around it.
type Deps struct {
	Config  *config.Config
	Targets *targets.Source
	GitHub  *ghapp.Clients
	// Cache is where repositories are fetched.
	Cache *repos.Cache
	Now   func() time.Time
	// Kube is a controller-runtime client of a cluster, for Flux's
	// postBuild variables.
	Kube reconcile.Kube
	// Capabilities reads a cluster's version and APIs, which its Helm
	// charts are rendered for.
	Capabilities reconcile.CapabilitiesOf
	// Charts fetches the charts that are not in a repository; nil
	// fetches none.
	Charts *reconcile.Charts
	// PublishTimeout bounds the work of publishing one drift pull request or
	// issue; waits GitHub asks for are added to it.
	PublishTimeout func() time.Duration
	// Metrics records what the loop does; nil records nothing.
	Metrics *metrics.Metrics
	// Audit reads a cluster's audit events, to say who made each drift;
	// nil: none read.
	Audit *auditlog.Receiver
}

// Checks counts the target checks the loop has finished, failed or not.
func (d *DriftLoop) Checks() int64 { return d.checks.Load() }

// New prepares a drift loop.
func New(deps Deps, log *slog.Logger) *DriftLoop {
	return &DriftLoop{
		deps: deps, log: log, Debounce: 250 * time.Millisecond,
		renderer: render.New(render.Options{Origins: true, Cache: render.NewCache(256 << 20)}),
		states:   map[string]*targetState{}, wake: map[string]chan struct{}{},
	}
}

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
	for _, t := range d.deps.Config.Targets {
		if t.Policy.Codify != config.CodifyOff {
			add(t.Cluster)
		}
	}
	// Discovery may name any cluster of app.yml (an Argo CD destination
	// named after it), so with discovery every cluster has a loop.
	if len(d.deps.Targets.Discovering()) > 0 {
		for name := range d.deps.Config.Clusters {
			add(name)
		}
	}
	sort.Strings(out)
	return out
}

// targetsOn are the targets whose drift the loop watches on a cluster now:
// app.yml's and the discovered ones, glob paths expanded at each
// repository's default branch. A target whose reconciler reverts live
// changes itself (Argo CD selfHeal) has no drift to propose.
func (d *DriftLoop) targetsOn(ctx context.Context, cluster string) []targets.Target {
	all, _ := d.deps.Targets.All()
	watched := targets.WatchedOn(all, cluster)
	// A path a discovered target already has is not a glob's again: the
	// two would be checked with different policies, sharing one state.
	have := map[string]bool{}
	for _, t := range watched {
		if !targets.IsGlob(t.Path) {
			have[discover.TargetKey(t.Repo, t.Path, t.Cluster)] = true
		}
	}
	var out []targets.Target
	for _, t := range watched {
		if !targets.IsGlob(t.Path) {
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

// WakeAll makes every cluster's loop look again: the targets changed.
func (d *DriftLoop) WakeAll() {
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
	all, _ := d.deps.Targets.All()
	for _, t := range all {
		if !strings.EqualFold(t.Repo, repo) {
			continue
		}
		if s := d.states[targets.Key(t)]; s != nil {
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
	var w *livestate.Watcher
	backoff := time.Second
	for w == nil {
		cfg, err := d.deps.Config.Clusters[cluster].RESTConfig()
		if err == nil {
			if d.WrapKube != nil {
				cfg.Wrap(d.WrapKube)
			}
			w, err = livestate.NewWatcher(ctx, cfg)
		}
		if err == nil {
			break
		}
		log.Error("cannot reach the cluster; retrying", "err", err, "in", backoff)
		d.deps.Metrics.CachesSynced(cluster, false)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, d.deps.Config.Server.DriftInterval)
	}
	d.mu.Lock()
	wake := d.wake[cluster]
	if d.watchers == nil {
		d.watchers = map[string]*livestate.Watcher{}
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
		next := d.deps.Config.Server.DriftInterval
		watched := d.targetsOn(ctx, cluster)
		synced := true
		for _, t := range watched {
			if ctx.Err() != nil {
				return
			}
			tlog := log.With("repo", t.Repo, "target", t.Name)
			wait, err := d.check(ctx, w, t, tlog)
			d.checks.Add(1)
			if err != nil {
				d.state(t).refresh.Store(true)
			}
			var unsynced *livestate.WatchSyncError
			synced = synced && !errors.As(err, &unsynced)
			if err != nil && ctx.Err() == nil {
				d.deps.Metrics.Failure("drift_check")
				tlog.Error("drift check failed", "err", err)
				d.notCompared(t, "the last check failed: "+err.Error())
			}
			if wait > 0 && wait < next {
				next = wait
			}
		}
		d.deps.Metrics.CachesSynced(cluster, synced)
		d.publishDashboards(ctx, cluster, watched)
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
		case <-time.After(d.Debounce):
		}
	}
}

func (d *DriftLoop) state(t targets.Target) *targetState {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.states[targets.Key(t)]
	if !ok {
		s = &targetState{seen: map[string]time.Time{}, present: map[string]bool{}}
		d.states[targets.Key(t)] = s
	}
	return s
}

// headInterval bounds how stale the default branch's head may be: a push
// delivered to another replica reaches the leader this way.
const headInterval = time.Minute

// check looks at one target once. wait is when it wants to look again: a
// change is waiting out its quiet period.
func (d *DriftLoop) check(ctx context.Context, w *livestate.Watcher, t targets.Target, log *slog.Logger) (wait time.Duration, err error) {
	defer func() {
		// A defect on one target must not stop the loop for the others.
		if r := recover(); r != nil {
			log.Error("drift check panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			wait, err = 0, fmt.Errorf("internal error: %v", r)
		}
	}()
	// A cluster or GitHub that stops answering must not hold the loop: watches
	// are long requests, so the bound is on the check, not the client.
	ctx, cancel := context.WithTimeout(ctx, d.deps.Config.Server.JobTimeout)
	defer cancel()
	for range 3 {
		wait, err = d.checkOnce(ctx, w, t, log)
		if !errors.Is(err, ghapp.ErrHeadMoved) {
			return wait, err
		}
		d.state(t).refresh.Store(true)
	}
	return 0, ghapp.ErrHeadMoved
}

// expandGlob expands a glob target against the default branch's head.
func (d *DriftLoop) expandGlob(ctx context.Context, t targets.Target) ([]targets.Target, error) {
	st := d.state(t)
	_, token, err := d.readHead(ctx, t, st, d.deps.Now())
	if err != nil {
		return nil, err
	}
	defaultRef := "refs/heads/" + st.info.DefaultBranch
	repo, release, err := d.deps.Cache.Fetch(ctx, st.info.FullName, st.info.CloneURL, token, []string{defaultRef}, []string{st.head})
	if err != nil {
		return nil, err
	}
	defer release()
	tree, err := render.GitTreeContext(ctx, repo, st.head)
	if err != nil {
		return nil, err
	}
	return targets.ExpandGlobs([]targets.Target{t}, tree), nil
}

// watchScope is what a render needs watched: its kinds and namespaces.
func watchScope(ctx context.Context, w *livestate.Watcher, objs []*unstructured.Unstructured) ([]schema.GroupKind, []string, error) {
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
			for _, a := range object.AutoscalerKinds {
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
	// The admission rules a pull request's objects meet (drift/admission)
	// are read from the caches too.
	for _, gk := range append(append([]schema.GroupKind{}, object.AdmissionNamespacedKinds...), object.AdmissionClusterKinds...) {
		if _, served := namespaced[gk]; served && len(objs) > 0 {
			gks[gk] = true
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
	unmanaged []livestate.Present
	intents   map[string]string
}

func (d *DriftLoop) liveChanges(ctx context.Context, w *livestate.Watcher, t targets.Target, changes []drift.Change, desired []*unstructured.Unstructured, namespaces []string, ignore []string) liveChanges {
	notPerson := map[string]bool{}
	for _, m := range append(append([]string(nil), drift.KnownAppliers...), ignore...) {
		notPerson[m] = true
	}
	out := liveChanges{intents: map[string]string{}}
	intentOf := func(ref object.Ref) (string, bool) {
		objs, err := w.Get(ctx, []object.Ref{ref})
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
		var fields []object.Field
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
	unmanaged []livestate.Present
	intents   map[string]string
	key       string
	// entries are every live change, waiting or not, for the dashboard.
	entries []entry
	// asked says a person asked for a waiting change to be proposed now.
	asked bool
	// audited says the cluster's audit log was read for who made each
	// change (a change it names no one for is "unattributed").
	audited bool
}

// quiet keeps the live changes that have stayed, each with the same value,
// for the target's quiet period, or that a person asked on the dashboard
// to propose now; wait is when the next one will have stayed.
func (d *DriftLoop) quiet(st *targetState, t targets.Target, live liveChanges, now time.Time, asks []ghapp.Request) (ready, time.Duration) {
	seen := map[string]time.Time{}
	var wait time.Duration
	out := ready{intents: map[string]string{}}
	pass := func(k string, e entry) bool {
		since, ok := st.seen[k]
		if !ok {
			since = now
		}
		seen[k] = since
		e.key, e.since = k, since
		left := t.Policy.QuietPeriod - now.Sub(since)
		// GitHub's times are whole seconds: a request in the second the
		// change was first seen came after it (its box was not shown before).
		if at, ok := asked(asks, report.TickProposeNow, changeID(k)); ok && left > 0 && !at.Before(since.Truncate(time.Second)) {
			left, out.asked = 0, true
		}
		if left > 0 {
			if wait == 0 || left < wait {
				wait = left
			}
			e.until = since.Add(t.Policy.QuietPeriod)
			out.entries = append(out.entries, e)
			return false
		}
		out.entries = append(out.entries, e)
		return true
	}
	var keys []string
	for _, ch := range live.changes {
		ref := ch.Ref().String()
		if ch.Action != drift.ActionUpdate {
			k := string(ch.Action) + " " + ref
			if pass(k, entry{change: ch}) {
				out.changes = append(out.changes, ch)
				keys = append(keys, k)
			}
			continue
		}
		var fields []object.Field
		for _, f := range ch.Fields {
			k := "field " + ref + " " + f.Path + " " + canonicalValue(f.Live)
			e := entry{change: ch, field: &fieldOf{path: f.Path, manager: f.Manager, by: f.By, git: f.Desired, live: f.Live, at: f.Time, hidden: f.Hidden, autoscaler: f.Autoscaler}}
			if pass(k, e) {
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
		if pass(k, entry{unmanaged: p.Ref().String()}) {
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
func (d *DriftLoop) unmanagedObjects(ctx context.Context, w *livestate.Watcher, ps []livestate.Present) ([]*unstructured.Unstructured, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	refs := make([]object.Ref, len(ps))
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
		k := object.Ref{Group: gvk.Group, Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()}.Key()
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

// readHead finds a target's installation and reads its repository and the
// default branch's head again when due: on a push, after a failed check,
// and every interval; watch events alone cost GitHub nothing until the
// drift itself changes.
func (d *DriftLoop) readHead(ctx context.Context, t targets.Target, st *targetState, now time.Time) (*ghapp.Installation, string, error) {
	gh, err := d.deps.GitHub.InstallationFor(ctx, t.Repo)
	if err != nil {
		return nil, "", err
	}
	token, err := gh.Token(ctx)
	if err != nil {
		return nil, "", err
	}
	if st.refresh.Swap(false) || st.info == nil || now.Sub(st.headAt) >= min(d.deps.Config.Server.DriftInterval, headInterval) {
		owner, name, _ := strings.Cut(t.Repo, "/")
		info, head, err := gh.Head(ctx, owner, name)
		if err != nil {
			return nil, "", err
		}
		st.info, st.head, st.headAt = info, head, now
	}
	return gh, token, nil
}
func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// driftCheck is one check of one target as it goes through its steps.
type driftCheck struct {
	// charts traces drift on the target's Helm releases to their values.
	charts prgen.ChartValues
	t      targets.Target
	st     *targetState
	now    time.Time
	log    *slog.Logger
	gh     *ghapp.Installation
	// token fetches the repository, whose tree at the default branch's
	// head is tree; release lets go of the read.
	token   string
	tree    *render.Tree
	release func()
	// desired is what the target renders; namespaces those it covers.
	desired    []*unstructured.Unstructured
	namespaces []string
	// hidden are the values substituted from Secrets, never shown.
	hidden []string
	// variables are what the reconciler substitutes after the build, for
	// the write-back; nil for none.
	variables *prgen.Variables
	// secretObjects are the objects built with a Secret's variable: their
	// values are hidden whole, never shown nor written back.
	secretObjects map[string]hide.AsWritten
	// gitOnly are, of those, the fields rendered from a Secret's
	// stand-ins: never compared with the live value.
	gitOnly func(*unstructured.Unstructured) []fieldpath.Path
	// requests are what people asked of the target on the dashboard.
	requests []ghapp.Request
	// notCompared says why the target is not compared at all.
	notCompared string
	// stalled, when set, is the target's reconciler failing or stalled:
	// the target is not compared either.
	stalled *discover.Health
}

// hiddenError is an error whose message has what a Secret's variables set
// hidden; its cause stays for errors.As (a watch that did not sync).
type hiddenError struct {
	msg string
	err error
}

func (e *hiddenError) Error() string { return e.msg }
func (e *hiddenError) Unwrap() error { return e.err }

// checkOnce checks one target at the default branch's head: read the head,
// render the target there, watch and compare, wait out the quiet period,
// plan the change and publish it, and record what the dashboard shows of
// it. wait is when to look again.
func (d *DriftLoop) checkOnce(ctx context.Context, w *livestate.Watcher, t targets.Target, log *slog.Logger) (_ time.Duration, err error) {
	c := &driftCheck{t: t, st: d.state(t), now: d.deps.Now(), log: log}
	defer func() {
		// The error goes to the log and the dashboard: what a Secret's
		// variables set is hidden in it, as everywhere.
		if err != nil && len(c.hidden) > 0 && !errors.Is(err, ghapp.ErrHeadMoved) {
			err = &hiddenError{msg: hide.In(err.Error(), c.hidden), err: err}
		}
		if err == nil {
			d.deps.Metrics.Checked(t.Repo, t.Name, t.Cluster, d.deps.Now())
		}
	}()
	if c.gh, c.token, err = d.readHead(ctx, t, c.st, c.now); err != nil {
		return 0, err
	}
	if c.requests, err = d.requests(ctx, c.gh, t, c.now); err != nil {
		// The dashboard is a view: drift pull requests go on without it.
		log.Warn("cannot read the drift dashboard", "err", err)
	}
	if at, ok := asked(c.requests, report.TickCheck, ""); ok && at.After(c.st.checkAnswered) {
		// A person asked for a check now: read everything again, once.
		c.st.checkAnswered = at
		c.st.refresh.Store(true)
		c.st.decided = ""
		if c.gh, c.token, err = d.readHead(ctx, t, c.st, c.now); err != nil {
			return 0, err
		}
	}
	if n := c.st.outcome.Declined; n != 0 {
		if _, ok := asked(c.requests, report.TickProposeAgain, strconv.Itoa(n)); ok {
			c.st.decided = "" // a person asked for the declined drift again: decide now
		}
	}
	compare, err := d.readTarget(ctx, c)
	if err != nil {
		return 0, err
	}
	if !compare {
		switch {
		case c.stalled != nil:
			d.reconcilerStalled(t, *c.stalled)
		case c.notCompared != "":
			d.notCompared(t, c.notCompared)
		default:
			d.setView(c.st, nil)
		}
		return 0, nil
	}
	defer c.release()
	if err := d.renderDesired(ctx, w, c); err != nil {
		return 0, err
	}
	if c.notCompared != "" {
		d.notCompared(t, c.notCompared)
		return 0, nil
	}
	ready, fights, wait, err := d.settled(ctx, w, c)
	if err != nil {
		return 0, err
	}
	if c.t.Policy.Codify == config.CodifyReport && d.dashboardOn(t.Repo) {
		// Shown on the dashboard, nothing to publish; the issue the
		// target kept before the dashboard is closed, once the dashboard
		// is known to be open.
		v := c.view(ready.entries, nil, ghapp.PullOutcome{}, fights)
		d.setView(c.st, &v)
		if !c.st.issueMoved && d.dashboardShown(t.Repo) {
			ctx, cancel := ghapp.WithPublishBudget(ctx, d.deps.PublishTimeout())
			defer cancel()
			if err := d.publisher(c).CloseIssue(ctx, "the drift dashboard shows this target's drift now"); err != nil {
				return 0, err
			}
			c.st.issueMoved = true
		}
		return wait, nil
	}
	if wait > 0 && !ready.asked {
		// A change still settling, maybe a new value of one already
		// proposed, is acted on once everything has stayed, not on a half
		// picture.
		v := c.view(ready.entries, c.st.plan, c.st.outcome, fights)
		d.setView(c.st, &v)
		return wait, nil
	}
	key := c.st.head + "\n" + ready.key + "\n" + fightKey(fights)
	if key == c.st.decided && c.now.Sub(c.st.decidedAt) < d.deps.Config.Server.DriftInterval {
		v := c.view(ready.entries, c.st.plan, c.st.outcome, fights)
		d.setView(c.st, &v)
		return wait, nil // published, or found up to date, already
	}
	plan, err := d.plan(ctx, w, c, ready, fights)
	if err != nil {
		return 0, err
	}
	// Publishing fetches into the cache itself: let go of this read first.
	c.release()
	out, err := d.publish(ctx, c, plan)
	if err != nil {
		if wait, later := ghapp.RateLimitWait(err); later {
			// GitHub's limit, or the installation's pace: look again once
			// it allows, and publish the whole plan then.
			c.log.Info("drift publish waits for GitHub's limit", "wait", wait)
			return wait, nil
		}
		return 0, err
	}
	c.st.decided, c.st.decidedAt = key, c.now
	c.st.plan, c.st.outcome = plan, out
	v := c.view(ready.entries, plan, out, fights)
	d.setView(c.st, &v)
	return wait, nil
}

// setView records the target's part of the dashboard.
func (d *DriftLoop) setView(st *targetState, v *report.DashboardTarget) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st.view = v
}

// readTarget fetches the default branch's head, refines the target with the
// repository's own file there and reads its tree. compare is false when the
// target is not compared: c.notCompared says why when the dashboard shows
// it (suspended, following another branch), and otherwise it is off.
func (d *DriftLoop) readTarget(ctx context.Context, c *driftCheck) (compare bool, err error) {
	info := c.st.info
	if f := c.t.Found; f != nil && f.Suspended != "" {
		c.notCompared = "suspended: " + f.Suspended
		d.deps.Metrics.Reconciler(c.t.Repo, c.t.Name, c.t.Cluster, false, 0) // said as suspended, not stalled
		return false, nil
	}
	if f := c.t.Found; f != nil && d.deps.Targets != nil {
		// A reconciler that fails or has stopped leaves Git unapplied:
		// what differs then is not drift, and is not proposed.
		h := d.deps.Targets.Health(f, c.now)
		d.deps.Metrics.Reconciler(c.t.Repo, c.t.Name, c.t.Cluster, h.Blocks(), h.Behind)
		if h.Blocks() {
			c.stalled = &h
			return false, nil
		}
	}
	if c.t.Branch != "" && c.t.Branch != info.DefaultBranch {
		c.notCompared = "its reconciler follows branch " + c.t.Branch + ", not the default branch, where drift is compared"
		return false, nil
	}
	repo, release, err := d.deps.Cache.Fetch(ctx, info.FullName, info.CloneURL, c.token, []string{"refs/heads/" + info.DefaultBranch}, []string{c.st.head})
	if err != nil {
		return false, err
	}
	var once sync.Once
	c.release = func() { once.Do(release) }
	defer func() {
		if !compare {
			c.release()
		}
	}()
	content, err := repos.CommitFile(repo, c.st.head, config.RepoConfigPath)
	if err == nil && content != nil {
		refined, err := targets.Refine([]targets.Target{c.t}, content)
		if err != nil {
			return false, err
		}
		c.t = refined[0]
	}
	db := d.dashboardOf(c.t.Repo)
	db.mu.Lock()
	db.off = content != nil && !config.RepoDashboard(content)
	db.mu.Unlock()
	if c.t.Policy.Codify == config.CodifyOff {
		return false, nil
	}
	if c.tree, err = render.GitTreeContext(ctx, repo, c.st.head); err != nil {
		return false, err
	}
	if why := reconcile.NotRenderedAt(c.t.Build(), c.tree); why != "" {
		c.notCompared = "not rendered: " + why
		return false, nil
	}
	if c.t.Found != nil && !c.tree.HasDir(c.t.Path) {
		// The reconciler fails on it too, and says so in its own status.
		c.notCompared = "its path is not in the default branch's head"
		return false, nil
	}
	return true, nil
}

// renderDesired renders the target as its reconciler builds it and makes
// sure its kinds and namespaces are watched.
func (d *DriftLoop) renderDesired(ctx context.Context, w *livestate.Watcher, c *driftCheck) error {
	start := time.Now()
	vars := reconcile.Variables(ctx, c.t.Build(), true, d.deps.Kube)
	// The branch the target follows: a hand edit of what a Secret's
	// variable sets is drift, shown hidden.
	vars.KeepSecretValues = true
	vars.Helm, vars.HelmNote = reconcile.HelmCapabilities(ctx, c.t.Build(), true, d.deps.Capabilities)
	// The tree is the default branch: what it names is trusted.
	vars.Charts = d.deps.Charts.Access(c.t.Build(), d.deps.Charts.TrustIn(c.tree), true, d.deps.Kube)
	c.hidden = vars.Hidden
	var ok bool
	if c.variables, ok = reconcile.WriteBackVariables(c.t.Build(), vars); !ok {
		// Without its variables nothing says which values are a Secret's:
		// the target is not compared rather than shown unhidden.
		c.notCompared = "its postBuild variables could not be read, so nothing of it is shown: " + vars.Note
		return nil
	}
	b := reconcile.Build(ctx, d.renderer, c.tree, c.t.Build(), vars)
	d.deps.Metrics.Render(time.Since(start))
	if b.Absent {
		return fmt.Errorf("%s has no kustomization at %s", c.t.Path, shortSHA(c.st.head))
	}
	if len(b.Problems) > 0 {
		return fmt.Errorf("%s does not render at %s: %s", c.t.Path, shortSHA(c.st.head), hide.In(strings.Join(b.Problems, "; "), vars.Hidden))
	}
	c.desired, c.secretObjects, c.charts, c.gitOnly = b.Objects, b.SecretObjects, b.Charts, hide.GitOnlyFields(b.GitOnly)
	c.hidden = hide.With(c.hidden, b.Hidden)
	kinds, namespaces, err := watchScope(ctx, w, c.desired)
	if err != nil {
		return err
	}
	if err := w.Watch(ctx, kinds, namespaces); err != nil {
		return err
	}
	c.namespaces = namespaces
	d.noteWatched(ctx, w, c.t.Cluster, c.desired)
	return w.WatchMetadata(ctx, namespaces)
}

// settled compares the desired objects with the watch caches and keeps the
// live changes made by a person that have stayed for the quiet period, and
// the fights; wait is when the next change will have stayed.
func (d *DriftLoop) settled(ctx context.Context, w *livestate.Watcher, c *driftCheck) (ready, []prgen.Fight, time.Duration, error) {
	t := c.t
	opts := drift.DefaultOptions()
	opts.Ignore = t.Policy.Ignore
	if t.Found != nil && t.Found.Flux != nil {
		opts.Ignore = append(append([]object.IgnoreRule{}, opts.Ignore...), reconcile.FluxIfNotPresent(c.desired)...)
	}
	opts.IgnoreManagers = append(opts.IgnoreManagers, t.Policy.IgnoreManagers...)
	opts.NoPrune, opts.DefaultNamespace = reconcile.ReconcilerOptions(t.Build())
	opts.GitOnly = c.gitOnly
	target, err := drift.Compare(ctx, w, drift.Input{Path: t.Path, Head: c.desired}, opts)
	if err != nil {
		return ready{}, nil, 0, err
	}
	// Before anything reads a value: what a Secret's variable built is
	// hidden whole, and named as Git writes it.
	hide.Substituted(target, c.secretObjects)
	live := d.liveChanges(ctx, w, t, target.Drift, c.desired, c.namespaces, opts.IgnoreManagers)
	live.changes = observedDeletions(c.st, c.desired, live.changes)
	fighting, fights := d.followFields(ctx, w, c.st, t, target.Drift, c.now)
	live.changes = withoutFights(live.changes, fighting)
	d.deps.Metrics.DriftFights(t.Repo, t.Name, len(fights))
	// Who made each change, waiting or ready: the dashboard names them too.
	audited := d.attribute(ctx, w, t.Cluster, live.changes)
	r, wait := d.quiet(c.st, t, live, c.now, c.requests)
	r.audited = audited
	d.deps.Metrics.DriftedObjects(t.Repo, t.Name, len(live.changes)+len(live.unmanaged))
	c.log.Debug("drift checked", "head", shortSHA(c.st.head), "drifted", len(target.Drift), "ready", len(r.changes)+len(r.unmanaged), "waiting", wait)
	return r, fights, wait, nil
}

// plan is the change to the target's sources that writes the ready drift
// back, with the fights to show.
func (d *DriftLoop) plan(ctx context.Context, w *livestate.Watcher, c *driftCheck, r ready, fights []prgen.Fight) (*prgen.Plan, error) {
	unmanaged, err := d.unmanagedObjects(ctx, w, r.unmanaged)
	if err != nil {
		return nil, err
	}
	// Every render of the write-back is the reconciler's; a plain
	// directory's generated kustomization is never written.
	wb, generated := reconcile.WriteBack(c.t.Build(), c.tree)
	all, _ := d.deps.Targets.All()
	if wb != nil {
		// The files its parent applies it from tell one cluster
		// directory's copy of a manifest from another's.
		if i, ok := reconcile.Parent(c.t.Build(), targets.Builds(all)); ok {
			wb.Sources = reconcile.Sources(ctx, d.renderer, c.tree, all[i].Build())
		}
	}
	plan, err := prgen.Make(ctx, prgen.Input{
		Tree: c.tree, Overlay: c.t.Path, Renderer: d.renderer, Drift: r.changes,
		Intents: r.intents, Unmanaged: unmanaged, Adopt: c.t.Policy.AdoptUnmanaged, Generated: generated,
		Variables: c.variables, Build: wb, Charts: c.charts, NotWritable: reconcile.NotWritable(c.t.Build(), c.tree),
	})
	if err != nil {
		return nil, err
	}
	plan.Fights = fights
	plan.Fate, plan.Audited = c.t.Found.Fate(), r.audited
	refuseShared(plan, targets.ReadByOthers(c.t, all, c.tree, overlayFiles(c.t, c.tree, plan.Paths())))
	hidePlanValues(plan, c.hidden)
	return plan, nil
}

// overlayFiles are, of files, those of t's own build: its overlay and what
// it reads. The reconciler's own manifest and its variables' ConfigMap,
// which its parent applies, are where those values live, and are written
// there by design.
func overlayFiles(t targets.Target, tree *render.Tree, files []string) []string {
	reads := map[string]bool{}
	for _, f := range tree.ClosureFiles(t.Path) {
		reads[f] = true
	}
	var out []string
	for _, f := range files {
		if reads[f] || strings.HasPrefix(f, strings.TrimSuffix(t.Path, "/")+"/") {
			out = append(out, f)
		}
	}
	return out
}

// refuseShared takes back a plan's edits when a file it edits is rendered
// by other targets too (shared, by file): merged, the pull request would
// change them as well, which its review would not show. What it wrote is
// listed for a person to edit, saying which targets share the file.
func refuseShared(plan *prgen.Plan, shared map[string][]string) {
	if len(shared) == 0 {
		return
	}
	var files, names []string
	for f, ts := range shared {
		files = append(files, f)
		names = append(names, ts...)
	}
	sort.Strings(files)
	slices.Sort(names)
	names = slices.Compact(names)
	who, them := "target "+strings.Join(names, ", ")+" renders", "it"
	if len(names) > 1 {
		who, them = "targets "+strings.Join(names, ", ")+" render", "them"
	}
	why := fmt.Sprintf("written, it would be in %s, which %s too: a pull request would change %s as well; change it by hand",
		strings.Join(files, ", "), who, them)
	for _, c := range plan.Codified {
		plan.Manual = append(plan.Manual, prgen.Manual{Object: c.Object, Path: c.Path, Value: c.Value, Reason: why})
	}
	for _, a := range plan.Adopted {
		plan.Unmanaged = append(plan.Unmanaged, prgen.Manual{Object: a.Object, Reason: "created live, not in Git; " + why})
	}
	plan.Codified, plan.Adopted, plan.Files = []prgen.Codified{}, []prgen.Adopted{}, map[string][]byte{}
}

// publisher publishes the target's drift on GitHub.
func (d *DriftLoop) publisher(c *driftCheck) *ghapp.DriftPublisher {
	return &ghapp.DriftPublisher{
		Installation: c.gh, Repo: c.st.info, Head: c.st.head, Token: c.token, Target: c.t, Cache: d.deps.Cache, Log: c.log, Now: d.deps.Now,
		BeforeAct: d.BeforeAct, Acted: d.deps.Metrics.DriftAction,
	}
}

// publish opens, updates or closes the target's drift pull request (or its
// issue, in report mode without the dashboard) as the plan says. Once
// begun, publishing is not cut short by a lost leadership or a shutdown: a
// branch pushed without its pull request, or a pull request without its
// labels, is avoided.
func (d *DriftLoop) publish(ctx context.Context, c *driftCheck, plan *prgen.Plan) (ghapp.PullOutcome, error) {
	again := map[int]bool{}
	for _, r := range c.requests {
		if r.Kind == report.TickProposeAgain {
			if n, err := strconv.Atoi(r.Item); err == nil {
				again[n] = true
			}
		}
	}
	p := d.publisher(c)
	p.Again = again
	ctx, cancel := ghapp.WithPublishBudget(ctx, d.deps.PublishTimeout())
	defer cancel()
	dashboard := d.dashboardOn(c.t.Repo)
	switch {
	case c.t.Policy.Codify == config.CodifyReport:
		c.st.issueMoved = false // the dashboard is off: the issue is the target's again
		return ghapp.PullOutcome{}, p.PublishIssue(ctx, plan)
	case plan.OnlyFights():
		// Nothing to write: a drift pull request still open for a field
		// now in a fight is closed, and the fight goes on the dashboard
		// (or in the drift issue without one).
		rest := *plan
		rest.Fights = nil
		out, err := p.PublishPull(ctx, &rest)
		if err != nil || dashboard {
			return out, err
		}
		return out, p.PublishIssue(ctx, plan)
	default:
		return p.PublishPull(ctx, plan)
	}
}
