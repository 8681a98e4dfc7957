// Package queue runs the App's jobs on a fixed pool of workers: a job per
// pull request (or other key) at a time, a newer commit replacing or
// cancelling an older one, a closed pull request's work dropped, and a job
// that GitHub's rate limit stops run again once it allows, on no worker
// meanwhile.
package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/driftback/driftback/app/metrics"
)

// ErrFull is returned when no more work can wait; the delivery gets 503.
var ErrFull = errors.New("the work queue is full")

// ErrSuperseded cancels work that a newer head SHA replaced: a job's
// context.Cause says so.
var ErrSuperseded = errors.New("superseded by a newer commit")

// ErrPullClosed cancels work on a pull request that was closed.
var ErrPullClosed = errors.New("the pull request was closed")

// errShutdown cancels work still running when the grace period of a shutdown
// ends; it is not the pull request's fault, so nothing is reported there.
var errShutdown = errors.New("driftback is shutting down")

// Job is the work one event asks for. Jobs with the same Key are coalesced: a
// queued job is replaced by a newer one, and a running job with another SHA is
// cancelled when a newer one arrives.
type Job struct {
	// Key is what jobs coalesce on: "owner/repo#12" for a pull request.
	Key string
	// SHA is the head commit the job reports on.
	SHA string
	// Run does the work on a context independent of the webhook request.
	Run func(ctx context.Context) error
	// Fail, when set, reports an error or a panic of Run where a person sees it
	// (the pull request); it runs on a fresh context.
	Fail func(ctx context.Context, err error)
	// Log carries the delivery, repository, pull request and SHA.
	Log *slog.Logger
	// Yield lets every other job waiting go first: a fork's pull request,
	// whose author pushes as often as they like, does not hold up the
	// repository's own.
	Yield bool
}

// RetryLater is a job's error when GitHub asked it to wait longer than a
// worker should hold on (its primary limit is spent until the reset): the
// job runs again after Wait, on no worker meanwhile, unless a newer event for
// its key came first, whose job then reports instead.
type RetryLater struct {
	Wait time.Duration
	Err  error
}

func (e *RetryLater) Error() string {
	return fmt.Sprintf("%v (runs again in %s)", e.Err, e.Wait.Round(time.Second))
}

// Unwrap returns GitHub's answer.
func (e *RetryLater) Unwrap() error { return e.Err }

type running struct {
	job *Job
	// ctx is cancelled, with its cause, by a newer job or a drop: the
	// job's own context may have ended first at its deadline, which then
	// stays its cause.
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// Queue runs jobs on a fixed pool of workers.
type Queue struct {
	ctx     context.Context
	stop    context.CancelCauseFunc
	size    int
	timeout time.Duration
	log     *slog.Logger
	// metrics, when set, times each job.
	metrics *metrics.Metrics

	mu      sync.Mutex
	wake    chan struct{}
	pending map[string]*Job
	order   []string
	running map[string]*running
	// later holds the jobs waiting out GitHub's rate limit, each with the
	// token of its timer; a newer job or a drop for the key forgets it.
	later  map[string]uint64
	tokens uint64
	// after runs f once d has passed: time.AfterFunc, or a test's clock.
	after  func(d time.Duration, f func())
	closed bool
	wg     sync.WaitGroup
}

// New starts workers that run jobs until Close (or the end of parent).
// Jobs run on the queue's own context, not on any request's; size bounds the
// jobs waiting; timeout bounds one job; m, when not nil, times each job.
func New(parent context.Context, workers, size int, timeout time.Duration, log *slog.Logger, m *metrics.Metrics) *Queue {
	ctx, stop := context.WithCancelCause(parent)
	q := &Queue{
		ctx: ctx, stop: stop, size: size, timeout: timeout, log: log, metrics: m,
		wake:    make(chan struct{}, 1),
		pending: map[string]*Job{},
		running: map[string]*running{},
		later:   map[string]uint64{},
		after:   func(d time.Duration, f func()) { time.AfterFunc(d, f) },
	}
	for range workers {
		q.wg.Add(1)
		go q.work()
	}
	return q
}

// Enqueue adds a job, replacing a queued job with the same key and cancelling
// a running one for another SHA.
func (q *Queue) Enqueue(j *Job) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.enqueue(j)
}

// enqueue is Enqueue with q.mu held.
func (q *Queue) enqueue(j *Job) error {
	if q.closed {
		return ErrFull
	}
	_, queued := q.pending[j.Key]
	if !queued && len(q.pending) >= q.size {
		return ErrFull // refused before anything running is cancelled
	}
	if r, ok := q.running[j.Key]; ok && r.job.SHA != j.SHA {
		r.cancel(ErrSuperseded)
	}
	delete(q.later, j.Key) // this job reports instead
	q.pending[j.Key] = j
	if !queued {
		q.order = append(q.order, j.Key)
	}
	q.signal()
	return nil
}

// Drop removes the queued job of key and cancels a running one: the pull
// request was closed.
func (q *Queue) Drop(key string, cause error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.pending, key)
	delete(q.later, key)
	if r, ok := q.running[key]; ok {
		r.cancel(cause)
	}
}

// Idle says whether no job waits or runs (one waiting out GitHub's limit
// aside).
func (q *Queue) Idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending) == 0 && len(q.running) == 0
}

// Depth is the number of jobs waiting.
func (q *Queue) Depth() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

func (q *Queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// next takes the oldest queued job whose key is not running.
func (q *Queue) next() (*Job, context.Context, context.CancelFunc) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, nil, nil
	}
	live := q.order[:0]
	for _, k := range q.order {
		if _, ok := q.pending[k]; ok { // dropped keys leave the order here
			live = append(live, k)
		}
	}
	q.order = live
	pick := -1
	for i, k := range q.order {
		if _, busy := q.running[k]; busy {
			continue
		}
		if pick < 0 || (q.pending[q.order[pick]].Yield && !q.pending[k].Yield) {
			pick = i
		}
		if !q.pending[k].Yield {
			break
		}
	}
	if i := pick; i >= 0 {
		k := q.order[i]
		j := q.pending[k]
		q.order = append(q.order[:i:i], q.order[i+1:]...)
		delete(q.pending, k)
		ended, cancelCause := context.WithCancelCause(q.ctx)
		ctx, cancel := context.WithTimeout(ended, q.timeout)
		q.running[k] = &running{job: j, ctx: ended, cancel: cancelCause}
		if len(q.pending) > 0 {
			q.signal() // another idle worker may take the next one
		}
		return j, ctx, func() { cancel(); cancelCause(nil) }
	}
	return nil, nil, nil
}

func (q *Queue) work() {
	defer q.wg.Done()
	for {
		j, ctx, cancel := q.next()
		if j == nil {
			select {
			case <-q.wake:
				continue
			case <-q.ctx.Done():
				return
			}
		}
		q.run(ctx, j)
		cancel()
		q.mu.Lock()
		delete(q.running, j.Key)
		more := len(q.pending) > 0
		q.mu.Unlock()
		if more {
			q.signal()
		}
	}
}

// run runs one job; a panic becomes an error reported like any other.
func (q *Queue) run(ctx context.Context, j *Job) {
	log := j.Log
	if log == nil {
		log = q.log
	}
	start := time.Now()
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("job panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = fmt.Errorf("internal error: %v", r)
			}
		}()
		return j.Run(ctx)
	}()
	var later *RetryLater
	switch cause := context.Cause(ctx); {
	case err == nil:
		q.metrics.Job("done", time.Since(start))
		log.Info("job done", "seconds", time.Since(start).Seconds())
	case cancelled(cause):
		q.metrics.Job("cancelled", time.Since(start))
		log.Info("job cancelled", "reason", cause.Error())
	case errors.As(err, &later):
		log.Warn("job waits out GitHub's rate limit", "err", later.Err, "seconds", later.Wait.Seconds())
		if q.runAfter(j, later.Wait, log) {
			q.metrics.Job("deferred", time.Since(start))
		} else {
			q.metrics.Job("cancelled", time.Since(start))
			log.Info("job cancelled", "reason", "a newer event, a close or a shutdown came as it returned")
		}
	default:
		q.metrics.Job("failed", time.Since(start))
		q.metrics.Failure("job")
		log.Error("job failed", "err", err)
		if j.Fail != nil {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(q.ctx), time.Minute)
			j.Fail(fctx, err)
			cancel()
		}
	}
}

// cancelled tells whether a job's cause ends it without a report.
func cancelled(cause error) bool {
	return errors.Is(cause, ErrSuperseded) || errors.Is(cause, ErrPullClosed) || errors.Is(cause, errShutdown)
}

// runAfter queues j again after d, unless a newer job or a drop for its key
// came meanwhile, or the queue closed; false when one came already. It
// decides under the lock Enqueue and Drop take: one that came after j
// returned but before this call has already ended j's run (nothing else
// ends it before it returns) or queued the newer job, and one that comes
// later forgets the timer, which checks and queues in one hold of the lock.
func (q *Queue) runAfter(j *Job, d time.Duration, log *slog.Logger) bool {
	q.mu.Lock()
	if _, newer := q.pending[j.Key]; newer || q.closed || q.running[j.Key].ctx.Err() != nil {
		q.mu.Unlock()
		return false
	}
	q.tokens++
	token := q.tokens
	q.later[j.Key] = token
	q.mu.Unlock()
	q.after(d, func() {
		var err error
		q.mu.Lock()
		if !q.closed && q.later[j.Key] == token {
			delete(q.later, j.Key)
			err = q.enqueue(j)
		}
		q.mu.Unlock()
		if err != nil {
			log.Warn("job not queued again: the next event for it brings it back", "err", err)
		}
	})
	return true
}

// Close stops taking jobs, drops the queued ones (GitHub's next event or a
// redelivery brings them back) and lets running jobs finish until ctx ends;
// then it cancels them, which reports nothing on their pull requests, and waits
// for the workers to return.
func (q *Queue) Close(ctx context.Context) {
	q.mu.Lock()
	q.closed = true
	q.pending = map[string]*Job{}
	q.order = nil
	q.mu.Unlock()
	idle := func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.running) == 0
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !idle() {
		select {
		case <-tick.C:
			continue
		case <-ctx.Done():
		}
		break
	}
	q.stop(errShutdown) // cancels what still runs; idle workers return
	q.wg.Wait()
}
