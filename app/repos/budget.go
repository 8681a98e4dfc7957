package repos

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// ErrFetchTooLarge stops a fetch that downloads more than its budget: one
// push of gigabytes must not fill the cache's volume before the clone's size
// is checked.
var ErrFetchTooLarge = errors.New("the fetch downloads more than the cache may hold")

type budgetKey struct{}

// fetchBudget is what a fetch may still download: take asks for n more
// bytes.
type fetchBudget struct {
	take func(n int64) bool
	out  atomic.Bool
}

// withFetchBudget bounds what the fetches under ctx download over HTTP:
// each read of a response asks take for its bytes.
func withFetchBudget(ctx context.Context, take func(n int64) bool) (context.Context, *fetchBudget) {
	b := &fetchBudget{take: take}
	return context.WithValue(ctx, budgetKey{}, b), b
}

// spent says the budget ran out: go-git does not keep the error it was
// given, only its text.
func (b *fetchBudget) spent() bool { return b.out.Load() }

// budgetTransport counts what a response's body delivers against its
// request's fetch budget, if it has one.
type budgetTransport struct{ next http.RoundTripper }

func (t budgetTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if b, ok := req.Context().Value(budgetKey{}).(*fetchBudget); ok && resp != nil {
		resp.Body = &budgetedBody{ReadCloser: resp.Body, budget: b}
	}
	return resp, err
}

type budgetedBody struct {
	io.ReadCloser
	budget *fetchBudget
}

func (r *budgetedBody) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 && !r.budget.take(int64(n)) {
		r.budget.out.Store(true)
		return n, ErrFetchTooLarge
	}
	return n, err
}

// installBudgets makes go-git's HTTP transports count against fetch
// budgets; a request without one (a push) is not counted.
var installBudgets = sync.OnceFunc(func() {
	c := githttp.NewClient(&http.Client{Transport: budgetTransport{http.DefaultTransport}})
	client.InstallProtocol("https", c)
	client.InstallProtocol("http", c)
})
