package app

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
}

type budgetKey struct{}

// withPublishBudget returns a context that is not cancelled with parent (a
// publish once begun is finished) and is cancelled after d of work.
func withPublishBudget(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
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
	b.timer.Reset(time.Until(b.end))
	return true
}
