package github

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/driftback/driftback/internal/githubfake"
)

// TestPacerKeepsUnderGitHubsLimits schedules a burst of 300 content-creating
// requests and 100 urgent ones (comments and required checks) at the default
// pace, and requires that no minute holds more than 80 and no hour more than
// 500 of them together (GitHub's published secondary limits); that the
// burst is not held back more than the limits ask; and that an urgent
// request never waits behind the others.
func TestPacerKeepsUnderGitHubsLimits(t *testing.T) {
	p := newPacer(RetryPolicy{}.withDefaults())
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var at, normal []time.Time
	for i := range 400 {
		turn := p.turnAt(start, i%4 == 3)
		at = append(at, turn)
		if i%4 != 3 {
			normal = append(normal, turn)
		}
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	most := func(window time.Duration) int {
		best := 0
		for i := range at {
			n := 0
			for j := i; j < len(at) && at[j].Sub(at[i]) < window; j++ {
				n++
			}
			best = max(best, n)
		}
		return best
	}
	if n := most(time.Minute); n > 80 {
		t.Errorf("%d requests in one minute, want at most 80", n)
	}
	if n := most(time.Hour); n > 500 {
		t.Errorf("%d requests in one hour, want at most 500", n)
	}
	// The normal lane's hour (37 at once, then 338 an hour: one every
	// 10.7 s) sets the pace of 300: the last goes after about 263 × 10.7 s.
	if last := normal[len(normal)-1].Sub(start); last < 2650*time.Second || last > 2950*time.Second {
		t.Errorf("the 300th request goes after %s, want about 2800 s", last)
	}
	if first := normal[14].Sub(start); first != 0 {
		t.Errorf("the first 15 requests wait %s, want none", first)
	}
	// However many others wait, an urgent request goes at its lane's pace.
	fresh := newPacer(RetryPolicy{}.withDefaults())
	for range 300 {
		fresh.turnAt(start, false)
	}
	if turn := fresh.turnAt(start, true); !turn.Equal(start) {
		t.Errorf("an urgent request behind 300 others waits %s, want none", turn.Sub(start))
	}
}

// TestPaceThroughTheClient: an installation's client spaces its writes to
// the configured pace (120 a minute, of which the normal lane's 90: 22 at
// once, then 68 a minute), while reads go unpaced.
func TestPaceThroughTheClient(t *testing.T) {
	gh, err := githubfake.New()
	if err != nil {
		t.Fatal(err)
	}
	defer gh.Close()
	gh.AddRepo(&githubfake.Repo{Owner: "o", Name: "r", Installation: 5})
	c, err := NewClients(gh.AppID, gh.KeyPEM(), gh.URL(), RetryPolicy{PerMinute: 120, PerHour: -1}).Client(5)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	for range 50 {
		if _, _, err := c.Repositories.Get(ctx, "o", "r"); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("50 reads took %s: reads must not be paced", d)
	}
	start = time.Now()
	for i := range 39 {
		if _, _, err := c.Issues.CreateComment(ctx, "o", "r", 1, &github.IssueComment{Body: github.String(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	// 22 at once, then 17 more at 68 a minute.
	if d := time.Since(start); d < 14*time.Second || d > 20*time.Second {
		t.Errorf("39 writes took %s, want about 15 s at 90 a minute", d)
	}
	if n := len(gh.Comments("o/r", 1)); n != 39 {
		t.Errorf("%d comments written, want 39", n)
	}
}

// TestALongPaceWaitGivesTheWorkerBack: a write whose turn in the pace is
// further away than MaxPaceHold is not waited for: the call fails at once
// with when the turn comes, which the job reads as "run again then" (as a
// rate limit), so the worker serves other pull requests meanwhile.
func TestALongPaceWaitGivesTheWorkerBack(t *testing.T) {
	gh, err := githubfake.New()
	if err != nil {
		t.Fatal(err)
	}
	defer gh.Close()
	gh.AddRepo(&githubfake.Repo{Owner: "o", Name: "r", Installation: 5})
	// 4 a minute, of which the normal lane's 3: one at once, then one
	// every 30 s.
	c, err := NewClients(gh.AppID, gh.KeyPEM(), gh.URL(), RetryPolicy{PerMinute: 4, PerHour: -1}).Client(5)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := c.Issues.CreateComment(ctx, "o", "r", 1, &github.IssueComment{Body: github.String("first")}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err = c.Issues.CreateComment(ctx, "o", "r", 1, &github.IssueComment{Body: github.String("second")})
	wait, later := RateLimitWait(err)
	if !later || wait <= MaxPaceHold || wait > 30*time.Second {
		t.Fatalf("the second write: err %v (wait %s, later %v), want a pace error of about 30 s", err, wait, later)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the call held its caller %s", d)
	}
	if n := len(gh.Comments("o/r", 1)); n != 1 {
		t.Errorf("%d comments written, want the first alone", n)
	}
}

// TestATurnTheHourRefusesSpendsNothing: when the hour's window refuses a
// write (its turn is far away), the minute's token reserved for it is given
// back: refused writes do not use up the minute for the writes that can go.
func TestATurnTheHourRefusesSpendsNothing(t *testing.T) {
	p := newPacer(RetryPolicy{PerMinute: 80, PerHour: 4}.withDefaults())
	lane := p.lane(false)
	// The hour's burst is spent.
	for lane.hour.Tokens() >= 1 {
		lane.hour.ReserveN(time.Now(), 1)
	}
	before := lane.minute.Tokens()
	for range 5 {
		var pace *PaceError
		if err := p.wait(context.Background()); !errors.As(err, &pace) {
			t.Fatalf("err %v, want a pace error", err)
		}
	}
	if after := lane.minute.Tokens(); after < before-0.01 {
		t.Errorf("the minute's tokens went from %.2f to %.2f for writes that never went", before, after)
	}
}
