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

	ghapp "github.com/driftback/driftback/app/github"

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

func (r *recordingRouter) Route(event, delivery string, payload any, _ *slog.Logger) ([]*Job, []string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if event != "pull_request" {
		return nil, nil, false
	}
	r.events = append(r.events, delivery)
	pr := payload.(*ghapp.PullRequestEvent)
	return []*Job{{Key: delivery, SHA: pr.HeadSHA, Run: func(ctx context.Context) error {
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
	q := NewQueue(ctx, 1, 1, time.Minute, discard)
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

// TestUnsignedBodiesCostBoundedMemory: many large unsigned requests at once,
// each sending its body slowly, hold no more than the budget of unverified
// bytes (the rest are refused unread, with Retry-After), a signed delivery
// still goes through meanwhile, and a sender too slow for the read timeout
// is cut off.
func TestUnsignedBodiesCostBoundedMemory(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	router := &recordingRouter{block: make(chan struct{})}
	defer close(router.block)
	h := NewWebhook([]byte(testSecret), NewQueue(ctx, 1, 16, time.Minute, discard), router, discard)
	h.MaxUnverified = 16 << 20 // 8 MiB for large bodies: two of 4 MiB
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ReadTimeout = 3 * time.Second
	srv.Start()
	defer srv.Close()

	const senders, size = 10, 4 << 20
	type answer struct {
		code  int
		retry string
	}
	answers := make(chan answer, senders)
	var stop sync.WaitGroup
	release := make(chan struct{})
	for i := range senders {
		stop.Add(1)
		go func() {
			defer stop.Done()
			pr, pw := io.Pipe()
			go func() {
				// A byte, then nothing until released or cut off.
				if _, err := pw.Write([]byte("{")); err != nil {
					return
				}
				select {
				case <-release:
				case <-ctx.Done():
				}
				pw.CloseWithError(io.ErrUnexpectedEOF)
			}()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, pr)
			if err != nil {
				t.Error(err)
				return
			}
			req.ContentLength = size
			req.Header.Set("X-GitHub-Event", "pull_request")
			req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("big-%d", i))
			// Headers as GitHub sends them: only the body can show the
			// signature is wrong.
			req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- answer{code: -1} // cut off while sending
				return
			}
			resp.Body.Close()
			answers <- answer{code: resp.StatusCode, retry: resp.Header.Get("Retry-After")}
		}()
	}
	refused := 0
	for range senders - 2 {
		select {
		case a := <-answers:
			if a.code != http.StatusServiceUnavailable || a.retry == "" {
				t.Errorf("a large unsigned request over the budget: %d (Retry-After %q), want 503 with Retry-After", a.code, a.retry)
			}
			refused++
		case <-time.After(2 * time.Second):
			t.Fatalf("only %d of %d large requests were refused at once; the rest are being read", refused, senders-2)
		}
	}
	if peak := h.peakUnverified; peak > h.MaxUnverified {
		t.Errorf("%d bytes held unverified at once, over the budget of %d", peak, h.MaxUnverified)
	}
	// Meanwhile GitHub's small, signed delivery is read and queued.
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
		t.Errorf("a signed delivery during the flood: %d, want 202", resp.StatusCode)
	}
	// The two being read are cut off by the read timeout, not held forever.
	for range 2 {
		select {
		case a := <-answers:
			if a.code == http.StatusAccepted {
				t.Errorf("an unsigned body was accepted")
			}
		case <-time.After(15 * time.Second):
			t.Fatal("a slow sender was not cut off by the read timeout")
		}
	}
	close(release)
	stop.Wait()

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
