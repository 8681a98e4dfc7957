package kubetest

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// WatchBreaker sits in a client's transport and does to its watches what
// production does to them: Break cuts every open watch stream, as a reset
// connection or an apiserver restart does, may refuse every request for a
// while (the apiserver is down), and makes each watch resumed on a cut path
// expire: it is sent from resourceVersion 1, so the real apiserver answers it
// 410 Gone ("too old resource version"), as a restarted apiserver answers a
// resourceVersion from before its start, and the informer lists again.
type WatchBreaker struct {
	mu     sync.Mutex
	open   map[*watchBody]bool
	expire map[string]bool // paths whose next resumed watch expires
	down   time.Time       // requests fail until then
	lists  map[string]int  // initial lists (plain or streamed) by path
}

// NewWatchBreaker returns a breaker with nothing broken.
func NewWatchBreaker() *WatchBreaker {
	return &WatchBreaker{open: map[*watchBody]bool{}, expire: map[string]bool{}, lists: map[string]int{}}
}

// Wrap is a rest.Config's WrapTransport.
func (b *WatchBreaker) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		q := r.URL.Query()
		watch := q.Get("watch") == "true" || q.Get("watch") == "1"
		initial := q.Get("sendInitialEvents") == "true"
		b.mu.Lock()
		if time.Now().Before(b.down) {
			b.mu.Unlock()
			return nil, errors.New("dial tcp: connection refused (kubetest: the apiserver is down)")
		}
		if r.Method == http.MethodGet && (initial || !watch) {
			b.lists[r.URL.Path]++
		}
		if watch && !initial && b.expire[r.URL.Path] {
			delete(b.expire, r.URL.Path)
			q.Set("resourceVersion", "1")
			r = r.Clone(r.Context())
			r.URL.RawQuery = q.Encode()
		}
		b.mu.Unlock()
		resp, err := rt.RoundTrip(r)
		if err != nil || !watch {
			return resp, err
		}
		body := &watchBody{ReadCloser: resp.Body, breaker: b, path: r.URL.Path}
		b.mu.Lock()
		b.open[body] = true
		b.mu.Unlock()
		resp.Body = body
		return resp, nil
	})
}

// Break cuts every open watch; the watches resumed on their paths expire.
// For down, every request fails as if the apiserver were not there.
func (b *WatchBreaker) Break(down time.Duration) {
	b.mu.Lock()
	var cut []*watchBody
	for body := range b.open {
		cut = append(cut, body)
		b.expire[body.path] = true
	}
	b.down = time.Now().Add(down)
	b.mu.Unlock()
	for _, body := range cut {
		_ = body.ReadCloser.Close() // a cut stream's close error says nothing
	}
}

// Lists counts the initial lists (plain, or streamed as a watch with
// sendInitialEvents) made on a collection path, such as
// "/api/v1/namespaces/NS/configmaps".
func (b *WatchBreaker) Lists(path string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lists[path]
}

// OpenWatches counts the watch streams open now.
func (b *WatchBreaker) OpenWatches() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.open)
}

type watchBody struct {
	io.ReadCloser
	breaker *WatchBreaker
	path    string
}

func (w *watchBody) Close() error {
	w.breaker.mu.Lock()
	delete(w.breaker.open, w)
	w.breaker.mu.Unlock()
	return w.ReadCloser.Close()
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
