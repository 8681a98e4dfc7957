package github

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/driftback/driftback/internal/githubfake"
)

// TestRetryTransport proves what is retried and how long it waits: server
// errors of idempotent calls with backoff, never a POST that may have taken
// effect, a secondary limit after Retry-After, a primary limit at its reset,
// and a permission error never.
func TestRetryTransport(t *testing.T) {
	cases := []struct {
		name     string
		method   string
		answers  []func(http.ResponseWriter)
		want     int // status the caller sees
		attempts int64
		minWait  time.Duration
	}{
		{"a GET after two 502s", "GET", []func(http.ResponseWriter){status(502), status(502), status(200)}, 200, 3, 0},
		{"a POST after a 502 is not retried", "POST", []func(http.ResponseWriter){status(502), status(201)}, 502, 1, 0},
		{"a POST after a secondary rate limit", "POST", []func(http.ResponseWriter){retryAfter(1), status(201)}, 201, 2, time.Second},
		{"a primary rate limit waits for its reset", "GET", []func(http.ResponseWriter){resetIn(1), status(200)}, 200, 2, 900 * time.Millisecond},
		{"a 403 without limit headers is final", "PATCH", []func(http.ResponseWriter){status(403), status(200)}, 403, 1, 0},
		{"bounded: five 503s", "GET", []func(http.ResponseWriter){status(503), status(503), status(503), status(503), status(503), status(200)}, 503, 5, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				i := n.Add(1) - 1
				if b, _ := io.ReadAll(r.Body); r.Method == "POST" && string(b) != "payload" {
					t.Errorf("attempt %d lost the body: %q", i, b)
				}
				tc.answers[min(int(i), len(tc.answers)-1)](w)
			}))
			defer srv.Close()
			client := &http.Client{Transport: &retryTransport{next: http.DefaultTransport, policy: RetryPolicy{Attempts: 5, Base: time.Millisecond, MaxWait: 5 * time.Second}}}
			req, _ := http.NewRequestWithContext(context.Background(), tc.method, srv.URL, strings.NewReader("payload"))
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want || n.Load() != tc.attempts {
				t.Errorf("status %d after %d attempts; want %d after %d", resp.StatusCode, n.Load(), tc.want, tc.attempts)
			}
			if waited := time.Since(start); waited < tc.minWait {
				t.Errorf("waited %s, want at least %s", waited, tc.minWait)
			}
		})
	}
}

func status(code int) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) { w.WriteHeader(code) }
}

func retryAfter(secs int) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		w.WriteHeader(http.StatusForbidden)
	}
}

func resetIn(secs int) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Duration(secs)*time.Second).Unix(), 10))
		w.WriteHeader(http.StatusForbidden)
	}
}

// TestInstallationTokensAreCachedAndEnterpriseURLsWork proves one token serves
// many calls of an installation, that the token request carries a valid JWT,
// and that a GitHub Enterprise base URL (…/api/v3/) is used as given.
func TestInstallationTokensAreCachedAndEnterpriseURLsWork(t *testing.T) {
	gh, err := githubfake.New()
	if err != nil {
		t.Fatal(err)
	}
	defer gh.Close()
	gh.AddRepo(&githubfake.Repo{Owner: "o", Name: "r", Installation: 5})
	for _, base := range []string{gh.URL(), gh.URL() + "api/v3/"} {
		before := gh.TokensIssued()
		clients := NewClients(gh.AppID, gh.KeyPEM(), base, RetryPolicy{})
		c, err := clients.Client(5)
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if _, _, err := c.Repositories.Get(context.Background(), "o", "r"); err != nil {
				t.Fatalf("%s: %v", base, err)
			}
		}
		if _, err := clients.Token(context.Background(), 5); err != nil {
			t.Fatal(err)
		}
		if n := gh.TokensIssued() - before; n != 1 {
			t.Errorf("%s: %d tokens issued for 6 uses, want 1", base, n)
		}
	}
	var enterprise int
	for _, c := range gh.Calls() {
		if strings.HasPrefix(c.Path, "/api/v3/") {
			enterprise++
		}
	}
	if enterprise == 0 {
		t.Errorf("no call went to the /api/v3/ base")
	}
	wrong := NewClients(gh.AppID, []byte(strings.Replace(string(gh.KeyPEM()), "A", "B", 5)), gh.URL(), RetryPolicy{Attempts: 1})
	if c, err := wrong.Client(5); err == nil {
		if _, _, err := c.Repositories.Get(context.Background(), "o", "r"); err == nil {
			t.Errorf("a client with the wrong key was served")
		}
	}
}

// TestPublishDoesNotPayForAnothersTurn: a publish whose call waits for the
// installation's write slot while another publish waits out a rate limit
// there is not cut off by its own bound: the wait is the other's, and its
// next part is still written.
func TestPublishDoesNotPayForAnothersTurn(t *testing.T) {
	var n atomic.Int64
	first := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			close(first)
			retryAfter(1)(w) // the first publish waits a second, holding the slot
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	client := &http.Client{Transport: &retryTransport{next: http.DefaultTransport, policy: RetryPolicy{Attempts: 5, Base: time.Millisecond, MaxWait: 5 * time.Second}}}
	post := func() (int, error) {
		ctx, cancel := WithPublishBudget(context.Background(), 300*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, strings.NewReader("payload"))
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	type result struct {
		status int
		err    error
	}
	a := make(chan result, 1)
	go func() {
		s, err := post()
		a <- result{s, err}
	}()
	<-first
	if s, err := post(); err != nil || s != http.StatusCreated {
		t.Errorf("the publish that waited for the other's turn: %d, %v; want 201", s, err)
	}
	if r := <-a; r.err != nil || r.status != http.StatusCreated {
		t.Errorf("the rate-limited publish: %d, %v; want 201 after its wait", r.status, r.err)
	}
}

// TestHeldBudgetStopsItsClock: a publish's bound does not run while it is
// held, and runs out after it is released.
func TestHeldBudgetStopsItsClock(t *testing.T) {
	ctx, cancel := WithPublishBudget(context.Background(), 100*time.Millisecond)
	defer cancel()
	release := holdBudget(ctx)
	time.Sleep(300 * time.Millisecond) // waiting for another publish's turn
	if ctx.Err() != nil {
		t.Fatal("the bound ran out while held")
	}
	extendBudget(ctx, 50*time.Millisecond) // a rate limit met meanwhile does not restart the clock
	time.Sleep(200 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatal("an extension restarted a held clock")
	}
	released := time.Now()
	release()
	select {
	case <-ctx.Done():
		if d := time.Since(released); d < 100*time.Millisecond {
			t.Errorf("the bound ran out %s after the release, before the 150 ms it had left", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the bound never ran out after the release")
	}
}

// TestRateLimitWaitFromGitHubsAnswer: GitHub's two rate limits, as go-github
// reads them from real answers, give the wait a job is run again after; any
// other error gives none.
func TestRateLimitWaitFromGitHubsAnswer(t *testing.T) {
	reset := time.Now().Add(5 * time.Minute)
	answers := map[string]func(http.ResponseWriter){
		"primary": func(w http.ResponseWriter) {
			w.Header().Set("X-RateLimit-Limit", "5000")
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"message":"API rate limit exceeded for installation ID 1.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`)
		},
		"secondary": func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "180")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`)
		},
		"a permission error": func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"message":"Resource not accessible by integration"}`)
		},
	}
	want := map[string][2]time.Duration{
		"primary":   {time.Until(reset) - 5*time.Second, time.Until(reset) + 5*time.Second},
		"secondary": {180 * time.Second, 185 * time.Second},
	}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answer(w) }))
			defer srv.Close()
			gh, err := github.NewClient(nil).WithEnterpriseURLs(srv.URL+"/", srv.URL+"/")
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = gh.Issues.CreateComment(context.Background(), "o", "r", 1, &github.IssueComment{Body: github.String("x")})
			wait, ok := RateLimitWait(fmt.Errorf("create comment part 2: %w", err))
			bounds, limited := want[name]
			if ok != limited || (ok && (wait < bounds[0] || wait > bounds[1])) {
				t.Errorf("wait %s, %v for %v; want a rate limit: %v, within %v", wait, ok, err, limited, bounds)
			}
		})
	}
}

// TestASlowAppCallHoldsUpNoInstallation: while GitHub is slow to answer the
// App's own calls (who the bot is, which installation has a repository), the
// clients of every installation, and their tokens, are still handed out.
func TestASlowAppCallHoldsUpNoInstallation(t *testing.T) {
	gh, err := githubfake.New()
	if err != nil {
		t.Fatal(err)
	}
	defer gh.Close()
	gh.AddRepo(&githubfake.Repo{Owner: "o", Name: "r", Installation: 5})
	gh.AddRepo(&githubfake.Repo{Owner: "o", Name: "slow", Installation: 6})
	release := gh.Stall("GET", "/app")
	defer release()
	releaseFind := gh.Stall("GET", "/repos/o/slow/installation")
	defer releaseFind()
	clients := NewClients(gh.AppID, gh.KeyPEM(), gh.URL(), RetryPolicy{})
	stalled := make(chan error, 2)
	go func() { _, err := clients.BotLogin(context.Background()); stalled <- err }()
	go func() { _, err := clients.InstallationOf(context.Background(), "o", "slow"); stalled <- err }()
	time.Sleep(200 * time.Millisecond) // both calls are waiting on GitHub
	done := make(chan error, 1)
	go func() {
		_, err := clients.Client(5)
		if err == nil {
			_, err = clients.Token(context.Background(), 5)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an installation's client waited for a slow call of the App's")
	}
	release()
	releaseFind()
	for range 2 {
		if err := <-stalled; err != nil {
			t.Error(err)
		}
	}
	if bot, err := clients.BotLogin(context.Background()); err != nil || !strings.HasSuffix(bot, "[bot]") {
		t.Errorf("bot %q, %v", bot, err)
	}
}
