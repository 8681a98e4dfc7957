package queue

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
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// waitUntil waits for cond, and fails t after a minute (a loaded machine
// under the race detector is slow, and a condition that holds ends the wait
// at once).
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestQueueCoalescesPerPullRequest proves a burst of jobs for one pull request
// runs only the newest SHA, and that the newest SHA cancels one in flight.
func TestQueueCoalescesPerPullRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := New(ctx, 2, 16, time.Minute, discard, nil)
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
	q := New(ctx, 1, 16, time.Minute, discard, nil)
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
	q := New(ctx, 1, 2, time.Minute, discard, nil)
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
	for i, want := range []error{nil, nil, ErrFull} {
		err := q.Enqueue(&Job{Key: "o/r#" + string(rune('2'+i)), Run: func(context.Context) error { return nil }})
		if !errors.Is(err, want) && err != want {
			t.Errorf("enqueue %d: %v, want %v", i, err, want)
		}
	}
	q.Drop("o/r#1", ErrPullClosed)
	waitUntil(t, "the running job to be cancelled", func() bool { return cause.Load() != nil })
	if c := cause.Load().(error); !errors.Is(c, ErrPullClosed) {
		t.Errorf("cancelled with %v", c)
	}
	close(block)
}

// TestQueueFullDoesNotCancelRunningWork proves a newer SHA refused for lack of
// room leaves the running job alone: refusing must not lose both.
func TestQueueFullDoesNotCancelRunningWork(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := New(ctx, 1, 1, time.Minute, discard, nil)
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
	if err := q.Enqueue(&Job{Key: "o/r#1", SHA: "b", Run: func(context.Context) error { return nil }}); !errors.Is(err, ErrFull) {
		t.Fatalf("enqueue b: %v, want ErrFull", err)
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
	q := New(context.Background(), 2, 8, time.Minute, discard, nil)
	var finished, failed atomic.Int64
	started, release := make(chan struct{}, 2), make(chan struct{})
	var shutdown atomic.Bool
	fail := func(context.Context, error) { failed.Add(1) }
	// One job ends when the test releases it, the other only when cancelled.
	_ = q.Enqueue(&Job{Key: "o/r#1", Fail: fail, Run: func(ctx context.Context) error {
		started <- struct{}{}
		select {
		case <-release:
			finished.Add(1)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	_ = q.Enqueue(&Job{Key: "o/r#2", Fail: fail, Run: func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		shutdown.Store(errors.Is(context.Cause(ctx), errShutdown))
		return ctx.Err()
	}})
	<-started
	<-started
	grace, endGrace := context.WithCancel(context.Background())
	defer endGrace()
	closed := make(chan struct{})
	go func() { q.Close(grace); close(closed) }()
	waitUntil(t, "Close to begin", func() bool { q.mu.Lock(); defer q.mu.Unlock(); return q.closed })
	close(release)
	waitUntil(t, "the released job to finish", func() bool { return finished.Load() == 1 })
	select {
	case <-closed:
		t.Fatal("Close returned while a job ran within the grace period")
	default:
	}
	endGrace()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close did not return once the grace period ended")
	}
	if !shutdown.Load() || failed.Load() != 0 {
		t.Errorf("cancelled for shutting down: %v; %d reported failed; want the running job cancelled so and nothing reported", shutdown.Load(), failed.Load())
	}
	if err := q.Enqueue(&Job{Key: "late"}); !errors.Is(err, ErrFull) {
		t.Errorf("a closed queue took a job: %v", err)
	}
}

// timers holds the queue's timers until the test fires them: what runs
// after GitHub's wait runs when the test says the wait is over, however
// slow the machine.
type timers struct {
	mu    sync.Mutex
	waits []time.Duration
	due   []func()
}

func (c *timers) after(d time.Duration, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.due = append(c.due, f)
}

// set is how many timers were set so far.
func (c *timers) set() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waits)
}

// pass ends every wait set so far.
func (c *timers) pass() {
	c.mu.Lock()
	due := c.due
	c.due = nil
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// limited is a queue of one worker on timers the test fires, whose jobs
// record their runs.
type limited struct {
	t     *testing.T
	q     *Queue
	clock *timers
	mu    sync.Mutex
	names []string
}

func newLimited(t *testing.T) *limited {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	l := &limited{t: t, q: New(ctx, 1, 16, time.Minute, discard, nil), clock: &timers{}}
	l.q.after = l.clock.after
	return l
}

// job records its run as key@sha, does then (when given) and, the first
// time when told it is limited, returns GitHub's wait of a minute.
func (l *limited) job(key, sha string, limited bool, then func(context.Context)) *Job {
	return &Job{Key: key, SHA: sha, Fail: func(_ context.Context, err error) { l.t.Errorf("%s: failure reported: %v", key, err) },
		Run: func(ctx context.Context) error {
			l.mu.Lock()
			l.names = append(l.names, key+"@"+sha)
			l.mu.Unlock()
			if then != nil {
				then(ctx)
			}
			if limited {
				limited = false
				return &RetryLater{Wait: time.Minute, Err: errors.New("API rate limit exceeded")}
			}
			return nil
		}}
}

func (l *limited) enqueue(j *Job) {
	l.t.Helper()
	if err := l.q.Enqueue(j); err != nil {
		l.t.Fatal(err)
	}
}

func (l *limited) runs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.names)
}

// ran: at least n runs began.
func (l *limited) ran(n int) func() bool { return func() bool { return len(l.runs()) >= n } }

// TestQueueRunsAJobAgainAfterGitHubsWait: a job that GitHub told to wait
// longer than a worker holds on runs again once the wait is over, without
// reporting a failure; a newer job for its key, or a drop, comes instead of
// it, and a job waiting out a limit holds no worker meanwhile.
func TestQueueRunsAJobAgainAfterGitHubsWait(t *testing.T) {
	l := newLimited(t)
	q, clock := l.q, l.clock
	l.enqueue(l.job("o/r#1", "a", true, nil))
	waitUntil(t, "GitHub's wait to be set", func() bool { return clock.set() == 1 })
	// The one worker is free while #1 waits: #2 runs at once.
	l.enqueue(l.job("o/r#2", "x", false, nil))
	waitUntil(t, "#2's run", l.ran(2))
	clock.pass()
	waitUntil(t, "the run again", l.ran(3))
	if got := l.runs(); got[1] != "o/r#2@x" || got[2] != "o/r#1@a" {
		t.Errorf("runs %v: want #2 while #1 waits, then #1 again", got)
	}
	clock.mu.Lock()
	if clock.waits[0] != time.Minute {
		t.Errorf("waited %s, not GitHub's wait of a minute", clock.waits[0])
	}
	clock.mu.Unlock()

	// A newer commit while the old one waits: only the newer one runs.
	l.enqueue(l.job("o/r#3", "old", true, nil))
	waitUntil(t, "the old commit's wait", func() bool { return clock.set() == 2 })
	l.enqueue(l.job("o/r#3", "new", false, nil))
	waitUntil(t, "the new commit's run", l.ran(5))
	// A pull request closed while its job waits: nothing runs.
	l.enqueue(l.job("o/r#4", "a", true, nil))
	waitUntil(t, "the closed pull request's wait", func() bool { return clock.set() == 3 })
	q.Drop("o/r#4", ErrPullClosed)
	clock.pass() // the waits that must not end in a run: anything they queue comes before #5
	l.enqueue(l.job("o/r#5", "a", false, nil))
	waitUntil(t, "the last run", l.ran(7))
	if want := []string{"o/r#1@a", "o/r#2@x", "o/r#1@a", "o/r#3@old", "o/r#3@new", "o/r#4@a", "o/r#5@a"}; !slices.Equal(l.runs(), want) {
		t.Errorf("runs %v, want %v", l.runs(), want)
	}
}

// TestAJobThatMustWaitYieldsToAnEventThatCameWhileItRan: when GitHub's next
// event for a pull request arrives while its job runs, and that job then
// finds it must wait out GitHub's limit, the newer job reports and the older
// one never runs again; so too when the pull request closes as the job
// returns, even after the job's own deadline passed.
func TestAJobThatMustWaitYieldsToAnEventThatCameWhileItRan(t *testing.T) {
	l := newLimited(t)
	q, clock := l.q, l.clock
	// done: n runs, and the last job's return handled (a timer set or not).
	done := func(n int) func() bool { return func() bool { return l.ran(n)() && q.Idle() } }
	newer := l.job("o/r#1", "a", false, nil)
	l.enqueue(l.job("o/r#1", "a", true, func(context.Context) { // a redelivery of the same head
		if err := q.Enqueue(newer); err != nil {
			t.Error(err)
		}
	}))
	waitUntil(t, "the newer job to end", done(2))
	// Closed after the job returned, before the queue set its timer (the
	// log line the queue writes in between closes it).
	closing := l.job("o/r#3", "a", true, nil)
	closing.Log = slog.New(onLog{"job waits out GitHub's rate limit", func() { q.Drop("o/r#3", ErrPullClosed) }})
	l.enqueue(closing)
	waitUntil(t, "the closed pull request's job to end", done(3))
	// So too for a job that returned once its own deadline passed.
	q.mu.Lock()
	q.timeout = time.Millisecond
	q.mu.Unlock()
	late := l.job("o/r#4", "a", true, func(ctx context.Context) {
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			t.Errorf("the late job ended for %v, not its deadline", context.Cause(ctx))
		}
	})
	late.Log = slog.New(onLog{"job waits out GitHub's rate limit", func() { q.Drop("o/r#4", ErrPullClosed) }})
	l.enqueue(late)
	waitUntil(t, "the late job to end", done(4))
	clock.pass() // any wait set: what it queues comes before the last
	l.enqueue(l.job("o/r#2", "a", false, nil))
	waitUntil(t, "the last run", l.ran(5))
	if want := []string{"o/r#1@a", "o/r#1@a", "o/r#3@a", "o/r#4@a", "o/r#2@a"}; !slices.Equal(l.runs(), want) {
		t.Errorf("runs %v, want %v", l.runs(), want)
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
	q := New(ctx, 1, 16, time.Minute, discard, nil)
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
