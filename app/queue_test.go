package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/driftback/driftback/app/config"
	ghapp "github.com/driftback/driftback/app/github"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// waitUntil is eventually with the condition last, as a wait reads best
// where the condition is a long function.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	eventually(t, cond, what)
}

// TestQueueCoalescesPerPullRequest proves a burst of jobs for one pull request
// runs only the newest SHA, and that the newest SHA cancels one in flight.
func TestQueueCoalescesPerPullRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := NewQueue(ctx, 2, 16, time.Minute, discard)
	var mu sync.Mutex
	var ran, cancelled []string
	started := make(chan string, 10)
	release := make(chan struct{})
	job := func(sha string) *Job {
		return &Job{Key: "o/r#1", SHA: sha, Run: func(ctx context.Context) error {
			started <- sha
			if sha == "a" {
				<-release // still running while the burst arrives, whatever the machine's speed
			}
			mu.Lock()
			defer mu.Unlock()
			if ctx.Err() != nil {
				cancelled = append(cancelled, sha)
				return ctx.Err()
			}
			ran = append(ran, sha)
			return nil
		}}
	}
	if err := q.Enqueue(job("a")); err != nil {
		t.Fatal(err)
	}
	if got := <-started; got != "a" {
		t.Fatalf("started %s", got)
	}
	for _, sha := range []string{"b", "c", "d", "e"} {
		if err := q.Enqueue(job(sha)); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	if got := <-started; got != "e" {
		t.Fatalf("after a burst, started %s, want only the newest, e", got)
	}
	waitUntil(t, "e to finish", func() bool { mu.Lock(); defer mu.Unlock(); return len(ran) == 1 })
	mu.Lock()
	defer mu.Unlock()
	if len(cancelled) != 1 || cancelled[0] != "a" || ran[0] != "e" {
		t.Errorf("ran %v, cancelled %v; want e ran and a cancelled", ran, cancelled)
	}
	if len(started) != 0 {
		t.Errorf("an older SHA of the burst ran too")
	}
}

// TestQueueSurvivesPanics proves a panicking job is reported through Fail and
// the worker goes on with the next job.
func TestQueueSurvivesPanics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := NewQueue(ctx, 1, 16, time.Minute, discard)
	var failed atomic.Value
	var after atomic.Bool
	_ = q.Enqueue(&Job{Key: "o/r#1", Run: func(context.Context) error { panic("boom") },
		Fail: func(_ context.Context, err error) { failed.Store(err.Error()) }})
	_ = q.Enqueue(&Job{Key: "o/r#2", Run: func(context.Context) error { after.Store(true); return nil }})
	waitUntil(t, "the next job", after.Load)
	if msg, _ := failed.Load().(string); msg != "internal error: boom" {
		t.Errorf("Fail got %q", msg)
	}
}

func TestQueueIsBoundedAndDrops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	block := make(chan struct{})
	q := NewQueue(ctx, 1, 2, time.Minute, discard)
	var cause atomic.Value
	_ = q.Enqueue(&Job{Key: "o/r#1", SHA: "x", Run: func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			cause.Store(context.Cause(ctx))
		case <-block:
		}
		return nil
	}})
	waitUntil(t, "the first job to start", func() bool { return q.Depth() == 0 })
	for i, want := range []error{nil, nil, ErrQueueFull} {
		err := q.Enqueue(&Job{Key: "o/r#" + string(rune('2'+i)), Run: func(context.Context) error { return nil }})
		if !errors.Is(err, want) && err != want {
			t.Errorf("enqueue %d: %v, want %v", i, err, want)
		}
	}
	q.Drop("o/r#1", errPullClosed)
	waitUntil(t, "the running job to be cancelled", func() bool { return cause.Load() != nil })
	if c := cause.Load().(error); !errors.Is(c, errPullClosed) {
		t.Errorf("cancelled with %v", c)
	}
	close(block)
}

// TestQueueFullDoesNotCancelRunningWork proves a newer SHA refused for lack of
// room leaves the running job alone: refusing must not lose both.
func TestQueueFullDoesNotCancelRunningWork(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := NewQueue(ctx, 1, 1, time.Minute, discard)
	release := make(chan struct{})
	var cancelled atomic.Bool
	_ = q.Enqueue(&Job{Key: "o/r#1", SHA: "a", Run: func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			cancelled.Store(true)
		case <-release:
		}
		return nil
	}})
	waitUntil(t, "a to start", func() bool { return q.Depth() == 0 })
	_ = q.Enqueue(&Job{Key: "o/r#2", Run: func(context.Context) error { return nil }})
	if err := q.Enqueue(&Job{Key: "o/r#1", SHA: "b", Run: func(context.Context) error { return nil }}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("enqueue b: %v, want ErrQueueFull", err)
	}
	close(release)
	q.Close(context.Background())
	if cancelled.Load() {
		t.Errorf("the running job was cancelled by a job that was refused")
	}
}

// TestQueueShutdown proves Close lets running work finish within the grace
// period, cancels it after, and reports nothing on the pull requests.
func TestQueueShutdown(t *testing.T) {
	q := NewQueue(context.Background(), 2, 8, time.Minute, discard)
	var finished, failed atomic.Int64
	for i, d := range []time.Duration{50 * time.Millisecond, time.Hour} {
		_ = q.Enqueue(&Job{Key: "o/r#" + string(rune('1'+i)), Run: func(ctx context.Context) error {
			select {
			case <-time.After(d):
				finished.Add(1)
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}, Fail: func(context.Context, error) { failed.Add(1) }})
	}
	waitUntil(t, "both to start", func() bool { return q.Depth() == 0 })
	grace, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	q.Close(grace)
	if finished.Load() != 1 || failed.Load() != 0 {
		t.Errorf("%d finished, %d reported failed; want the short job finished and nothing reported", finished.Load(), failed.Load())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %s", took)
	}
	if err := q.Enqueue(&Job{Key: "late"}); !errors.Is(err, ErrQueueFull) {
		t.Errorf("a closed queue took a job: %v", err)
	}
}

// TestQueueRunsAJobAgainAfterGitHubsWait: a job that GitHub told to wait
// longer than a worker holds on runs again once the wait is over, without
// reporting a failure; a newer job for its key, or a drop, comes instead of
// it, and a job waiting out a limit holds no worker meanwhile.
func TestQueueRunsAJobAgainAfterGitHubsWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := NewQueue(ctx, 1, 16, time.Minute, discard)
	const wait = 300 * time.Millisecond
	var mu sync.Mutex
	var runs []string
	var at []time.Time
	var failed atomic.Int64
	job := func(key, sha string, limited *atomic.Int64) *Job {
		return &Job{Key: key, SHA: sha, Fail: func(context.Context, error) { failed.Add(1) },
			Run: func(context.Context) error {
				mu.Lock()
				runs = append(runs, key+"@"+sha)
				at = append(at, time.Now())
				mu.Unlock()
				if limited.Add(-1) >= 0 {
					return &RetryLater{Wait: wait, Err: errors.New("API rate limit exceeded")}
				}
				return nil
			}}
	}
	ranAll := func(n int) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return len(runs) == n }
	}

	var once atomic.Int64
	once.Store(1)
	if err := q.Enqueue(job("o/r#1", "a", &once)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the first run", ranAll(1))
	// The one worker is free while #1 waits: #2 runs at once.
	var never atomic.Int64
	if err := q.Enqueue(job("o/r#2", "x", &never)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the run again", ranAll(3))
	mu.Lock()
	if runs[1] != "o/r#2@x" || runs[2] != "o/r#1@a" {
		t.Errorf("runs %v: want #2 while #1 waits, then #1 again", runs)
	}
	if d := at[2].Sub(at[0]); d < wait {
		t.Errorf("ran again %s after GitHub's wait of %s", d, wait)
	}
	mu.Unlock()

	// A newer commit while the old one waits: only the newer one runs.
	once.Store(1)
	if err := q.Enqueue(job("o/r#3", "old", &once)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the old commit's run", ranAll(4))
	if err := q.Enqueue(job("o/r#3", "new", &never)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the new commit's run", ranAll(5))
	// A pull request closed while its job waits: nothing runs.
	once.Store(1)
	if err := q.Enqueue(job("o/r#4", "a", &once)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the closed pull request's run", ranAll(6))
	q.Drop("o/r#4", errPullClosed)
	// Past both waits, with a job queued after them to know the queue moved on.
	time.Sleep(2 * wait) // the waits that must not end in a run
	if err := q.Enqueue(job("o/r#5", "a", &never)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the last run", ranAll(7))
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"o/r#1@a", "o/r#2@x", "o/r#1@a", "o/r#3@old", "o/r#3@new", "o/r#4@a", "o/r#5@a"}; !slices.Equal(runs, want) {
		t.Errorf("runs %v, want %v", runs, want)
	}
	if n := failed.Load(); n != 0 {
		t.Errorf("%d failures reported for jobs that only waited", n)
	}
}

// TestAJobThatMustWaitYieldsToAnEventThatCameWhileItRan: when GitHub's next
// event for a pull request arrives while its job runs, and that job then
// finds it must wait out GitHub's limit, the newer job reports and the older
// one never runs again; so too when the pull request closes as the job
// returns.
func TestAJobThatMustWaitYieldsToAnEventThatCameWhileItRan(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := NewQueue(ctx, 1, 16, time.Minute, discard)
	const wait = 100 * time.Millisecond
	var mu sync.Mutex
	var runs []string
	// job records its run as name, then does then (if any).
	job := func(key, name string, then func() error) *Job {
		return &Job{Key: key, SHA: "a", Run: func(context.Context) error {
			mu.Lock()
			runs = append(runs, name)
			mu.Unlock()
			if then == nil {
				return nil
			}
			return then()
		}}
	}
	ran := func(n int) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return len(runs) >= n }
	}
	limited := func() error { return &RetryLater{Wait: wait, Err: errors.New("API rate limit exceeded")} }

	newer := job("o/r#1", "newer", nil)
	if err := q.Enqueue(job("o/r#1", "older", func() error {
		if err := q.Enqueue(newer); err != nil { // a redelivery of the same head
			t.Error(err)
		}
		return limited()
	})); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the newer job's run", ran(2))
	// A pull request closed after its job returned, before the queue set
	// its timer (the log line the queue writes in between closes it).
	closing := job("o/r#3", "closed", limited)
	closing.Log = slog.New(onLog{"job waits out GitHub's rate limit", func() { q.Drop("o/r#3", errPullClosed) }})
	if err := q.Enqueue(closing); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the closed pull request's run", ran(3))
	time.Sleep(3 * wait) // past the waits that must not end in a run
	if err := q.Enqueue(job("o/r#2", "last", nil)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the last run", ran(4))
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"older", "newer", "closed", "last"}; !slices.Equal(runs, want) {
		t.Errorf("runs %v, want %v", runs, want)
	}
}

// onLog calls do when a record with message msg is written.
type onLog struct {
	msg string
	do  func()
}

func (h onLog) Enabled(context.Context, slog.Level) bool { return true }
func (h onLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.do()
	}
	return nil
}
func (h onLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h onLog) WithGroup(string) slog.Handler      { return h }

// TestAForksJobsYieldToTheRepositorysOwn: with the only worker busy, a
// fork's pull requests queued first still run after the repository's own.
func TestAForksJobsYieldToTheRepositorysOwn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	block := make(chan struct{})
	q := NewQueue(ctx, 1, 16, time.Minute, discard)
	_ = q.Enqueue(&Job{Key: "o/r#1", SHA: "x", Run: func(context.Context) error { <-block; return nil }})
	waitUntil(t, "the first job to start", func() bool { return q.Depth() == 0 })
	var mu sync.Mutex
	var ran []string
	job := func(key string, yield bool) *Job {
		return &Job{Key: key, SHA: "x", Yield: yield, Run: func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, key)
			return nil
		}}
	}
	for _, j := range []*Job{job("o/r#fork-1", true), job("o/r#fork-2", true), job("o/r#2", false), job("o/r#3", false)} {
		if err := q.Enqueue(j); err != nil {
			t.Fatal(err)
		}
	}
	close(block)
	waitUntil(t, "every job to run", func() bool { mu.Lock(); defer mu.Unlock(); return len(ran) == 4 })
	if got := strings.Join(ran, " "); got != "o/r#2 o/r#3 o/r#fork-1 o/r#fork-2" {
		t.Errorf("ran %s, want the repository's own first, each kind in its order", got)
	}
}

// TestAForksPushIsRoutedToYield: the route of a pull request's push marks
// a fork's job (or one whose head repository is gone) to yield, and the
// repository's own not.
func TestAForksPushIsRoutedToYield(t *testing.T) {
	cfg, err := config.ParseConfig([]byte("targets:\n- {repo: o/r, path: deploy}\n"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a := NewApp(cfg, nil, nil, discard)
	for head, yield := range map[string]bool{"o/r": false, "O/R": false, "stranger/r": true, "": true} {
		ev := &ghapp.PullRequestEvent{Action: "synchronize", Installation: 1, Number: 7, HeadSHA: "abc", HeadRepo: head,
			Repo: ghapp.Repository{Owner: "o", Name: "r", FullName: "o/r"}}
		jobs, _, ok := a.Route("pull_request", "d", ev, discard)
		if !ok || len(jobs) != 1 || jobs[0].Yield != yield {
			t.Errorf("head repository %q: jobs %+v, want one with Yield %v", head, jobs, yield)
		}
	}
}
