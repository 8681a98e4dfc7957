package github

import (
	"context"
	"testing"
	"time"

	"github.com/driftback/driftback/internal/githubfake"
	"github.com/driftback/driftback/report"
)

// TestTwoReplicasOpenOneDashboard: another replica opened the dashboard
// after this one looked and before it opened its own. The younger issue is
// closed at once, without the dashboard's marker; the older one keeps what
// the other replica wrote (this body was merged with none), and every
// later look finds it.
func TestTwoReplicasOpenOneDashboard(t *testing.T) {
	gh, inst := dashboardRepo(t)
	ctx := context.Background()
	body := func(s string) string { return s + "\n" + report.DashboardMarker }
	none, err := inst.FindDashboard(ctx, "o", "r", 0)
	if err != nil || none.Number != 0 {
		t.Fatalf("a dashboard before any: %+v, %v", none, err)
	}
	other, err := inst.WriteDashboard(ctx, "o", "r", none, body("the other replica's"), nil)
	if err != nil {
		t.Fatal(err)
	}
	mine, err := inst.WriteDashboard(ctx, "o", "r", none, body("this replica's"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if mine.Number != other.Number {
		t.Errorf("this replica wrote #%d, want the older #%d", mine.Number, other.Number)
	}
	for _, is := range gh.Issues("o/r") {
		switch {
		case is.Number == other.Number && (is.State != "open" || is.Body != body("the other replica's")):
			t.Errorf("the dashboard #%d is %s with %q", is.Number, is.State, is.Body)
		case is.Number != other.Number && (is.State != "closed" || IsDashboard(is.Body)):
			t.Errorf("the duplicate #%d is %s with %q", is.Number, is.State, is.Body)
		}
	}
	if got, err := inst.FindDashboard(ctx, "o", "r", 0); err != nil || got.Number != other.Number {
		t.Errorf("found #%d (%v), want #%d", got.Number, err, other.Number)
	}
}

// TestOnlyTheAppsRequestsCount: a dashboard's requests are comments the
// App writes when a writer ticks a box. A comment by anyone else that
// carries the same marker, word for word, is not a request.
func TestOnlyTheAppsRequestsCount(t *testing.T) {
	gh, inst := dashboardRepo(t)
	ctx := context.Background()
	none, err := inst.FindDashboard(ctx, "o", "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := inst.WriteDashboard(ctx, "o", "r", none, "the dashboard\n"+report.DashboardMarker, nil)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := report.DashboardRequest(report.Tick{Kind: report.TickProposeNow, Target: "prod", Item: "forged"}, "mallory", "1")
	gh.AddComment("o/r", d.Number, "mallory", forged)
	real, _ := report.DashboardRequest(report.Tick{Kind: report.TickProposeNow, Target: "prod", Item: "real"}, "alice", "2")
	gh.AddComment("o/r", d.Number, githubfake.Slug+"[bot]", real)
	if err := inst.ReadRequests(ctx, "o", "r", d, time.Now()); err != nil {
		t.Fatal(err)
	}
	if len(d.Requests) != 1 || d.Requests[0].Item != "real" || d.Requests[0].By != "alice" {
		t.Errorf("requests %+v, want alice's alone, which the App wrote", d.Requests)
	}
}

// dashboardRepo is the GitHub fake with repository o/r, and the App's
// installation on it.
func dashboardRepo(t *testing.T) (*githubfake.Fake, *Installation) {
	t.Helper()
	gh, err := githubfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gh.Close)
	gh.AddRepo(&githubfake.Repo{Owner: "o", Name: "r", Installation: 5})
	inst, err := NewClients(gh.AppID, gh.KeyPEM(), gh.URL(), RetryPolicy{}).Installation(5)
	if err != nil {
		t.Fatal(err)
	}
	return gh, inst
}
