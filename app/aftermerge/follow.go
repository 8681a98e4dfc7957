package aftermerge

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	ghapp "github.com/driftback/driftback/app/github"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/report/prediction"
)

// Merge is a merged pull request.
type Merge struct {
	Installation int64
	Owner, Repo  string
	Number       int
	// SHA is the merge commit, At when it was merged; Head the pull
	// request's own head, which its comment predicted.
	SHA, Head string
	At        time.Time
}

// Target is a target the merge affected, applied by a discovered reconciler.
type Target struct {
	Name, Cluster string
	Found         *discover.Found
}

// Environment is the GitHub environment a target's deployments go to.
func (t Target) Environment() string { return t.Cluster + "/" + t.Name }

// Deps is what following needs.
type Deps struct {
	GitHub func(installation int64) (*ghapp.Installation, error)
	// Object is the reconciler object now, from discovery's watch; Health
	// its state (for the bound it may take).
	Object func(f *discover.Found) *unstructured.Unstructured
	Health func(f *discover.Found) discover.Health
	// Dynamic reads a cluster.
	Dynamic func(cluster string) (dynamic.Interface, error)
	// Holds says whether a commit the reconciler applied holds the merge
	// commit (a later merge applied at once).
	Holds func(m Merge, applied string) bool
	// Live reads a cluster's live objects (nil when this replica does not
	// watch it); Measured is told how each merge's prediction held.
	Live     func(cluster string) Live
	Measured func(asPredicted, unchanged, unpredicted int)
	Now      func() time.Time
	// Every is how often the watches' caches are read (default 5s);
	// Rollout how long the changed workloads may take to become ready once
	// applied (default 10m).
	Every, Rollout time.Duration
	// Max bounds the targets followed at once (default 32): beyond it a
	// merge is not followed, and the log says so.
	Max int
	Log *slog.Logger
}

// Follower follows merges.
type Follower struct {
	deps Deps
	sem  chan struct{}
	wg   sync.WaitGroup

	mu sync.Mutex
	// active are the follows going on, by repository, commit and
	// environment: a redelivered merge starts none twice.
	active map[string]bool
	// refused says GitHub refused a deployment (no Deployments: write):
	// said once, and only the comment is written.
	refused bool
}

// New returns a Follower.
func New(deps Deps) *Follower {
	if deps.Every <= 0 {
		deps.Every = 5 * time.Second
	}
	if deps.Rollout <= 0 {
		deps.Rollout = 10 * time.Minute
	}
	if deps.Max <= 0 {
		deps.Max = 32
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	return &Follower{deps: deps, sem: make(chan struct{}, deps.Max), active: map[string]bool{}}
}

// Follow follows a merge on each of its targets, in the background, until
// ctx ends or each is live or has failed.
func (fl *Follower) Follow(ctx context.Context, m Merge, targets []Target) {
	v := newView()
	for _, t := range targets {
		key := m.Owner + "/" + m.Repo + " " + m.SHA + " " + t.Environment()
		fl.mu.Lock()
		busy := fl.active[key]
		fl.mu.Unlock()
		if busy {
			continue // a redelivered merge: already followed
		}
		select {
		case fl.sem <- struct{}{}:
		default:
			fl.deps.Log.Warn("too many targets followed at once: this one is not", "repo", m.Owner+"/"+m.Repo, "pull", m.Number, "target", t.Name)
			continue
		}
		fl.mu.Lock()
		fl.active[key] = true
		fl.mu.Unlock()
		fl.wg.Add(1)
		go func() {
			defer func() {
				fl.mu.Lock()
				delete(fl.active, key)
				fl.mu.Unlock()
				<-fl.sem
				fl.wg.Done()
			}()
			log := fl.deps.Log.With("repo", m.Owner+"/"+m.Repo, "pull", m.Number, "target", t.Name, "cluster", t.Cluster)
			if err := fl.follow(ctx, m, t, v, log); err != nil && ctx.Err() == nil {
				log.Error("cannot follow the merge", "err", err)
			}
		}()
	}
}

// Wait waits for every follow to end.
func (fl *Follower) Wait() { fl.wg.Wait() }

// follow is one target's follow: its deployment, whose status is written
// when the phase changes (waiting, applied, and how it ended), and the
// comment's row. A write GitHub refuses or fails is tried again at the next
// look; a follow that stops with the server says so.
func (fl *Follower) follow(ctx context.Context, m Merge, t Target, v *view, log *slog.Logger) error {
	gh, err := fl.deps.GitHub(m.Installation)
	if err != nil {
		return err
	}
	short := m.SHA
	if len(short) > 7 {
		short = short[:7]
	}
	var id int64
	fl.mu.Lock()
	refused := fl.refused
	fl.mu.Unlock()
	if !refused {
		id, err = gh.Deployment(ctx, m.Owner, m.Repo, m.SHA, t.Environment(), fmt.Sprintf("#%d, applied by %s", m.Number, t.Found.Object))
		switch {
		case ghapp.NotAllowed(err):
			fl.mu.Lock()
			if !fl.refused {
				log.Warn("GitHub refuses driftback's deployments (the App needs Deployments: write): what merging did is said in the pull request's comment only", "err", err)
			}
			fl.refused = true
			fl.mu.Unlock()
		case err != nil:
			return err
		}
	}
	if id != 0 {
		if st, _, err := gh.DeploymentLatest(ctx, m.Owner, m.Repo, id); err != nil {
			return err
		} else if st == "success" || st == "failure" || st == "error" {
			return nil // followed to its end before (a redelivery after a restart)
		}
	}
	var said string
	set := func(ctx context.Context, state, description string) bool {
		if state+" "+description == said {
			return true
		}
		if id != 0 {
			if err := gh.DeploymentState(ctx, m.Owner, m.Repo, id, state, description); err != nil {
				log.Warn("cannot write the deployment's status; trying again", "err", err)
				return false
			}
		}
		said = state + " " + description
		log.Info("merge followed", "state", state, "description", description)
		if v.set(t.Environment(), state, description) {
			// The comment is where reviewers look; the deployment
			// stands without it.
			if err := v.write(func(section string) error {
				return gh.CommentSection(ctx, m.Owner, m.Repo, m.Number, sectionMarker, section)
			}); err != nil {
				log.Warn("cannot say in the pull request's comment what merging did", "err", err)
			}
		}
		return true
	}
	defer func() {
		if ctx.Err() != nil && !strings.HasPrefix(said, "success ") && !strings.HasPrefix(said, "failure ") {
			// Stopped with the server: said, so no deployment stays in
			// progress for ever.
			stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			set(stop, "error", "driftback stopped following this merge (it restarted or shut down); "+t.Found.Object+"'s status says the rest")
		}
	}()
	set(ctx, "in_progress", fmt.Sprintf("Waiting for %s to apply %s", t.Found.Object, short))
	deadline := fl.applyDeadline(t)
	tick := time.NewTicker(fl.deps.Every)
	defer tick.Stop()
	var applied time.Time
	var w *workloads
	measured, accuracy := false, ""
	defer func() {
		if w != nil {
			w.stop()
		}
	}()
	for {
		now := fl.deps.Now()
		if applied.IsZero() {
			obj := fl.deps.Object(t.Found)
			var p Applied
			var why string
			if obj != nil {
				p, why = Progress(t.Found, obj, m.SHA, func(rev string) bool { return fl.deps.Holds != nil && fl.deps.Holds(m, rev) })
			}
			switch {
			case p == Failed:
				if set(ctx, "failure", t.Found.Object+" failed to apply "+short+": "+why) {
					return nil
				}
			case p == Done:
				if t.Found.Reconciler == discover.ReconcilerFlux && w == nil {
					if w, err = fl.watchWorkloads(ctx, t); err != nil {
						log.Warn("cannot watch the workloads; trying again", "err", err)
						break
					}
				}
				applied = now
				set(ctx, "in_progress", fmt.Sprintf("Applied %s; waiting for the workloads it changed", short))
			case now.Sub(m.At) > deadline:
				if set(ctx, "failure", fmt.Sprintf("%s did not apply %s within %s", t.Found.Object, short, deadline)) {
					return nil
				}
			}
		}
		if !applied.IsZero() {
			state, description := fl.rollout(ctx, m, t, w, applied, now)
			if state != "in_progress" && !measured {
				if acc, ok := fl.accuracy(ctx, gh, m, t, w, log); ok {
					accuracy = "; " + acc.String()
				}
				measured = true
			}
			description += accuracy // kept for a write tried again
			if state != "in_progress" && set(ctx, state, description) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// accuracy measures what the pull request's comment predicted for the
// target against what the reconciler did; ok is false when there is nothing
// to measure (no prediction of the merged head, the cluster not watched).
func (fl *Follower) accuracy(ctx context.Context, gh *ghapp.Installation, m Merge, t Target, w *workloads, log *slog.Logger) (Accuracy, bool) {
	if fl.deps.Live == nil {
		return Accuracy{}, false
	}
	live := fl.deps.Live(t.Cluster)
	if live == nil {
		return Accuracy{}, false
	}
	body, err := gh.CommentBody(ctx, m.Owner, m.Repo, m.Number)
	if err != nil {
		log.Warn("cannot read the prediction", "err", err)
		return Accuracy{}, false
	}
	p, ok := prediction.Read(body)[t.Environment()]
	if !ok || p.Head != m.Head {
		return Accuracy{}, false // not compared, or of another head
	}
	var changed []*unstructured.Unstructured
	if t.Found.Reconciler == discover.ReconcilerFlux && w != nil {
		changed = w.changed(m.At.Add(-clockSlack))
	}
	acc, err := measure(ctx, p, live, drift.KnownAppliers, m.At, changed)
	if err != nil {
		log.Warn("cannot measure the prediction", "err", err)
		return Accuracy{}, false
	}
	if fl.deps.Measured != nil {
		fl.deps.Measured(acc.Checked-len(acc.Unchanged), len(acc.Unchanged), len(acc.Unpredicted))
	}
	if acc.Missed() > 0 {
		log.Info("the prediction missed", "unchanged", acc.Unchanged, "unpredicted", acc.Unpredicted)
	}
	return acc, true
}

// applyDeadline is how long after the merge its reconciler may take to
// apply it: its source's fetch interval and its bound (as for a stall).
func (fl *Follower) applyDeadline(t Target) time.Duration {
	var h discover.Health
	if fl.deps.Health != nil {
		h = fl.deps.Health(t.Found)
	}
	return max(h.Bound, 10*time.Minute) + h.Fetch
}

// rollout says where the workloads the merge changed stand.
func (fl *Follower) rollout(ctx context.Context, m Merge, t Target, w *workloads, applied, now time.Time) (state, description string) {
	live := func() string { return "Live on " + t.Cluster + " at " + now.UTC().Format("15:04 UTC") }
	if t.Found.Reconciler == discover.ReconcilerArgoCD {
		// Argo CD computes its resources' health itself.
		obj := fl.deps.Object(t.Found)
		if obj == nil {
			return "in_progress", ""
		}
		str := func(f ...string) string { v, _, _ := unstructured.NestedString(obj.Object, f...); return v }
		health := str("status", "health", "status")
		// The health is of the merge only once the controller compared
		// the cluster with it after the sync finished.
		finished, reconciled := parseTime(str("status", "operationState", "finishedAt")), parseTime(str("status", "reconciledAt"))
		if str("status", "sync", "revision") != m.SHA || reconciled.Before(finished) {
			health = "Progressing"
		}
		switch {
		case health == "Healthy":
			return "success", live() + ": Healthy"
		case health == "Degraded":
			return "failure", "Degraded: " + argoUnhealthy(obj)
		case now.Sub(applied) > fl.deps.Rollout:
			return "failure", fmt.Sprintf("%s after %s: %s", orUnknown(health), fl.deps.Rollout, argoUnhealthy(obj))
		}
		return "in_progress", ""
	}
	var states []Workload
	for _, u := range w.changed(m.At) {
		states = append(states, Readiness(u))
	}
	ready := 0
	var late *Workload
	for i := range states {
		switch {
		case states[i].Failed:
			return "failure", states[i].Object + ": " + w.why(ctx, states[i])
		case states[i].Ready:
			ready++
		case late == nil:
			late = &states[i]
		}
	}
	switch {
	case late == nil && len(states) == 0:
		return "success", live() + ": applied, no workload changed"
	case late == nil:
		pods, wanted := 0, 0
		for _, u := range w.changed(m.At) {
			r, n := podCounts(u)
			pods, wanted = pods+r, wanted+n
		}
		return "success", fmt.Sprintf("%s: %d/%d workloads ready, %d/%d pods", live(), ready, len(states), pods, wanted)
	case now.Sub(applied) > fl.deps.Rollout:
		return "failure", fmt.Sprintf("%s not ready %s after the apply: %s", late.Object, fl.deps.Rollout, w.why(ctx, *late))
	}
	return "in_progress", ""
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339, s)
	return t
}

func orUnknown(s string) string {
	if s == "" {
		return "health unknown"
	}
	return s
}

// argoUnhealthy names an Application's resources that are not healthy,
// with Argo CD's messages.
func argoUnhealthy(app *unstructured.Unstructured) string {
	res, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
	var out []string
	for _, r := range res {
		m, _ := r.(map[string]any)
		h, _ := m["health"].(map[string]any)
		st, _ := h["status"].(string)
		if st == "" || st == "Healthy" {
			continue
		}
		msg, _ := h["message"].(string)
		out = append(out, fmt.Sprintf("%s/%s/%s %s %s", m["kind"], m["namespace"], m["name"], st, msg))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// workloads watches the workloads a Flux Kustomization applied (by the
// labels kustomize-controller puts on every object) while a merge is
// followed.
type workloads struct {
	dyn    dynamic.Interface
	cancel context.CancelFunc
	infs   []cache.SharedIndexInformer
}

var workloadResources = []schema.GroupVersionResource{
	{Group: "apps", Version: "v1", Resource: "deployments"},
	{Group: "apps", Version: "v1", Resource: "statefulsets"},
	{Group: "apps", Version: "v1", Resource: "daemonsets"},
	{Group: "batch", Version: "v1", Resource: "jobs"},
}

// fluxManagers are the field managers of kustomize-controller's applies.
var fluxManagers = []string{"kustomize-controller"}

func (fl *Follower) watchWorkloads(ctx context.Context, t Target) (*workloads, error) {
	dyn, err := fl.deps.Dynamic(t.Cluster)
	if err != nil {
		return nil, err
	}
	sel := labels.Set{"kustomize.toolkit.fluxcd.io/name": t.Found.Name, "kustomize.toolkit.fluxcd.io/namespace": t.Found.Namespace}.String()
	ctx, cancel := context.WithCancel(ctx)
	w := &workloads{dyn: dyn, cancel: cancel}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, metav1.NamespaceAll, func(o *metav1.ListOptions) { o.LabelSelector = sel })
	for _, r := range workloadResources {
		w.infs = append(w.infs, f.ForResource(r).Informer())
	}
	f.Start(ctx.Done())
	syncCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	for _, inf := range w.infs {
		if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
			cancel()
			return nil, fmt.Errorf("watch the workloads of %s: not listed within 30s", t.Found.Object)
		}
	}
	return w, nil
}

func (w *workloads) stop() { w.cancel() }

// changed are the watched workloads the reconciler changed or created since
// t, sorted.
func (w *workloads) changed(t time.Time) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, inf := range w.infs {
		for _, o := range inf.GetStore().List() {
			if u, ok := o.(*unstructured.Unstructured); ok && workloadKinds[u.GetKind()] && ChangedSince(u, fluxManagers, t) {
				out = append(out, u)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].GetKind()+out[i].GetNamespace()+out[i].GetName() < out[j].GetKind()+out[j].GetNamespace()+out[j].GetName()
	})
	return out
}

// why says why a workload is not ready: what keeps its pods from running
// first (from one read of its namespace's pods), then kstatus's words.
func (w *workloads) why(ctx context.Context, s Workload) string {
	if t := w.trouble(ctx, s); t != "" {
		return t + "; " + s.Says
	}
	return s.Says
}

// trouble says why a workload's pods do not run; "" when nothing is known.
func (w *workloads) trouble(ctx context.Context, s Workload) string {
	parts := strings.SplitN(s.Object, "/", 3)
	if len(parts) != 3 {
		return ""
	}
	var u *unstructured.Unstructured
	for _, inf := range w.infs {
		if o, ok, _ := inf.GetStore().GetByKey(parts[1] + "/" + parts[2]); ok {
			if x, ok := o.(*unstructured.Unstructured); ok && x.GetKind() == parts[0] {
				u = x
			}
		}
	}
	if u == nil {
		return ""
	}
	l, err := w.dyn.Resource(corev1.SchemeGroupVersion.WithResource("pods")).Namespace(parts[1]).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	var pods []*corev1.Pod
	for i := range l.Items {
		if p, err := toPod(&l.Items[i]); err == nil {
			pods = append(pods, p)
		}
	}
	return podTrouble(PodsOf(u, pods))
}
