package github

import (
	"context"
	"sync"
	"time"
)

// publishBudget bounds publishing by the time driftback spends working, not
// the time GitHub asks it to wait: a secondary rate limit's Retry-After (or a
// primary limit's reset) that the retrying transport honours extends the
// deadline by that wait. Without this, a Retry-After longer than the bound
// would cancel publishing half way and leave a comment with only some of its
// parts, the very thing the bound is there to prevent.
type publishBudget struct {
	mu    sync.Mutex
	end   time.Time
	timer *time.Timer
	// held counts the calls waiting for another publish's turn, since
	// heldAt: the clock stops while any does.
	held   int
	heldAt time.Time
}

type budgetKey struct{}

// WithPublishBudget returns a context that is not cancelled with parent (a
// publish once begun is finished) and is cancelled after d of work.
func WithPublishBudget(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	b := &publishBudget{end: time.Now().Add(d)}
	b.timer = time.AfterFunc(d, cancel)
	return context.WithValue(ctx, budgetKey{}, b), func() {
		b.timer.Stop()
		cancel()
	}
}

// extendBudget adds a wait GitHub asked for to the publish budget of ctx, if
// it has one. It reports whether it did.
func extendBudget(ctx context.Context, wait time.Duration) bool {
	b, ok := ctx.Value(budgetKey{}).(*publishBudget)
	if !ok || ctx.Err() != nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.end = b.end.Add(wait)
	if b.held == 0 { // a held clock is restarted on release
		b.timer.Reset(time.Until(b.end))
	}
	return true
}

// holdBudget stops the clock of ctx's publish budget, if it has one, until
// the returned func is called: a call waiting for the installation's write
// slot waits out another publish (its work and the rate limits GitHub gave
// it), which could otherwise use up this publish's bound before its next
// part is written.
func holdBudget(ctx context.Context) (release func()) {
	b, ok := ctx.Value(budgetKey{}).(*publishBudget)
	if !ok || ctx.Err() != nil {
		return func() {}
	}
	b.mu.Lock()
	if b.held == 0 {
		b.heldAt = time.Now()
		b.timer.Stop()
	}
	b.held++
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.held--
		if b.held == 0 {
			b.end = b.end.Add(time.Since(b.heldAt))
			b.timer.Reset(time.Until(b.end))
		}
	}
}

// DefaultPublishTimeout bounds the work of publishing one pull request's
// comment and checks, or one drift pull request; waits GitHub asks for
// (Retry-After) are added to it.
const DefaultPublishTimeout = 45 * time.Second

// RetryPublish repeats an idempotent publish a few times with backoff. A
// wait GitHub or the pace asks for is not retried here: the caller runs the
// whole publish again when it is over (RateLimitWait).
func RetryPublish(ctx context.Context, publish func() error) error {
	var err error
	for attempt := range 3 {
		if err = publish(); err == nil || ctx.Err() != nil {
			return err
		}
		if _, later := RateLimitWait(err); later {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 2 * time.Second):
		}
	}
	return err
}
