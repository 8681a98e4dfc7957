package github

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/driftback/driftback/internal/githubfake"
)

// TestPacerKeepsUnderGitHubsLimits schedules a burst of 300 content-creating
// requests at the default pace and requires that no minute holds more than
// 80 and no hour more than 500 (GitHub's published secondary limits), and
// that the burst is not held back more than those limits ask.
func TestPacerKeepsUnderGitHubsLimits(t *testing.T) {
	p := newPacer(RetryPolicy{}.withDefaults())
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var at []time.Time
	for range 300 {
		at = append(at, p.turnAt(start))
	}
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
	// The hour's bucket (50 at once, then 450 an hour: one every 8 s) sets
	// the pace of a burst this size: the last goes after about 250 × 8 s.
	if last := at[len(at)-1].Sub(start); last < 1900*time.Second || last > 2100*time.Second {
		t.Errorf("the 300th request goes after %s, want about 2000 s", last)
	}
	if first := at[19].Sub(start); first != 0 {
		t.Errorf("the first 20 requests wait %s, want none", first)
	}
}

// TestPaceThroughTheClient: an installation's client spaces its writes to
// the configured pace (120 a minute: 30 at once, then 1.5 a second), while
// reads go unpaced.
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
	// 30 at once, then 9 more at 1.5 a second.
	if d := time.Since(start); d < 5500*time.Millisecond || d > 12*time.Second {
		t.Errorf("39 writes took %s, want about 6 s at 120 a minute", d)
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
	// 4 a minute: one at once, then one every 20 s.
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
	if !later || wait <= MaxPaceHold || wait > 20*time.Second {
		t.Fatalf("the second write: err %v (wait %s, later %v), want a pace error of about 20 s", err, wait, later)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the call held its caller %s", d)
	}
	if n := len(gh.Comments("o/r", 1)); n != 1 {
		t.Errorf("%d comments written, want the first alone", n)
	}
}
