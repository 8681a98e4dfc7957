package app

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/driftback/driftback/app/config"
	ghapp "github.com/driftback/driftback/app/github"
	"github.com/driftback/driftback/app/queue"

	"github.com/google/go-github/v60/github"
)

const testSecret = "webhook-secret-for-tests"

// sign returns GitHub's X-Hub-Signature-256 for body.
func sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// delivery POSTs an event to h as GitHub does.
func delivery(t *testing.T, h http.Handler, event, id string, payload any, signature func([]byte) string) int {
	t.Helper()
	body, ok := payload.([]byte)
	if !ok {
		var err error
		if body, err = json.Marshal(payload); err != nil {
			t.Fatal(err)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	if signature != nil {
		req.Header.Set("X-Hub-Signature-256", signature(body))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func signed(body []byte) string { return sign(testSecret, body) }

type recordingRouter struct {
	mu     sync.Mutex
	events []string
	block  chan struct{}
}

func (r *recordingRouter) Route(event, delivery string, payload any, _ *slog.Logger) ([]*queue.Job, []string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if event != "pull_request" {
		return nil, nil, false
	}
	r.events = append(r.events, delivery)
	pr := payload.(*ghapp.PullRequestEvent)
	return []*queue.Job{{Key: delivery, SHA: pr.HeadSHA, Run: func(ctx context.Context) error {
		if r.block != nil {
			<-r.block
		}
		return nil
	}}}, nil, true
}

func prEvent(sha string) *github.PullRequestEvent {
	return &github.PullRequestEvent{
		Action: github.String("opened"), Number: github.Int(7),
		PullRequest:  &github.PullRequest{Number: github.Int(7), Head: &github.PullRequestBranch{SHA: github.String(sha)}},
		Repo:         &github.Repository{FullName: github.String("o/r"), Name: github.String("r"), Owner: &github.User{Login: github.String("o")}},
		Installation: &github.Installation{ID: github.Int64(1)},
	}
}

// TestWebhookIntake proves the intake's answers: 401 for a bad or missing
// signature (and nothing routed), 413 for a body over 25 MB, 204 for an event
// driftback ignores, 202 for work queued, a repeated delivery ID not routed
// twice, and 503 when the queue is full.
func TestWebhookIntake(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	router := &recordingRouter{block: make(chan struct{})}
	defer close(router.block)
	q := queue.New(ctx, 1, 1, time.Minute, discard, nil)
	h := NewWebhook([]byte(testSecret), q, router, discard)

	steps := []struct {
		name  string
		event string
		id    string
		body  any
		sig   func([]byte) string
		want  int
	}{
		{"no signature", "pull_request", "d1", prEvent("a"), nil, http.StatusUnauthorized},
		{"a wrong signature", "pull_request", "d2", prEvent("a"), func(b []byte) string { return sign("other", b) }, http.StatusUnauthorized},
		{"only the SHA-1 header's format", "pull_request", "d3", prEvent("a"), func(b []byte) string { return strings.Replace(signed(b), "sha256=", "sha1=", 1) }, http.StatusUnauthorized},
		{"a body over 25 MB", "pull_request", "d4", bytes.Repeat([]byte(" "), MaxWebhookBody+1), signed, http.StatusRequestEntityTooLarge},
		{"an ignored event", "star", "d5", map[string]any{"action": "created"}, signed, http.StatusNoContent},
		{"a pull request", "pull_request", "d6", prEvent("a"), signed, http.StatusAccepted},
		{"the same delivery again", "pull_request", "d6", prEvent("a"), signed, http.StatusAccepted},
		{"a second pull request fills the queue", "pull_request", "d7", prEvent("b"), signed, http.StatusAccepted},
		{"a third finds it full", "pull_request", "d8", prEvent("c"), signed, http.StatusServiceUnavailable},
		{"no delivery ID", "pull_request", "", prEvent("d"), signed, http.StatusBadRequest},
	}
	for _, s := range steps {
		if s.name == "a second pull request fills the queue" {
			waitUntil(t, "d6 to start", func() bool { return q.Depth() == 0 })
		}
		if got := delivery(t, h, s.event, s.id, s.body, s.sig); got != s.want {
			t.Errorf("%s: %d, want %d", s.name, got, s.want)
		}
	}
	router.mu.Lock()
	defer router.mu.Unlock()
	if got := strings.Join(router.events, ","); got != "d6,d7,d8" {
		t.Errorf("routed deliveries %s, want d6,d7,d8 (nothing unsigned, no duplicate)", got)
	}
}

// TestUnsignedBodiesCostBoundedMemory: bodies are paid for as their bytes
// arrive. Many connections that announce large bodies and then send nothing
// hold nothing, and are cut off once idle, while GitHub's signed delivery
// goes through; large unsigned bodies that do stream hold no more than the
// budget of unverified bytes, the rest refused with Retry-After.
func TestUnsignedBodiesCostBoundedMemory(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	router := &recordingRouter{block: make(chan struct{})}
	defer close(router.block)
	h := NewWebhook([]byte(testSecret), queue.New(ctx, 1, 16, time.Minute, discard, nil), router, discard)
	h.MaxUnverified = 16 << 20 // 8 MiB for large bodies: two of 4 MiB
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ReadTimeout = 3 * time.Second
	srv.Start()
	defer srv.Close()

	const size = 4 << 20
	post := func(id string, body io.Reader, length int64) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, body)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		req.ContentLength = length
		req.Header.Set("X-GitHub-Event", "pull_request")
		req.Header.Set("X-GitHub-Delivery", id)
		// Headers as GitHub sends them: only the body can show the
		// signature is wrong.
		req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return -1, "" // cut off while sending
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}

	// Idle connections: a byte each, then nothing. Had each been paid for
	// as it announced, 8 of them would spend the small bodies' half.
	const idle = 40
	cut := make(chan int, idle)
	for i := range idle {
		go func() {
			pr, pw := io.Pipe()
			go func() {
				if _, err := pw.Write([]byte("{")); err == nil {
					<-ctx.Done()
				}
				pw.CloseWithError(io.ErrUnexpectedEOF)
			}()
			// Small bodies, as GitHub's deliveries are: the pool they
			// would have spent is the one a signed delivery needs.
			code, _ := post(fmt.Sprintf("idle-%d", i), pr, smallBody)
			cut <- code
		}()
	}
	time.Sleep(300 * time.Millisecond) // all of them connected and idle
	body, err := json.Marshal(prEvent("e"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", "small-signed")
	req.Header.Set("X-Hub-Signature-256", signed(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("a signed delivery while %d connections idle: %d, want 202", idle, resp.StatusCode)
	}
	if peak := h.peakUnverified; peak > 2*int64(len(body))+idle {
		t.Errorf("%d bytes held for %d idle connections and one small delivery", peak, idle)
	}
	for range idle {
		select {
		case code := <-cut:
			if code == http.StatusAccepted {
				t.Errorf("an unsigned body was accepted")
			}
		case <-time.After(IdleRead + 5*time.Second):
			t.Fatal("an idle sender was not cut off")
		}
	}

	// Large bodies that do stream: the budget holds as their bytes arrive.
	const streams = 10
	answers := make(chan [2]string, streams)
	for i := range streams {
		go func() {
			code, retry := post(fmt.Sprintf("big-%d", i), bytes.NewReader(bytes.Repeat([]byte("x"), size)), size)
			answers <- [2]string{fmt.Sprint(code), retry}
		}()
	}
	busy := 0
	for range streams {
		a := <-answers
		switch {
		case a[0] == fmt.Sprint(http.StatusServiceUnavailable) && a[1] != "":
			busy++
		case a[0] == fmt.Sprint(http.StatusUnauthorized), a[0] == "-1":
		default:
			t.Errorf("a large unsigned body: %s (Retry-After %q), want 503 with Retry-After, or 401", a[0], a[1])
		}
	}
	if busy == 0 {
		t.Errorf("%d large bodies of 4 MiB at once over a budget of 8 MiB: none refused", streams)
	}
	if peak := h.peakUnverified; peak > h.MaxUnverified {
		t.Errorf("%d bytes held unverified at once, over the budget of %d", peak, h.MaxUnverified)
	}

	// A request GitHub could not have sent (no signature, or no event) is
	// refused before a byte of its body is held or read: its sender never
	// finishes sending, and the answer still comes at once.
	for _, missing := range []string{"X-Hub-Signature-256", "X-GitHub-Event"} {
		pr, pw := io.Pipe()
		defer pw.Close()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, pr)
		req.ContentLength = size
		req.Header.Set("X-GitHub-Event", "pull_request")
		req.Header.Set("X-GitHub-Delivery", "no-"+missing)
		req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
		req.Header.Del(missing)
		h.mu.Lock()
		before := h.peakUnverified
		h.mu.Unlock()
		done := make(chan int, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- -1
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
		select {
		case code := <-done:
			if code != http.StatusUnauthorized {
				t.Errorf("a request without %s: %d, want 401", missing, code)
			}
		case <-time.After(2 * time.Second):
			t.Errorf("a request without %s is being read", missing)
		}
		h.mu.Lock()
		held, peak := h.small+h.large, h.peakUnverified
		h.mu.Unlock()
		if held != 0 || peak != before {
			t.Errorf("a request without %s holds %d bytes of the budget", missing, held)
		}
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.small != 0 || h.large != 0 {
		t.Errorf("%d and %d bytes still reserved after every request ended", h.small, h.large)
	}
}

// TestOneSourceCannotHoldTheWholeBudget: a sender that fills the large
// bodies' half of the budget from one address cannot go on to fill the
// small bodies' half too: a delivery from another address still fits.
func TestOneSourceCannotHoldTheWholeBudget(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	router := &recordingRouter{}
	h := NewWebhook([]byte(testSecret), queue.New(ctx, 1, 16, time.Minute, discard, nil), router, discard)
	h.MaxUnverified = 64 << 20
	hold := func(id string, size int64) chan int {
		pr, pw := io.Pipe()
		go func() {
			if _, err := pw.Write(bytes.Repeat([]byte("x"), int(size))); err == nil {
				<-ctx.Done()
			}
			pw.CloseWithError(io.ErrUnexpectedEOF)
		}()
		req := httptest.NewRequest(http.MethodPost, "/webhook", pr)
		req.RemoteAddr, req.ContentLength = "203.0.113.9:4000", size+1
		req.Header.Set("X-GitHub-Event", "pull_request")
		req.Header.Set("X-GitHub-Delivery", id)
		req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
		code := make(chan int, 1)
		go func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			code <- rec.Code
		}()
		return code
	}
	held := func() (small, large int64) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.small, h.large
	}
	for i := range 8 { // 32 MiB of large bodies: their half, full
		hold(fmt.Sprintf("large-%d", i), 4<<20)
	}
	waitUntil(t, "the large bodies to be held", func() bool { _, l := held(); return l == 32<<20 })
	refused := 0
	for i := range 40 { // then small ones, from the same address
		select {
		case c := <-hold(fmt.Sprintf("small-%d", i), 512<<10):
			if c == http.StatusServiceUnavailable {
				refused++
			}
		case <-time.After(200 * time.Millisecond): // held
		}
	}
	if small, _ := held(); small != 0 || refused != 40 {
		t.Errorf("one address holds %d bytes of the small bodies' half (%d of 40 refused), want none", small, refused)
	}
	body, err := json.Marshal(prEvent("e"))
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	req.RemoteAddr = "140.82.115.1:443" // GitHub's
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", "from-github")
	req.Header.Set("X-Hub-Signature-256", signed(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusAccepted {
		t.Errorf("a delivery from another address: %d, want 202", rec.Code)
	}
}

// TestATricklingSenderIsCutOff: a sender that sends a byte a second (each
// just within IdleRead, a body that would take a minute) is cut off when it
// falls behind MinBodyRate, about a second in, not at the end of the read
// timeout; a signed delivery of the same size sent at once goes through.
func TestATricklingSenderIsCutOff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := NewWebhook([]byte(testSecret), queue.New(ctx, 1, 16, time.Minute, discard, nil), &recordingRouter{}, discard)
	h.ReadTimeout = time.Minute
	srv := httptest.NewServer(h)
	defer srv.Close()

	pr, pw := io.Pipe()
	go func() {
		defer pw.Close()
		for range 60 {
			if _, err := pw.Write([]byte("x")); err != nil {
				return
			}
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return
			}
		}
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, pr)
	req.ContentLength = 60
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", "trickle")
	req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	took := time.Since(start)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusAccepted {
			t.Fatal("a trickled unsigned body was accepted")
		}
	}
	if took > bodyGrace+IdleRead {
		t.Errorf("a sender trickling a byte a second held its connection %s, want it cut off within %s", took, bodyGrace+IdleRead)
	}
	h.mu.Lock()
	small, large := h.small, h.large
	h.mu.Unlock()
	if small != 0 || large != 0 {
		t.Errorf("%d bytes still held after the sender was cut off", small+large)
	}

	body, err := json.Marshal(prEvent("e"))
	if err != nil {
		t.Fatal(err)
	}
	signedReq, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
	signedReq.Header.Set("X-GitHub-Event", "pull_request")
	signedReq.Header.Set("X-GitHub-Delivery", "at-once")
	signedReq.Header.Set("X-Hub-Signature-256", signed(body))
	resp, err = http.DefaultClient.Do(signedReq)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("a signed delivery sent at once: %d, want 202", resp.StatusCode)
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
