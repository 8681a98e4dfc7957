package driftloop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/driftback/driftback/app/config"
	ghapp "github.com/driftback/driftback/app/github"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/reconcile/hide"
	"github.com/driftback/driftback/report"
)

// repoDashboard is what this replica knows of a repository's drift
// dashboard. GitHub holds the state: the issue (its blocks, by cluster) and
// the requests recorded on it; this is a cache of it, read again every
// headInterval, when a person ticks a box here, and before every write.
// checkedRefresh bounds how stale the dashboard's check times may be: a
// check that changes nothing else edits the issue at most this often.
const checkedRefresh = 15 * time.Minute

type repoDashboard struct {
	// mu makes one read or write of the issue at a time (two clusters'
	// loops share a repository).
	mu     sync.Mutex
	issue  *ghapp.Dashboard
	readAt time.Time
	// refresh asks for the issue to be read again at the next look.
	refresh bool
	// failedAt is when reading it last failed: it is not tried again for
	// a minute.
	failedAt time.Time
	// writtenAt is when driftback last wrote the issue.
	writtenAt time.Time
	// off says the repository's .github/driftback.yml turns it off.
	off bool
}

func (d *DriftLoop) dashboardOf(repo string) *repoDashboard {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dashboards == nil {
		d.dashboards = map[string]*repoDashboard{}
	}
	k := strings.ToLower(repo)
	if d.dashboards[k] == nil {
		d.dashboards[k] = &repoDashboard{}
	}
	return d.dashboards[k]
}

// DashboardEdited makes the loop read a repository's dashboard again at its
// next look and look now: a person ticked a box.
func (d *DriftLoop) DashboardEdited(repo string) {
	db := d.dashboardOf(repo)
	db.mu.Lock()
	db.refresh = true
	db.mu.Unlock()
	d.Nudge(repo)
}

// dashboardConfigured says app.yml and the repository's own file leave the
// dashboard on.
func (d *DriftLoop) dashboardConfigured(repo string) bool {
	if !d.deps.Config.Server.Dashboard() {
		return false
	}
	db := d.dashboardOf(repo)
	db.mu.Lock()
	defer db.mu.Unlock()
	return !db.off
}

// dashboardOn says the dashboard shows the repository's drift: configured,
// and not closed by a person (then report mode and fights go back to their
// issues until it is reopened).
func (d *DriftLoop) dashboardOn(repo string) bool {
	if !d.dashboardConfigured(repo) {
		return false
	}
	db := d.dashboardOf(repo)
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.issue == nil || db.issue.Number == 0 || db.issue.Open
}

// dashboardShown says the dashboard is known to be open: read, and
// neither closed nor off. Unknown (not read yet, or its read failed) is
// not shown.
func (d *DriftLoop) dashboardShown(repo string) bool {
	if !d.dashboardConfigured(repo) {
		return false
	}
	db := d.dashboardOf(repo)
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.issue != nil && db.issue.Number != 0 && db.issue.Open
}

// requests reads what people asked of a target on its repository's
// dashboard, from the cache when it is fresh.
func (d *DriftLoop) requests(ctx context.Context, gh *ghapp.Installation, t targets.Target, now time.Time) ([]ghapp.Request, error) {
	if !d.dashboardConfigured(t.Repo) {
		return nil, nil
	}
	db := d.dashboardOf(t.Repo)
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := d.readDashboard(ctx, gh, t.Repo, db, now); err != nil {
		if errors.Is(err, errNotRead) {
			return nil, nil
		}
		return nil, err
	}
	key := report.DashboardKey(t.Slug())
	var out []ghapp.Request
	for _, r := range db.issue.Requests {
		if r.Target == key {
			out = append(out, r)
		}
	}
	return out, nil
}

// readDashboard reads the issue and its requests when the cache is stale.
// db.mu is held.
func (d *DriftLoop) readDashboard(ctx context.Context, gh *ghapp.Installation, repo string, db *repoDashboard, now time.Time) error {
	switch {
	case db.refresh:
	case db.issue != nil && now.Sub(db.readAt) < d.deps.Config.Server.DriftInterval:
		// Requests recorded by another replica are read at least this
		// often; one recorded here sets refresh.
		return nil
	case db.issue == nil && now.Sub(db.failedAt) < headInterval:
		return errNotRead
	}
	owner, name, _ := strings.Cut(repo, "/")
	number := 0
	if db.issue != nil {
		number = db.issue.Number
	}
	issue, err := gh.FindDashboard(ctx, owner, name, number)
	if err == nil {
		err = gh.ReadRequests(ctx, owner, name, issue, now)
	}
	if err != nil {
		db.failedAt = now
		return err
	}
	db.issue, db.readAt, db.refresh = issue, now, false
	return nil
}

// errNotRead says the dashboard is not read now: the last read failed a
// moment ago.
var errNotRead = errors.New("the drift dashboard could not be read a moment ago")

// asked is the latest request of a kind and item, if any.
func asked(rs []ghapp.Request, kind, item string) (time.Time, bool) {
	var at time.Time
	found := false
	for _, r := range rs {
		if r.Kind == kind && r.Item == item && (!found || r.At.After(at)) {
			at, found = r.At, true
		}
	}
	return at, found
}

// changeID names a live change and its value on the dashboard: a hash of
// its key in the quiet period's bookkeeping.
func changeID(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:6])
}

// entry is one live change as the quiet period sees it.
type entry struct {
	key    string
	change drift.Change
	// field is the change's field; nil for a whole object.
	field *fieldOf
	since time.Time
	// until is when a waiting change will have stayed; zero when it has.
	until time.Time
	// unmanaged names an object created live.
	unmanaged string
}

// fieldOf is the part of a drifted field the dashboard shows.
type fieldOf struct {
	path, manager string
	// by is who the audit log says made it; nil: the manager, unattributed.
	by         *object.Person
	git, live  any
	at         *time.Time
	hidden     bool
	autoscaler string
}

// view is the dashboard's part of a target after a check: its entries,
// each in the state the plan and GitHub put it in.
func (c *driftCheck) view(entries []entry, plan *prgen.Plan, out ghapp.PullOutcome, fights []prgen.Fight) report.DashboardTarget {
	v := c.viewBase()
	proposed, listed := map[string]string{}, map[string]string{}
	if plan != nil {
		for _, x := range plan.Codified {
			proposed[x.Object+" "+x.Path] = ""
		}
		for _, x := range plan.Adopted {
			proposed[x.Object+" "] = ""
		}
		for _, x := range plan.Manual {
			listed[x.Object+" "+x.Path] = x.Reason
		}
		for _, x := range plan.Unmanaged {
			listed[x.Object+" "] = x.Reason
		}
		for _, x := range plan.Secrets {
			listed[x.Object+" secret"] = "a Secret: driftback never writes Secret values to Git"
		}
		for _, x := range plan.Deleted {
			listed[x+" "] = "deleted live: restore it, or remove it from Git"
		}
	}
	for _, e := range entries {
		dc := report.DashboardChange{ID: changeID(e.key), Since: e.since}
		obj := e.change.Ref().String()
		k := obj + " "
		switch {
		case e.unmanaged != "":
			obj = e.unmanaged
			k = obj + " "
			dc.Live = "(created live)"
		case e.field != nil:
			dc.Field, dc.By, dc.At = e.field.path, e.field.manager, e.field.at
			dc.Git, dc.Live = shown(e.field.git), shown(e.field.live)
			if e.change.Secret || e.field.hidden {
				dc.Git, dc.Live = "(hidden)", "(hidden)"
				k = obj + " secret"
			} else {
				k = obj + " " + e.field.path
			}
			if e.field.by != nil {
				dc.By = e.field.by.String() // a Secret's too: who, never what
			}
		default:
			dc.Git = "(in Git)"
		}
		dc.Object = obj
		switch {
		case !e.until.IsZero():
			dc.State, dc.Until = report.StateWaiting, e.until
			_, dc.Asked = asked(c.requests, report.TickProposeNow, dc.ID)
		case e.field != nil && e.field.autoscaler != "":
			dc.State, dc.Why = report.StateAutoscaled, e.field.autoscaler
		case c.t.Policy.Codify == config.CodifyReport:
			dc.State = report.StateReported
		case out.Declined != 0:
			dc.State, dc.Number = report.StateDeclined, out.Declined
		default:
			n := out.Open
			if n == 0 {
				n = out.Merged
			}
			if why, ok := listed[k]; ok {
				dc.State, dc.Number, dc.Why = report.StateListed, n, why
			} else if _, ok := proposed[k]; ok && n != 0 {
				dc.State, dc.Number = report.StateProposed, n
			} else {
				dc.State, dc.Why = report.StateCannot, "no strategy writes it back"
			}
		}
		v.Changes = append(v.Changes, dc)
	}
	for _, f := range fights {
		v.Changes = append(v.Changes, report.DashboardChange{
			ID: changeID("fight " + f.Object + " " + f.Path), Object: f.Object, Field: f.Path, Since: f.Since,
			Git: shown(f.Last[f.Managers[0]]), Live: shown(f.Last[f.Managers[1]]), By: f.Managers[1],
			State: report.StateFight, Why: fmt.Sprintf("%s and %s changed it %d times in %s", f.Managers[0], f.Managers[1], f.Changes, f.Window),
		})
	}
	v.Open = out.Open
	if out.Declined != 0 {
		_, again := asked(c.requests, report.TickProposeAgain, strconv.Itoa(out.Declined))
		v.Declined = []report.DashboardDeclined{{Number: out.Declined, Asked: again}}
	}
	hideShown(&v, c.hidden)
	return v
}

// hideShown hides values substituted from Secrets in what a part shows:
// its objects, fields, values and reasons; never its keys, cluster, IDs or
// numbers, which the boxes and the merge of parts go by.
func hideShown(v *report.DashboardTarget, hidden []string) {
	if len(hidden) == 0 {
		return
	}
	for i := range v.Changes {
		c := &v.Changes[i]
		c.Git, c.Live, c.Why = hide.In(c.Git, hidden), hide.In(c.Live, hidden), hide.In(c.Why, hidden)
		c.Object, c.Field = hide.In(c.Object, hidden), hide.In(c.Field, hidden)
	}
	v.NotCompared = hide.In(v.NotCompared, hidden)
}

// hidePlanValues hides values substituted from Secrets in what a plan shows
// (values and reasons), leaving the objects, paths and files it is keyed
// by as they are.
func hidePlanValues(p *prgen.Plan, hidden []string) {
	if len(hidden) == 0 {
		return
	}
	for i := range p.Codified {
		hide.Redact(&p.Codified[i].Value, hidden)
		hide.Redact(&p.Codified[i].Was, hidden)
	}
	for _, list := range [][]prgen.Manual{p.Manual, p.Autoscaled, p.Unmanaged} {
		for i := range list {
			hide.Redact(&list[i].Value, hidden)
			list[i].Reason = hide.In(list[i].Reason, hidden)
		}
	}
	for i := range p.Fights {
		for m := range p.Fights[i].Last {
			v := p.Fights[i].Last[m]
			hide.Redact(&v, hidden)
			p.Fights[i].Last[m] = v
		}
	}
	for k, v := range p.Intents {
		p.Intents[k] = hide.In(v, hidden)
	}
}

// viewBase is the target's part with nothing in it yet.
func (c *driftCheck) viewBase() report.DashboardTarget {
	return report.DashboardTarget{Key: c.t.Slug(), Name: c.t.Name, Cluster: c.t.Cluster, Path: c.t.Path, Checked: c.now, Fate: c.t.Found.Fate()}
}

// shown is a value as the dashboard shows it.
func shown(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	b, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// notCompared records why a target was not compared.
func (d *DriftLoop) notCompared(t targets.Target, why string) {
	st := d.state(t)
	d.mu.Lock()
	defer d.mu.Unlock()
	st.view = &report.DashboardTarget{Key: t.Slug(), Name: t.Name, Cluster: t.Cluster, Path: t.Path, NotCompared: why, Checked: d.deps.Now()}
}

// reconcilerStalled records a target whose reconciler fails or has stalled.
func (d *DriftLoop) reconcilerStalled(t targets.Target, h discover.Health) {
	st := d.state(t)
	d.mu.Lock()
	defer d.mu.Unlock()
	st.view = &report.DashboardTarget{Key: t.Slug(), Name: t.Name, Cluster: t.Cluster, Path: t.Path, Checked: d.deps.Now(),
		Reconciler: &report.DashboardReconciler{State: string(h.State), Why: h.Why, Since: h.Since}}
}

// publishDashboards writes a cluster's targets into their repositories'
// dashboards: one read and at most one edit per repository, only when what
// it shows changed.
func (d *DriftLoop) publishDashboards(ctx context.Context, cluster string, ts []targets.Target) {
	defer func() {
		// A defect in the dashboard must not stop the cluster's loop.
		if r := recover(); r != nil {
			d.log.Error("drift dashboard panicked", "cluster", cluster, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	byRepo := map[string][]targets.Target{}
	var repos []string
	for _, t := range ts {
		k := strings.ToLower(t.Repo)
		if byRepo[k] == nil {
			repos = append(repos, t.Repo)
		}
		byRepo[k] = append(byRepo[k], t)
	}
	keep := map[string]bool{}
	for name := range d.deps.Config.Clusters {
		keep[report.DashboardKey(name)] = true
	}
	for _, repo := range repos {
		if ctx.Err() != nil {
			return
		}
		if !d.dashboardConfigured(repo) {
			continue
		}
		var views []report.DashboardTarget
		d.mu.Lock()
		for _, t := range byRepo[strings.ToLower(repo)] {
			if st := d.states[targets.Key(t)]; st != nil && st.view != nil {
				views = append(views, *st.view)
			}
		}
		d.mu.Unlock()
		_, skipped := d.deps.Targets.Of(repo)
		for _, f := range skipped {
			if f.On != cluster {
				continue
			}
			why := f.NotRendered
			if why == "" {
				why = "its source is not a repository on the configured GitHub host"
			}
			views = append(views, report.DashboardTarget{Key: "source-" + f.Object + "-" + f.On, Name: f.Object, Cluster: f.On, Path: f.Path, NotCompared: "not rendered: " + why, Source: true})
		}
		// What discovery leaves out may apply this repository too.
		for _, l := range d.deps.Targets.LeftOutOn(cluster) {
			views = append(views, report.DashboardTarget{Key: "left-out-" + l.Kind + "-" + cluster, Name: l.Kind + " left out", Cluster: cluster,
				NotCompared: l.Say("clusters." + cluster + ".discover.namespaces"), Source: true})
		}
		if err := d.writeDashboard(ctx, repo, cluster, views, keep); err != nil && ctx.Err() == nil {
			d.deps.Metrics.Failure("drift_dashboard")
			d.log.Error("cannot update the drift dashboard", "repo", repo, "cluster", cluster, "err", err)
		}
	}
}

func (d *DriftLoop) writeDashboard(ctx context.Context, repo, cluster string, views []report.DashboardTarget, keep map[string]bool) error {
	db := d.dashboardOf(repo)
	db.mu.Lock()
	defer db.mu.Unlock()
	gh, err := d.deps.GitHub.InstallationFor(ctx, repo)
	if err != nil {
		return err
	}
	now := d.deps.Now()
	if err := d.readDashboard(ctx, gh, repo, db, now); err != nil {
		if errors.Is(err, errNotRead) {
			return nil
		}
		return err
	}
	body, shows := report.Dashboard(db.issue.Body, cluster, views, keep)
	switch {
	case db.issue.Number == 0 && !shows:
		return nil // nothing to show, and no issue to keep current
	case db.issue.Number != 0 && (body == db.issue.Body || !db.issue.Open):
		// Up to date; or closed as last read, which is read again every
		// drift interval to see it reopened, not at every pass.
		return nil
	case db.issue.Number != 0 && report.DashboardSameButChecked(body, db.issue.Body) && now.Sub(db.writtenAt) < checkedRefresh:
		// Only the check times moved: shown again once they are stale.
		return nil
	}
	ctx, cancel := ghapp.WithPublishBudget(ctx, d.deps.PublishTimeout())
	defer cancel()
	owner, name, _ := strings.Cut(repo, "/")
	if db.issue.Number != 0 {
		// Another replica may have written its clusters' parts since the
		// cache was read: merge with the issue as it is now.
		fresh, err := gh.FindDashboard(ctx, owner, name, db.issue.Number)
		if err != nil {
			return err
		}
		fresh.Requests = db.issue.Requests
		db.issue = fresh
		body, _ = report.Dashboard(fresh.Body, cluster, views, keep)
	}
	// A closed dashboard is left alone (WriteDashboard).
	written, err := gh.WriteDashboard(ctx, owner, name, db.issue, body, nil)
	if err != nil {
		return err
	}
	switch {
	case db.issue.Number == 0:
		d.deps.Metrics.DriftAction("dashboard", "opened")
	case written.Body != db.issue.Body:
		d.deps.Metrics.DriftAction("dashboard", "updated")
	}
	db.issue, db.writtenAt = written, now
	return nil
}
