package app

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

// ErrQueueFull is returned when no more work can wait; the delivery gets 503.
var ErrQueueFull = errors.New("the work queue is full")

// errSuperseded cancels work that a newer head SHA replaced.
var errSuperseded = errors.New("superseded by a newer commit")

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
	job    *Job
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
	closed bool
	wg     sync.WaitGroup
}

// NewQueue starts workers that run jobs until Close (or the end of parent).
// Jobs run on the queue's own context, not on any request's; size bounds the
// jobs waiting; timeout bounds one job.
func NewQueue(parent context.Context, workers, size int, timeout time.Duration, log *slog.Logger) *Queue {
	ctx, stop := context.WithCancelCause(parent)
	q := &Queue{
		ctx: ctx, stop: stop, size: size, timeout: timeout, log: log,
		wake:    make(chan struct{}, 1),
		pending: map[string]*Job{},
		running: map[string]*running{},
		later:   map[string]uint64{},
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
	if q.closed {
		return ErrQueueFull
	}
	_, queued := q.pending[j.Key]
	if !queued && len(q.pending) >= q.size {
		return ErrQueueFull // refused before anything running is cancelled
	}
	if r, ok := q.running[j.Key]; ok && r.job.SHA != j.SHA {
		r.cancel(errSuperseded)
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
		ctx, cancelCause := context.WithCancelCause(q.ctx)
		ctx, cancel := context.WithTimeout(ctx, q.timeout)
		q.running[k] = &running{job: j, cancel: cancelCause}
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
		q.metrics.Job("deferred", time.Since(start))
		log.Warn("job waits out GitHub's rate limit", "err", later.Err, "seconds", later.Wait.Seconds())
		q.runAfter(ctx, j, later.Wait, log)
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
	return errors.Is(cause, errSuperseded) || errors.Is(cause, errPullClosed) || errors.Is(cause, errShutdown)
}

// runAfter queues j again after d, unless a newer job or a drop for its key
// came meanwhile, or the queue closed. It decides under the lock Enqueue and
// Drop take: one that came after j returned but before this call has already
// cancelled ctx or queued the newer job, and one that comes later forgets the
// timer.
func (q *Queue) runAfter(ctx context.Context, j *Job, d time.Duration, log *slog.Logger) {
	q.mu.Lock()
	if _, newer := q.pending[j.Key]; newer || cancelled(context.Cause(ctx)) {
		q.mu.Unlock()
		log.Info("job not run again: a newer event or a close came while it ran")
		return
	}
	q.tokens++
	token := q.tokens
	q.later[j.Key] = token
	q.mu.Unlock()
	time.AfterFunc(d, func() {
		q.mu.Lock()
		current := !q.closed && q.later[j.Key] == token
		if current {
			delete(q.later, j.Key)
		}
		q.mu.Unlock()
		if !current {
			return
		}
		if err := q.Enqueue(j); err != nil {
			log.Warn("job not queued again: the next event for it brings it back", "err", err)
		}
	})
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

// errPullClosed cancels work on a pull request that was closed.
var errPullClosed = errors.New("the pull request was closed")
