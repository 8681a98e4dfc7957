// Package github is everything driftback says to GitHub and reads from it: the
// App's and its installations' clients and tokens, pacing and retries, webhook
// payloads read into driftback's own events, the pull-request comment and check
// runs, drift branches, pull requests and issues, and the manifest exchange that
// registers the App. It is the only package that imports go-github; the rest
// of driftback sees its types, not the API's.
package github

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v60/github"
	"golang.org/x/time/rate"
)

// Clients hands out one GitHub client per installation; each caches its
// installation token until it expires.
type Clients struct {
	appID   int64
	key     []byte
	baseURL string
	retry   RetryPolicy

	mu     sync.Mutex
	byID   map[int64]*installClient
	bot    string
	app    *github.Client
	byRepo map[string]int64
	// observe, when set before the first client is made, is told of every call.
	observe CallObserver
}

// appClient is the client that authenticates as the App itself (a JWT).
func (c *Clients) appClient() (*github.Client, error) {
	if c.app != nil {
		return c.app, nil
	}
	tr, err := ghinstallation.NewAppsTransport(http.DefaultTransport, c.appID, c.key)
	if err != nil {
		return nil, err
	}
	tr.BaseURL = c.baseURL
	gh := github.NewClient(&http.Client{Transport: &retryTransport{next: tr, policy: c.retry, observe: c.observe, pace: newPacer(c.retry)}})
	if gh.BaseURL, err = gh.BaseURL.Parse(c.baseURL); err != nil {
		return nil, err
	}
	c.app = gh
	return gh, nil
}

// InstallationOf returns the installation that gives the App a repository,
// for work no webhook started (the drift loop). It is asked once per
// repository until Forget.
func (c *Clients) InstallationOf(ctx context.Context, owner, repo string) (int64, error) {
	key := strings.ToLower(owner + "/" + repo)
	c.mu.Lock()
	id, ok := c.byRepo[key]
	gh, err := c.appClient()
	c.mu.Unlock()
	switch {
	case ok:
		return id, nil
	case err != nil:
		return 0, err
	}
	// Asked without the lock: a slow answer for one repository holds up
	// no other installation's work.
	in, _, err := gh.Apps.FindRepositoryInstallation(ctx, owner, repo)
	if err != nil {
		return 0, fmt.Errorf("%s/%s: find the App's installation: %w", owner, repo, err)
	}
	c.mu.Lock()
	c.byRepo[key] = in.GetID()
	c.mu.Unlock()
	return in.GetID(), nil
}

// BotLogin returns the login of the App's bot user ("slug[bot]"), which
// authors its comments; it is read once from GET /app.
func (c *Clients) BotLogin(ctx context.Context) (string, error) {
	c.mu.Lock()
	bot := c.bot
	gh, err := c.appClient()
	c.mu.Unlock()
	switch {
	case bot != "":
		return bot, nil
	case err != nil:
		return "", err
	}
	// Asked without the lock, as InstallationOf.
	app, _, err := gh.Apps.Get(ctx, "")
	if err != nil {
		return "", fmt.Errorf("read the App: %w", err)
	}
	c.mu.Lock()
	c.bot = app.GetSlug() + "[bot]"
	c.mu.Unlock()
	return app.GetSlug() + "[bot]", nil
}

type installClient struct {
	gh *github.Client
	tr *ghinstallation.Transport
}

// RetryPolicy bounds how driftback paces and retries GitHub calls.
type RetryPolicy struct {
	// PerMinute and PerHour bound the content-creating requests (POST,
	// PATCH, PUT, DELETE: comments, check runs, pull requests, issues,
	// labels, refs) of one installation in any minute and any hour (defaults
	// 80 and 500: GitHub's published secondary rate limits). A request over
	// the pace waits its turn; negative: no pacing.
	PerMinute, PerHour int
	// Attempts is the number of tries of one call (default 5).
	Attempts int
	// Base is the first backoff; it doubles each attempt, with jitter (default 500ms).
	Base time.Duration
	// MaxWait caps one backoff (default 2m). A rate limit's Retry-After or
	// reset is never cut short: a call GitHub asks to wait longer than MaxWait
	// for is not retried, and fails with GitHub's answer.
	MaxWait time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Attempts <= 0 {
		p.Attempts = 5
	}
	if p.Base <= 0 {
		p.Base = 500 * time.Millisecond
	}
	if p.MaxWait <= 0 {
		p.MaxWait = 2 * time.Minute
	}
	if p.PerMinute == 0 {
		p.PerMinute = 80
	}
	if p.PerHour == 0 {
		p.PerHour = 500
	}
	return p
}

// pacer spaces one installation's content-creating requests so that no
// minute and no hour holds more than its limit. It has two lanes, each a pair
// of token buckets whose burst and refill over the window add up to the
// lane's share of the limit (for the normal lane a quarter of the minute's at
// once, a tenth of the hour's; for the urgent lane half of each): what a
// reviewer reads first (a pull request's comment and its required check)
// has a quarter of the limits to itself, so it never waits behind the
// per-target check runs of other pull requests.
type pacer struct{ normal, urgent lane }

// lane is one share of the pace: its minute's and its hour's buckets.
type lane struct{ minute, hour *rate.Limiter }

func newPacer(p RetryPolicy) *pacer {
	bucket := func(limit int, window time.Duration, burstShare float64) *rate.Limiter {
		if limit < 0 {
			return nil
		}
		burst := max(1, int(float64(limit)*burstShare))
		return rate.NewLimiter(rate.Limit(float64(max(0, limit-burst))/window.Seconds()), burst)
	}
	share := func(limit int) (urgent, normal int) {
		if limit < 0 {
			return -1, -1
		}
		urgent = max(1, limit/4)
		return urgent, max(1, limit-urgent)
	}
	um, nm := share(p.PerMinute)
	uh, nh := share(p.PerHour)
	return &pacer{
		normal: lane{minute: bucket(nm, time.Minute, 0.25), hour: bucket(nh, time.Hour, 0.1)},
		// Half of the urgent lane's limits at once: a reviewer's comment
		// should not wait for the hour's refill; any hour still holds no
		// more than the lane's share.
		urgent: lane{minute: bucket(um, time.Minute, 0.5), hour: bucket(uh, time.Hour, 0.5)},
	}
}

func (p *pacer) lane(urgent bool) lane {
	if urgent {
		return p.urgent
	}
	return p.normal
}

// turnAt is when a request of a lane asked for at t may go, with both
// windows' turns taken (the minute's, then the hour's, from when the minute
// allows it).
func (p *pacer) turnAt(t time.Time, urgent bool) time.Time {
	l := p.lane(urgent)
	for _, b := range []*rate.Limiter{l.minute, l.hour} {
		if b != nil {
			t = t.Add(b.ReserveN(t, 1).DelayFrom(t))
		}
	}
	return t
}

type urgentKey struct{}

// Urgent marks the writes under ctx as what a reviewer reads first: they
// take the pace's urgent lane. Under Yielding it changes nothing.
func Urgent(ctx context.Context) context.Context {
	if v, ok := ctx.Value(urgentKey{}).(bool); ok && !v {
		return ctx
	}
	return context.WithValue(ctx, urgentKey{}, true)
}

// Yielding marks the writes under ctx as never urgent, even a comment or a
// required check: a fork's pull request, whose author pushes as often as
// they like, must not spend the lane the repository's own reviewers read
// from.
func Yielding(ctx context.Context) context.Context {
	return context.WithValue(ctx, urgentKey{}, false)
}

func isUrgent(ctx context.Context) bool { v, _ := ctx.Value(urgentKey{}).(bool); return v }

// MaxPaceHold is the longest a call waits for its turn in the pace while
// holding its worker: a longer wait is a *PaceError, and the job gives its
// worker back to run again when the turn comes.
const MaxPaceHold = 10 * time.Second

// PaceError says a write's turn in the installation's pace is Wait away.
type PaceError struct{ Wait time.Duration }

func (e *PaceError) Error() string {
	return fmt.Sprintf("the installation's pace of writes allows the next in %s", e.Wait.Round(time.Second))
}

// wait takes a turn in both windows. The wait is GitHub's limit, not
// driftback's work: it is added to a publish's time bound before it starts.
// A turn further away than MaxPaceHold is not taken: a *PaceError says when.
func (p *pacer) wait(ctx context.Context) error {
	lane := p.lane(isUrgent(ctx))
	// Both windows' turns are reserved before any wait, the hour's from
	// when the minute allows it (as turnAt). A turn not taken gives back
	// what was reserved for it in both: a write the hour refuses does not
	// spend the minute's. A reservation is given back at the time it was
	// made, or the limiter counts it as used.
	type turn struct {
		r  *rate.Reservation
		at time.Time
	}
	var taken []turn
	giveBack := func() {
		for _, t := range taken {
			t.r.CancelAt(t.at)
		}
	}
	now := time.Now()
	at := now
	for _, l := range []*rate.Limiter{lane.minute, lane.hour} {
		if l == nil {
			continue
		}
		r := l.ReserveN(at, 1)
		taken = append(taken, turn{r, at})
		at = at.Add(r.DelayFrom(at))
	}
	d := at.Sub(now)
	if d == 0 {
		return nil
	}
	if d > MaxPaceHold {
		giveBack()
		return &PaceError{Wait: d}
	}
	extendBudget(ctx, d)
	timer := time.NewTimer(d)
	select {
	case <-ctx.Done():
		timer.Stop()
		giveBack()
		return ctx.Err()
	case <-timer.C:
	}
	return nil
}

// NewClients returns the clients of a GitHub App. baseURL is the REST API
// base ending in "/" (api.github.com, a GitHub Enterprise /api/v3/, a fake).
func NewClients(appID int64, privateKey []byte, baseURL string, retry RetryPolicy) *Clients {
	return &Clients{appID: appID, key: privateKey, baseURL: baseURL, retry: retry.withDefaults(), byID: map[int64]*installClient{}, byRepo: map[string]int64{}}
}

func (c *Clients) client(id int64) (*installClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if in, ok := c.byID[id]; ok {
		return in, nil
	}
	tr, err := ghinstallation.New(http.DefaultTransport, c.appID, id, c.key)
	if err != nil {
		return nil, fmt.Errorf("installation %d: %w", id, err)
	}
	tr.BaseURL = c.baseURL
	gh := github.NewClient(&http.Client{Transport: &retryTransport{next: tr, policy: c.retry, observe: c.observe, pace: newPacer(c.retry)}})
	if gh.BaseURL, err = gh.BaseURL.Parse(c.baseURL); err != nil {
		return nil, err
	}
	in := &installClient{gh: gh, tr: tr}
	c.byID[id] = in
	return in, nil
}

// Client returns the API client of an installation.
func (c *Clients) Client(id int64) (*github.Client, error) {
	in, err := c.client(id)
	if err != nil {
		return nil, err
	}
	return in.gh, nil
}

// Token returns an installation token for git over HTTPS.
func (c *Clients) Token(ctx context.Context, id int64) (string, error) {
	in, err := c.client(id)
	if err != nil {
		return "", err
	}
	return in.tr.Token(ctx)
}

// Forget drops an installation's client, on uninstall.
func (c *Clients) Forget(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byID, id)
	for repo, in := range c.byRepo {
		if in == id {
			delete(c.byRepo, repo)
		}
	}
}

// retryTransport retries what GitHub says to retry: rate limits (waiting for
// the primary limit's reset or a secondary limit's Retry-After) and server
// errors of idempotent calls, with exponential backoff and jitter, bounded. A
// POST that failed with a server error is not retried here: it may have taken
// effect, and the publisher's find-or-create repeats it safely instead. Calls
// that write are serialized per installation, as GitHub asks of integrations.
type retryTransport struct {
	next    http.RoundTripper
	policy  RetryPolicy
	observe CallObserver
	once    sync.Once
	write   chan struct{} // a one-slot semaphore a cancelled caller can stop waiting for
	pace    *pacer
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		t.once.Do(func() { t.write = make(chan struct{}, 1) })
		// The turn in the pace is taken before the write slot, so a call
		// waiting for its turn does not hold up one whose turn has come.
		if t.pace != nil {
			if err := t.pace.wait(req.Context()); err != nil {
				return nil, err
			}
		}
		// Waiting for the write slot is waiting out another call's rate
		// limit, or its work: a publish's bound does not run meanwhile.
		release := holdBudget(req.Context())
		select {
		case t.write <- struct{}{}:
			release()
			defer func() { <-t.write }()
		case <-req.Context().Done():
			release()
			return nil, req.Context().Err()
		}
	}
	var lastErr error
	for attempt := 0; attempt < t.policy.Attempts; attempt++ {
		r := req
		if attempt > 0 {
			r = req.Clone(req.Context())
			if req.Body != nil {
				if req.GetBody == nil {
					return nil, lastErr
				}
				body, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				r.Body = body
			}
		}
		resp, err := t.next.RoundTrip(r)
		if t.observe != nil {
			t.observe(callKind(req.URL.Path), req.Method, laneOf(req), resp)
		}
		wait, retry := t.verdict(req, resp, err, attempt)
		if !retry || attempt == t.policy.Attempts-1 {
			return resp, err
		}
		limited := resp != nil && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests)
		if resp != nil {
			resp.Body.Close()
			lastErr = fmt.Errorf("%s %s: %s", req.Method, req.URL.Path, resp.Status)
		} else {
			lastErr = err
		}
		// A publish's time bound is for work: what GitHub asks us to wait
		// (a rate limit, not a backoff of ours) is added to it, so
		// publishing is not cut off half way.
		if limited {
			extendBudget(req.Context(), wait)
		}
		timer := time.NewTimer(wait)
		select {
		case <-req.Context().Done():
			timer.Stop()
			return nil, req.Context().Err()
		case <-timer.C:
		}
	}
	return nil, lastErr
}

// verdict says whether and after how long to retry.
func (t *retryTransport) verdict(req *http.Request, resp *http.Response, err error, attempt int) (time.Duration, bool) {
	backoff := t.backoff(attempt)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return 0, false
		}
		return backoff, idempotent(req.Method)
	}
	switch {
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests:
		// GitHub's wait is honoured whole: retrying early extends a
		// secondary limit's window. A wait past MaxWait is not retried.
		if s := resp.Header.Get("Retry-After"); s != "" {
			if secs, err := strconv.Atoi(s); err == nil {
				wait := time.Duration(secs)*time.Second + jitter(250*time.Millisecond)
				return wait, wait <= t.policy.MaxWait
			}
		}
		if resp.Header.Get("X-RateLimit-Remaining") == "0" {
			if reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
				// A reset already past (clock skew) still waits a moment.
				wait := max(time.Until(time.Unix(reset, 0)), 0) + time.Second
				return wait, wait <= t.policy.MaxWait
			}
			return backoff, true
		}
		return 0, false // a real permission error
	case resp.StatusCode >= 500:
		return backoff, idempotent(req.Method)
	}
	return 0, false
}

// RateLimitWait says how long GitHub asked to wait, when err is its rate
// limit: until the primary limit's reset, or a secondary limit's Retry-After;
// or how far away the next turn in the installation's pace is.
func RateLimitWait(err error) (time.Duration, bool) {
	var pace *PaceError
	if errors.As(err, &pace) {
		return pace.Wait, true
	}
	var primary *github.RateLimitError
	if errors.As(err, &primary) {
		return max(time.Until(primary.Rate.Reset.Time), 0) + time.Second, true
	}
	var secondary *github.AbuseRateLimitError
	if errors.As(err, &secondary) && secondary.RetryAfter != nil {
		return *secondary.RetryAfter + time.Second, true
	}
	return 0, false
}

func (t *retryTransport) backoff(attempt int) time.Duration {
	d := t.policy.Base << attempt
	return min(d+jitter(d/2), t.policy.MaxWait)
}

func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d)))
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions:
		return true
	}
	return false
}

// callKind names what a GitHub API path is about, for the request counts.
func callKind(path string) string {
	switch {
	case strings.Contains(path, "/comments"):
		return "comment"
	case strings.Contains(path, "/check-runs"):
		return "check-run"
	case strings.Contains(path, "/labels"):
		return "label"
	case strings.Contains(path, "/pulls"):
		return "pull"
	case strings.Contains(path, "/issues"):
		return "issue"
	case strings.Contains(path, "/git/"):
		return "ref"
	case strings.Contains(path, "/deployments"):
		return "deployment"
	}
	return "other"
}

// CallObserver is told of every GitHub API call: what it is about
// ("comment", "check-run", "label", "pull", "issue", "ref", "deployment" or
// "other"), its
// method, the pace's lane a write took ("urgent" or "normal"; "" for a
// read), and GitHub's answer (nil when none came).
type CallObserver func(kind, method, lane string, resp *http.Response)

// laneOf is the lane of the pace req took.
func laneOf(req *http.Request) string {
	switch {
	case req.Method == http.MethodGet || req.Method == http.MethodHead:
		return ""
	case isUrgent(req.Context()):
		return "urgent"
	default:
		return "normal"
	}
}

// Observe sets who is told of every API call. It must be called before the
// first client is made.
func (c *Clients) Observe(o CallObserver) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe = o
}

// NotAllowed says GitHub refused the token the request, not a rate limit:
// 403 "Resource not accessible by integration", as a workflow's read-only
// GITHUB_TOKEN on a fork's pull request is refused every write.
func NotAllowed(err error) bool {
	if _, limited := RateLimitWait(err); limited {
		return false
	}
	var resp *github.ErrorResponse
	return errors.As(err, &resp) && resp.Response != nil && resp.Response.StatusCode == http.StatusForbidden
}
