package driftloop

import (
	"strings"
	"testing"
	"time"

	"github.com/driftback/driftback/app/config"
	ghapp "github.com/driftback/driftback/app/github"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/report"
)

// TestADashboardViewHidesSecretVariables: a target built with a Flux
// variable from a Secret shows drift on a field whose Git and live values
// hold the Secret's value; the dashboard shows neither, nor the object's
// name built from it.
func TestADashboardViewHidesSecretVariables(t *testing.T) {
	const secret = "tok-3f9a27c1"
	tg := targets.Target{Target: config.Target{Name: "apps", Cluster: "prod", Path: "clusters/prod"}}
	c := &driftCheck{t: tg, now: time.Unix(0, 0), hidden: []string{secret}}
	ch := drift.Change{Action: drift.ActionUpdate, Kind: "ConfigMap", Namespace: "shop", Name: "cfg-" + secret,
		Fields: []object.Field{{Path: ".data.url", Live: "https://x:" + secret + "@db/v2", Desired: "https://x:" + secret + "@db/v1", Manager: "kubectl-edit"}}}
	e := entry{key: "field", change: ch, field: &fieldOf{path: ".data.url", manager: "kubectl-edit", git: ch.Fields[0].Desired, live: ch.Fields[0].Live}}
	v := c.view([]entry{e}, nil, ghapp.PullOutcome{}, nil)
	// A short Secret value ("prod") is hidden in what is shown, never in the
	// keys, names and IDs the boxes and the merge of parts go by.
	short := &driftCheck{t: tg, now: time.Unix(0, 0), hidden: []string{"prod"}}
	sv := short.view([]entry{e}, nil, ghapp.PullOutcome{}, nil)
	if sv.Key != tg.Slug() || sv.Cluster != "prod" || sv.Path != "clusters/prod" || sv.Changes[0].ID != v.Changes[0].ID {
		t.Errorf("a hidden value changed the part's identity: key %q, cluster %q, path %q", sv.Key, sv.Cluster, sv.Path)
	}
	body, _ := report.Dashboard("", "prod", []report.DashboardTarget{v}, map[string]bool{"prod": true})
	if strings.Contains(body, secret) || strings.Contains(body, "3f9a27c1") {
		t.Fatalf("the dashboard shows the Secret's value:\n%s", body)
	}
	if !strings.Contains(body, "https://x:(hidden)@db/v2") {
		t.Errorf("the live value is not shown with the Secret's part hidden:\n%s", body)
	}
}

// TestAProposeNowRequestEndsTheQuietPeriod: a change waiting out an hour's
// quiet period is ready at once when a person asked for it after it was
// first seen; a request made before the change was seen (another value, an
// earlier change) does not count.
func TestAProposeNowRequestEndsTheQuietPeriod(t *testing.T) {
	d, tg, st := quietShop()
	start := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	r, wait := d.quiet(st, tg, liveChanges{changes: []drift.Change{scaled(5)}}, start, nil)
	if len(r.changes) != 0 || wait != time.Hour || len(r.entries) != 1 {
		t.Fatalf("first seen: %d ready, wait %v, %d entries", len(r.changes), wait, len(r.entries))
	}
	id := changeID(r.entries[0].key)
	early := []ghapp.Request{{Tick: report.Tick{Kind: report.TickProposeNow, Target: "shop", Item: id}, At: start.Add(-time.Minute)}}
	if r, _ := d.quiet(st, tg, liveChanges{changes: []drift.Change{scaled(5)}}, start.Add(time.Minute), early); len(r.changes) != 0 || r.asked {
		t.Error("a request older than the change proposed it")
	}
	asked := []ghapp.Request{{Tick: report.Tick{Kind: report.TickProposeNow, Target: "shop", Item: id}, At: start.Add(time.Minute)}}
	r, wait = d.quiet(st, tg, liveChanges{changes: []drift.Change{scaled(5)}}, start.Add(2*time.Minute), asked)
	if len(r.changes) != 1 || !r.asked || wait != 0 {
		t.Errorf("asked: %d ready, asked %v, wait %v; want the change at once", len(r.changes), r.asked, wait)
	}
	// Another value of the field is another change: the request was not for it.
	if r, _ := d.quiet(st, tg, liveChanges{changes: []drift.Change{scaled(6)}}, start.Add(3*time.Minute), asked); len(r.changes) != 0 {
		t.Error("a request for one value proposed another")
	}
}

// TestARequestInTheSecondTheChangeWasSeenCounts: GitHub gives a request's
// time in whole seconds; a person quick enough to tick the box in the
// second the change was first seen asked for it all the same.
func TestARequestInTheSecondTheChangeWasSeenCounts(t *testing.T) {
	d, tg, st := quietShop()
	seen := time.Date(2026, 12, 2, 9, 0, 0, 332_000_000, time.UTC)
	r, _ := d.quiet(st, tg, liveChanges{changes: []drift.Change{scaled(5)}}, seen, nil)
	asked := []ghapp.Request{{Tick: report.Tick{Kind: report.TickProposeNow, Target: "shop", Item: changeID(r.entries[0].key)}, At: seen.Truncate(time.Second)}}
	if r, _ := d.quiet(st, tg, liveChanges{changes: []drift.Change{scaled(5)}}, seen.Add(600*time.Millisecond), asked); len(r.changes) != 1 || !r.asked {
		t.Errorf("a request in the second the change was seen: %d ready, asked %v", len(r.changes), r.asked)
	}
}

// quietShop is a drift loop with one target, shop, whose quiet period is an
// hour, and its state.
func quietShop() (*DriftLoop, targets.Target, *targetState) {
	tg := targets.Target{Target: config.Target{Name: "shop"}}
	tg.Policy.QuietPeriod = time.Hour
	return &DriftLoop{}, tg, &targetState{seen: map[string]time.Time{}, present: map[string]bool{}}
}
