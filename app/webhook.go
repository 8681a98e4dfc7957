package app

import (
	"container/list"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	ghapp "github.com/driftback/driftback/app/github"
	"github.com/driftback/driftback/app/queue"

	"github.com/driftback/driftback/app/config"
)

// MaxWebhookBody is GitHub's own cap on a webhook payload.
const MaxWebhookBody = 25 << 20

const smallBody = 1 << 20

// Router turns a verified webhook into work: the jobs to queue and the keys
// whose work to drop. handled is false for events driftback ignores.
type Router interface {
	Route(event, delivery string, payload any, log *slog.Logger) (jobs []*queue.Job, drop []string, handled bool)
}

// Webhook is the POST /webhook handler.
type Webhook struct {
	secret []byte
	queue  *queue.Queue
	router Router
	seen   *recent
	log    *slog.Logger
	// MaxUnverified bounds the bytes of bodies read before their signature is
	// checked, over all requests at once; 0 means DefaultMaxUnverified. Past
	// it a request is refused with 503 and Retry-After.
	MaxUnverified int64
	// ReadTimeout bounds reading one body; 0 means 20s.
	ReadTimeout time.Duration

	mu             sync.Mutex
	small, large   int64 // bytes reserved now by bodies up to and over smallBody
	bySource       map[string]int64
	peakUnverified int64 // the most reserved at once, for tests and metrics
}

// NewWebhook returns a handler that verifies deliveries with secret, routes
// them and queues their work.
func NewWebhook(secret []byte, queue *queue.Queue, router Router, log *slog.Logger) *Webhook {
	return &Webhook{secret: secret, queue: queue, router: router, seen: newRecent(10000), log: log}
}

func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	// GitHub always names its deliveries; one without an ID could never be
	// told from a replay.
	if ghapp.DeliveryID(r) == "" {
		http.Error(w, "missing X-GitHub-Delivery", http.StatusBadRequest)
		return
	}
	// GitHub always signs and names its events: a request without either
	// is refused before a byte of its body is held or read.
	if !strings.HasPrefix(r.Header.Get(ghapp.SignatureHeader), "sha256=") || ghapp.EventType(r) == "" {
		http.Error(w, "missing X-Hub-Signature-256 or X-GitHub-Event", http.StatusUnauthorized)
		return
	}
	if r.ContentLength > MaxWebhookBody {
		http.Error(w, "payload too large", http.StatusRequestEntityTooLarge)
		return
	}
	// The body is held before anyone knows who sent it: each byte is paid
	// for from a bounded budget as it arrives, so a connection that sends
	// nothing holds nothing, and one that stops sending is cut off.
	source, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		source = r.RemoteAddr
	}
	in := &meteredBody{r: http.MaxBytesReader(w, r.Body, MaxWebhookBody), h: h, rc: http.NewResponseController(w), source: source,
		large: r.ContentLength < 0 || r.ContentLength > smallBody, start: time.Now(), end: time.Now().Add(h.readTimeout())}
	defer in.release()
	body, err := io.ReadAll(in)
	var tooBig *http.MaxBytesError
	if errors.Is(err, errBusy) {
		w.Header().Set("Retry-After", "10")
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	if errors.As(err, &tooBig) {
		http.Error(w, "payload too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	// The signature first: nothing about an unsigned request is trusted, not
	// even its headers. Only the SHA-256 signature counts.
	sig := r.Header.Get(ghapp.SignatureHeader)
	if !ghapp.ValidSignature(sig, body, h.secret) {
		h.log.Warn("webhook rejected: bad or missing signature", "remote", r.RemoteAddr)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	event, delivery := ghapp.EventType(r), ghapp.DeliveryID(r)
	log := h.log.With("delivery", delivery, "event", event)
	if !h.seen.claim(delivery) {
		log.Info("webhook: duplicate delivery ignored")
		w.WriteHeader(http.StatusAccepted)
		return
	}
	payload, err := ghapp.ParseEvent(event, body)
	if err != nil {
		if errors.Is(err, ghapp.ErrUnknownEvent) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		log.Warn("webhook: unreadable payload", "err", err)
		h.seen.forget(delivery)
		http.Error(w, "unreadable payload", http.StatusBadRequest)
		return
	}
	jobs, drop, handled := h.router.Route(event, delivery, payload, log)
	if !handled {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	for _, k := range drop {
		h.queue.Drop(k, queue.ErrPullClosed)
	}
	for _, j := range jobs {
		if err := h.queue.Enqueue(j); err != nil {
			log.Warn("webhook: queue full", "key", j.Key)
			h.seen.forget(delivery) // a redelivery may succeed
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
	}
	w.WriteHeader(http.StatusAccepted)
}

// errBusy says the budget of unverified bodies is spent.
var errBusy = errors.New("the budget of unverified bodies is spent")

// IdleRead is how long a request's body may send nothing before it is cut
// off: what it holds is given back.
const IdleRead = 2 * time.Second

// MinBodyRate is the slowest an unverified body may arrive, on average from
// its first second on (GitHub sends a delivery at once): a sender that
// trickles a byte just within IdleRead is cut off as soon as it falls
// behind, not at the end of the read timeout.
const MinBodyRate = 32 << 10 // bytes a second

// bodyGrace is how long a body may arrive at any rate before MinBodyRate
// counts.
const bodyGrace = time.Second

// meteredBody pays for a body from the Webhook's budget as it arrives, and
// cuts off a sender that stops or crawls: each read must bring bytes within
// IdleRead, the body must keep up with MinBodyRate, and it must arrive whole
// within the read timeout.
type meteredBody struct {
	r      io.Reader
	h      *Webhook
	rc     *http.ResponseController
	source string
	large  bool
	held   int64
	start  time.Time
	end    time.Time
}

// deadline is when the next byte must have arrived: within IdleRead, by
// the time the rate asks for it, and before the end.
func (m *meteredBody) deadline(now time.Time) time.Time {
	d := now.Add(IdleRead)
	onRate := m.start.Add(bodyGrace + time.Duration(float64(m.held+1)/MinBodyRate*float64(time.Second)))
	if onRate.Before(d) {
		d = onRate
	}
	if m.end.Before(d) {
		d = m.end
	}
	return d
}

func (m *meteredBody) Read(p []byte) (int, error) {
	// Not every ResponseWriter can set deadlines (a test's recorder); the
	// server's read timeout still bounds the body then.
	_ = m.rc.SetReadDeadline(m.deadline(time.Now()))
	n, err := m.r.Read(p)
	if n > 0 {
		if !m.h.reserve(m.source, int64(n), m.large) {
			return n, errBusy
		}
		m.held += int64(n)
	}
	return n, err
}

func (m *meteredBody) release() { m.h.release(m.source, m.held, m.large) }

func (h *Webhook) readTimeout() time.Duration {
	if h.ReadTimeout > 0 {
		return h.ReadTimeout
	}
	return 20 * time.Second
}

// reserve takes size bytes from the budget of unverified bodies, or reports
// that they are not there. Bodies over smallBody (or of unknown length)
// share half of it, so a flood of large ones cannot starve GitHub's small
// deliveries; and one source address holds at most half of it (or one
// largest body), so one sender cannot hold both halves. Behind an ingress
// every request has one source: the bound is then half the budget for all,
// which GitHub's deliveries fit in.
func (h *Webhook) reserve(source string, size int64, large bool) bool {
	limit := h.MaxUnverified
	if limit <= 0 {
		limit = config.DefaultMaxUnverified
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bySource[source]+size > max(limit/2, MaxWebhookBody) {
		return false
	}
	switch {
	case large && h.large+size > limit/2:
		return false
	case large:
		h.large += size
	case h.small+size > limit-limit/2:
		return false
	default:
		h.small += size
	}
	if h.bySource == nil {
		h.bySource = map[string]int64{}
	}
	h.bySource[source] += size
	h.peakUnverified = max(h.peakUnverified, h.small+h.large)
	return true
}

func (h *Webhook) release(source string, size int64, large bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bySource[source] -= size; h.bySource[source] <= 0 {
		delete(h.bySource, source)
	}
	if large {
		h.large -= size
	} else {
		h.small -= size
	}
}

// recent remembers the last n delivery IDs.
type recent struct {
	mu    sync.Mutex
	n     int
	order *list.List
	set   map[string]*list.Element
}

func newRecent(n int) *recent {
	return &recent{n: n, order: list.New(), set: map[string]*list.Element{}}
}

// claim records id and reports whether it was new.
func (r *recent) claim(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.set[id]; ok {
		return false
	}
	r.set[id] = r.order.PushBack(id)
	for r.order.Len() > r.n {
		old := r.order.Front()
		r.order.Remove(old)
		delete(r.set, old.Value.(string))
	}
	return true
}

// forget removes id, for a delivery that was refused and may come again.
func (r *recent) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.set[id]; ok {
		r.order.Remove(el)
		delete(r.set, id)
	}
}
