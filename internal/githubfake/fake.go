// Package githubfake is a stateful fake of the parts of GitHub's REST API that
// driftback uses, served over real HTTP for tests. It answers as GitHub does:
// installation tokens only for a JWT signed with the App's key, 401 without a
// valid token, 404 for unknown paths, 422 for a comment body over 65,536
// characters, and 403 with Retry-After when a secondary rate limit is injected.
package githubfake

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// MaxCommentBody is GitHub's limit on an issue comment.
const MaxCommentBody = 65536

// Fake is the GitHub API state: repositories, pull requests, comments, check
// runs, labels and collaborator permissions.
type Fake struct {
	// Server serves the API; its URL plus "/" is the client's base URL.
	Server *httptest.Server
	// AppID and Key are the App's identity; the client signs JWTs with Key.
	AppID int64
	Key   *rsa.PrivateKey

	// BranchHead, when set, tells the fake which branches the repository's
	// git server has, as GitHub knows its own: a pull request from a missing
	// branch is refused with 422.
	BranchHead func(repo, branch string) (sha string, ok bool)

	mu            sync.Mutex
	nextID        int64
	installations map[int64]bool
	tokens        map[string]token
	jwts          map[string]bool // every App JWT presented, for log canaries
	manifests     manifestState   // manifest.go
	repos         map[string]*Repo
	users         map[string]int64 // login → ID
	comments      map[int64]*Comment
	checkRuns     map[int64]*CheckRun
	deployments   map[int64]*Deployment // deployments.go
	failures      []failure
	stalls        []stall
	// latency delays every answer; contentLimit is GitHub's
	// content-creation limit a minute (0: none), contentAt its recent writes.
	latency      time.Duration
	contentLimit int
	contentAt    []time.Time
	calls        []Call
}

type token struct {
	installation int64
	expires      time.Time
	// actions marks a GitHub Actions workflow's GITHUB_TOKEN: what it
	// writes is by github-actions[bot] and the GitHub Actions App.
	actions bool
	// readOnly marks the read-only GITHUB_TOKEN a workflow on a fork's
	// pull_request event gets: every write is refused.
	readOnly bool
}

// The GitHub Actions App, whose installation token a workflow's
// GITHUB_TOKEN is.
const (
	ActionsLogin = "github-actions[bot]"
	ActionsSlug  = "github-actions"
	ActionsAppID = 15368
)

// Repo is a repository and its pull requests.
type Repo struct {
	Owner, Name   string
	DefaultBranch string
	CloneURL      string
	Installation  int64
	Pulls         map[int]*Pull
	// Issues are issues proper; pull requests share their numbers.
	Issues map[int]*Issue
	// Permissions maps a user login to admin, maintain, write, triage, read or none.
	Permissions map[string]string
}

// Pull is a pull request.
type Pull struct {
	Number   int
	Title    string
	User     string
	HeadSHA  string
	HeadRef  string
	HeadRepo string // owner/name; another repository means a fork
	// HeadRepoGone sends the head repository as null, as GitHub does for a
	// pull request whose fork was deleted.
	HeadRepoGone bool
	BaseSHA      string
	BaseRef      string
	Draft        bool
	State        string
	Labels       []string
	// LabeledBy is who applied each label last, as the issue's events say
	// (GET /repos/o/r/issues/N/events); a label not in it was applied by
	// the pull request's author.
	LabeledBy map[string]string
	// Reviewers are who its review was requested from.
	Reviewers []string
	Body      string
	Merged    bool
	// Mergeable is what GitHub says of merging it: nil while it computes
	// (null), false on conflicts. MergeSHA is its test merge, pushed by
	// the test as refs/pull/N/merge. MergeableAfter is how many reads of
	// the pull request answer null before Mergeable is told.
	Mergeable      *bool
	MergeSHA       string
	MergeableAfter int
	// Commits are the commits the pull request carried, besides its head:
	// GitHub lists it for each (GET /repos/o/r/commits/SHA/pulls).
	Commits []string
}

// Comment is an issue or pull-request comment.
type Comment struct {
	ID      int64
	Repo    string
	Issue   int
	User    string
	Body    string
	Created time.Time
	Updated time.Time
}

// CheckRun is a check run on a commit.
type CheckRun struct {
	ID   int64
	Repo string
	// AppID and AppSlug are the App that created it.
	AppID      int64
	AppSlug    string
	Name       string
	HeadSHA    string
	Status     string
	Conclusion string
	Title      string
	Summary    string
	Text       string
}

// Call is one request the fake answered.
type Call struct {
	Method, Path string
	Status       int
	// At is when the request arrived.
	At time.Time
}

type failure struct {
	method, pathPrefix string
	// denied answers as GitHub does a request the installation has no
	// permission for, not as a rate limit.
	denied     bool
	remaining  int
	skip       int // matching requests let through first
	status     int
	retryAfter int
}

// New starts a fake with a fresh App key.
func New() (*Fake, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	f := &Fake{
		AppID: 4242, Key: key, nextID: 1000,
		installations: map[int64]bool{},
		tokens:        map[string]token{},
		jwts:          map[string]bool{},
		repos:         map[string]*Repo{},
		comments:      map[int64]*Comment{},
		checkRuns:     map[int64]*CheckRun{},
		deployments:   map[int64]*Deployment{},
	}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f, nil
}

// Close stops the server.
func (f *Fake) Close() { f.Server.Close() }

// URL is the API base URL, with the trailing slash go-github wants.
func (f *Fake) URL() string { return f.Server.URL + "/" }

// KeyPEM is the App's private key as GitHub hands it out.
func (f *Fake) KeyPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(f.Key)})
}

// AddRepo registers a repository under an installation.
func (f *Fake) AddRepo(r *Repo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Pulls == nil {
		r.Pulls = map[int]*Pull{}
	}
	if r.Issues == nil {
		r.Issues = map[int]*Issue{}
	}
	if r.Permissions == nil {
		r.Permissions = map[string]string{}
	}
	if r.DefaultBranch == "" {
		r.DefaultBranch = "main"
	}
	f.installations[r.Installation] = true
	f.repos[r.Owner+"/"+r.Name] = r
}

// SetPull creates or replaces a pull request.
func (f *Fake) SetPull(repo string, p Pull) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p.State == "" {
		p.State = "open"
	}
	f.repos[repo].Pulls[p.Number] = &p
}

// FailNext makes the next n requests whose method and path prefix match fail
// with a secondary rate limit: 403 and Retry-After seconds.
func (f *Fake) FailNext(method, pathPrefix string, n, retryAfter int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, failure{method: method, pathPrefix: pathPrefix, remaining: n, status: http.StatusForbidden, retryAfter: retryAfter})
}

// Deny refuses every request whose method and path prefix match as GitHub
// refuses what the App's permissions do not cover: 403 "Resource not
// accessible by integration".
func (f *Fake) Deny(method, pathPrefix string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, failure{method: method, pathPrefix: pathPrefix, denied: true, remaining: math.MaxInt, status: http.StatusForbidden})
}

// FailAfter is FailNext after letting skip matching requests through.
func (f *Fake) FailAfter(method, pathPrefix string, skip, n, retryAfter int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, failure{method: method, pathPrefix: pathPrefix, skip: skip, remaining: n, status: http.StatusForbidden, retryAfter: retryAfter})
}

// stall holds requests whose method and path prefix match until released.
type stall struct {
	method, pathPrefix string
	released           chan struct{}
}

// Stall holds every request whose method and path prefix match, as a slow
// GitHub would, until release is called (at the latest when the test ends).
func (f *Fake) Stall(method, pathPrefix string) (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := stall{method: method, pathPrefix: pathPrefix, released: make(chan struct{})}
	f.stalls = append(f.stalls, s)
	var once sync.Once
	return func() { once.Do(func() { close(s.released) }) }
}

// Comments returns the comments on an issue or pull request, oldest first.
func (f *Fake) Comments(repo string, issue int) []Comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Comment
	for _, c := range f.comments {
		if c.Repo == repo && c.Issue == issue {
			out = append(out, *c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// CheckRuns returns the check runs on a commit.
func (f *Fake) CheckRuns(repo, sha string) []CheckRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []CheckRun
	for _, c := range f.checkRuns {
		if c.Repo == repo && c.HeadSHA == sha {
			out = append(out, *c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Calls returns the requests answered so far.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// AddComment adds a comment as a user, as a person would.
func (f *Fake) AddComment(repo string, issue int, user, body string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addComment(repo, issue, user, body)
}

func (f *Fake) addComment(repo string, issue int, user, body string) int64 {
	f.nextID++
	now := time.Now().UTC()
	f.comments[f.nextID] = &Comment{ID: f.nextID, Repo: repo, Issue: issue, User: user, Body: body, Created: now, Updated: now}
	return f.nextID
}

// botLogin is the login of the App's bot user.
func (f *Fake) botLogin() string { return Slug + "[bot]" }

type route struct {
	method  string
	pattern *regexp.Regexp
	handle  func(w http.ResponseWriter, r *http.Request, m []string, inst int64)
	auth    string // "jwt", "token" or "" (none)
}

func (f *Fake) routes() []route {
	re := regexp.MustCompile
	return []route{
		{"POST", re(`^/settings/apps/new$`), f.newAppFromManifest, ""},
		{"POST", re(`^/organizations/([^/]+)/settings/apps/new$`), f.newAppFromManifest, ""},
		{"POST", re(`^/app-manifests/([^/]+)/conversions$`), f.convertManifest, ""},
		{"POST", re(`^/app/installations/(\d+)/access_tokens$`), f.createToken, "jwt"},
		{"GET", re(`^/app/installations$`), f.listInstallations, "jwt"},
		{"GET", re(`^/app$`), f.getApp, "jwt"},
		{"GET", re(`^/user$`), f.getUser, "token"},
		{"GET", re(`^/repos/([^/]+)/([^/]+)$`), f.getRepo, "token"},
		{"GET", re(`^/repos/([^/]+)/([^/]+)/installation$`), f.repoInstallation, "jwt"},
		{"GET", re(`^/repos/([^/]+)/([^/]+)/pulls$`), f.listPulls, "token"},
		{"POST", re(`^/repos/([^/]+)/([^/]+)/pulls$`), f.createPull, "token"},
		{"PATCH", re(`^/repos/([^/]+)/([^/]+)/pulls/(\d+)$`), f.editPull, "token"},
		{"GET", re(`^/repos/([^/]+)/([^/]+)/issues$`), f.listIssues, "token"},
		{"POST", re(`^/repos/([^/]+)/([^/]+)/issues$`), f.createIssue, "token"},
		{"GET", re(`^/repos/([^/]+)/([^/]+)/issues/(\d+)$`), f.getIssue, "token"},
		{"PATCH", re(`^/repos/([^/]+)/([^/]+)/issues/(\d+)$`), f.editIssue, "token"},
		{"POST", re(`^/repos/([^/]+)/([^/]+)/issues/(\d+)/labels$`), f.addLabels, "token"},
		{"GET", re(`^/repos/([^/]+)/([^/]+)/pulls/(\d+)$`), f.getPull, "token"},
		{"GET", re(`^/repos/([^/]+)/([^/]+)/issues/(\d+)/comments$`), f.listComments, "token"},
		{"POST", re(`^/repos/([^/]+)/([^/]+)/issues/(\d+)/comments$`), f.createComment, "token"},
		{"PATCH", re(`^/repos/([^/]+)/([^/]+)/issues/comments/(\d+)$`), f.editComment, "token"},
		{"DELETE", re(`^/repos/([^/]+)/([^/]+)/issues/comments/(\d+)$`), f.deleteComment, "token"},
		{"GET", re(`^/repos/([^/]+)/([^/]+)/issues/(\d+)/labels$`), f.listLabels, "token"},
		{"GET", re(`^/repos/([^/]+)/([^/]+)/issues/(\d+)/events$`), f.listIssueEvents, "token"},
		{"GET", re(`^/repos/([^/]+)/([^/]+)/collaborators/([^/]+)/permission$`), f.permission, "token"},
		{"POST", re(`^/repos/([^/]+)/([^/]+)/pulls/(\d+)/requested_reviewers$`), f.requestReviewers, "token"},
		{"GET", re(`^/users/([^/]+)$`), f.getUserByLogin, "token"},
		{"POST", re(`^/repos/([^/]+)/([^/]+)/check-runs$`), f.createCheckRun, "token"},
		{"PATCH", re(`^/repos/([^/]+)/([^/]+)/check-runs/(\d+)$`), f.updateCheckRun, "token"},
		{"GET", re(`^/repos/([^/]+)/([^/]+)/commits/([^/]+)/check-runs$`), f.listCheckRuns, "token"},
		{"GET", re(`^/repos/([^/]+)/([^/]+)/commits/([^/]+)/pulls$`), f.pullsWithCommit, "token"},
		{"GET", re(`^/repos/([^/]+)/([^/]+)/deployments$`), f.listDeployments, "token"},
		{"POST", re(`^/repos/([^/]+)/([^/]+)/deployments$`), f.createDeployment, "token"},
		{"GET", re(`^/repos/([^/]+)/([^/]+)/deployments/(\d+)/statuses$`), f.listDeploymentStatuses, "token"},
		{"POST", re(`^/repos/([^/]+)/([^/]+)/deployments/(\d+)/statuses$`), f.createDeploymentStatus, "token"},
	}
}

type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(s int) { r.status = s; r.ResponseWriter.WriteHeader(s) }

// SetLatency makes every answer take d, as a round trip to GitHub does.
func (f *Fake) SetLatency(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.latency = d
}

// LimitContent answers content-creating requests (POST, PATCH, PUT, DELETE)
// beyond perMinute in the last minute with GitHub's secondary rate limit:
// 403 and Retry-After 60. Zero lifts the limit.
func (f *Fake) LimitContent(perMinute int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.contentLimit = perMinute
}

// overContentLimit counts a content-creating request against the limit.
func (f *Fake) overContentLimit(method string, at time.Time) bool {
	if method == http.MethodGet || method == http.MethodHead {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.contentLimit <= 0 {
		return false
	}
	recent := f.contentAt[:0]
	for _, t := range f.contentAt {
		if at.Sub(t) < time.Minute {
			recent = append(recent, t)
		}
	}
	f.contentAt = recent
	if len(recent) >= f.contentLimit {
		return true
	}
	f.contentAt = append(f.contentAt, at)
	return false
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{ResponseWriter: w, status: 200}
	at := time.Now()
	defer func() {
		f.mu.Lock()
		f.calls = append(f.calls, Call{Method: r.Method, Path: r.URL.Path, Status: rec.status, At: at})
		f.mu.Unlock()
	}()
	f.mu.Lock()
	latency := f.latency
	f.mu.Unlock()
	if latency > 0 {
		time.Sleep(latency)
	}
	path := strings.TrimPrefix(r.URL.Path, "/api/v3") // GitHub Enterprise's prefix
	if f.overContentLimit(r.Method, at) {
		rec.Header().Set("Retry-After", "60")
		writeJSON(rec, http.StatusForbidden, map[string]any{
			"message":           "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
			"documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#secondary-rate-limits",
		})
		return
	}
	f.mu.Lock()
	stalls := append([]stall(nil), f.stalls...)
	f.mu.Unlock()
	for _, s := range stalls {
		if s.method == r.Method && strings.HasPrefix(path, s.pathPrefix) {
			select {
			case <-s.released:
			case <-r.Context().Done():
				return
			}
		}
	}
	if fail := f.takeFailure(r.Method, path); fail != nil && fail.denied {
		writeJSON(rec, http.StatusForbidden, map[string]any{"message": "Resource not accessible by integration",
			"documentation_url": "https://docs.github.com/rest"})
		return
	} else if fail != nil {
		rec.Header().Set("Retry-After", strconv.Itoa(fail.retryAfter))
		writeJSON(rec, fail.status, map[string]any{
			"message":           "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
			"documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#secondary-rate-limits",
		})
		return
	}
	for _, rt := range f.routes() {
		m := rt.pattern.FindStringSubmatch(path)
		if m == nil || rt.method != r.Method {
			continue
		}
		var inst int64
		switch rt.auth {
		case "jwt":
			if err := f.checkJWT(r); err != nil {
				writeJSON(rec, http.StatusUnauthorized, map[string]any{"message": "A JSON web token could not be decoded: " + err.Error()})
				return
			}
		case "token":
			var ok bool
			if inst, ok = f.checkToken(r); !ok {
				writeJSON(rec, http.StatusUnauthorized, map[string]any{"message": "Bad credentials"})
				return
			}
			if r.Method != http.MethodGet && f.readOnly(r) {
				writeJSON(rec, http.StatusForbidden, map[string]any{"message": "Resource not accessible by integration",
					"documentation_url": "https://docs.github.com/rest/pulls/comments#create-a-review-comment-for-a-pull-request"})
				return
			}
		}
		rt.handle(rec, r, m, inst)
		return
	}
	writeJSON(rec, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
}

func (f *Fake) takeFailure(method, path string) *failure {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.failures {
		fl := &f.failures[i]
		if fl.remaining > 0 && fl.method == method && strings.HasPrefix(path, fl.pathPrefix) {
			if fl.skip > 0 {
				fl.skip--
				continue
			}
			fl.remaining--
			c := *fl
			return &c
		}
	}
	return nil
}

func (f *Fake) checkJWT(r *http.Request) error {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return fmt.Errorf("no bearer token")
	}
	f.mu.Lock()
	f.jwts[raw] = true
	f.mu.Unlock()
	claims := &jwt.RegisteredClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		if _, ok := t.Method.(*jwt.SigningMethodRSA); !ok {
			return nil, fmt.Errorf("unexpected signing method %v", t.Header["alg"])
		}
		return &f.Key.PublicKey, nil
	})
	if err != nil {
		return err
	}
	if claims.Issuer != strconv.FormatInt(f.AppID, 10) {
		return fmt.Errorf("issuer %q is not App %d", claims.Issuer, f.AppID)
	}
	if claims.ExpiresAt == nil || claims.ExpiresAt.Sub(time.Now()) > 10*time.Minute+time.Minute {
		return fmt.Errorf("expiry must be within 10 minutes")
	}
	return nil
}

func (f *Fake) checkToken(r *http.Request) (int64, bool) {
	h := r.Header.Get("Authorization")
	raw, ok := strings.CutPrefix(h, "token ")
	if !ok {
		raw, ok = strings.CutPrefix(h, "Bearer ")
	}
	if !ok {
		return 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tokens[raw]
	if !ok || time.Now().After(t.expires) {
		return 0, false
	}
	return t.installation, true
}

// Token issues an installation token directly, for git clients in tests.
func (f *Fake) Token(installation int64) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.issue(installation)
}

func (f *Fake) issue(installation int64) string {
	b := make([]byte, 20)
	_, _ = rand.Read(b) // crypto/rand does not fail on Linux
	tok := "ghs_" + hex.EncodeToString(b)
	f.tokens[tok] = token{installation: installation, expires: time.Now().Add(time.Hour)}
	return tok
}

// ActionsToken issues the GITHUB_TOKEN of a GitHub Actions workflow run in
// a repository of the installation: what it writes is by github-actions[bot].
func (f *Fake) ActionsToken(installation int64) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	tok := f.issue(installation)
	t := f.tokens[tok]
	t.actions = true
	f.tokens[tok] = t
	return tok
}

// ReadOnlyActionsToken issues the GITHUB_TOKEN of a workflow run on a
// fork's pull_request event: it reads, and every write is refused with 403
// "Resource not accessible by integration", as GitHub refuses it.
func (f *Fake) ReadOnlyActionsToken(installation int64) string {
	tok := f.ActionsToken(installation)
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tokens[tok]
	t.readOnly = true
	f.tokens[tok] = t
	return tok
}

// readOnly says the request's token may not write.
func (f *Fake) readOnly(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	raw, ok := strings.CutPrefix(h, "token ")
	if !ok {
		raw, _ = strings.CutPrefix(h, "Bearer ")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokens[raw].readOnly
}

// writer is who a request's token writes as: its login and its App.
func (f *Fake) writer(r *http.Request) (login string, appID int64, slug string) {
	h := r.Header.Get("Authorization")
	raw, ok := strings.CutPrefix(h, "token ")
	if !ok {
		raw, _ = strings.CutPrefix(h, "Bearer ")
	}
	if f.tokens[raw].actions {
		return ActionsLogin, ActionsAppID, ActionsSlug
	}
	return f.botLogin(), f.AppID, Slug
}

// ValidToken reports whether tok is an unexpired installation token, for a git
// server that authenticates like GitHub's.
func (f *Fake) ValidToken(tok string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tokens[tok]
	return ok && time.Now().Before(t.expires)
}

// Credentials are every installation token the fake issued and every App
// JWT it was shown: values that must never appear in a log.
func (f *Fake) Credentials() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for t := range f.tokens {
		out = append(out, t)
	}
	for j := range f.jwts {
		out = append(out, j)
	}
	return out
}

// TokensIssued counts the installation tokens handed out.
func (f *Fake) TokensIssued() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tokens)
}

func (f *Fake) createToken(w http.ResponseWriter, _ *http.Request, m []string, _ int64) {
	id, _ := strconv.ParseInt(m[1], 10, 64)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.installations[id] {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return
	}
	tok := f.issue(id)
	writeJSON(w, http.StatusCreated, map[string]any{"token": tok, "expires_at": f.tokens[tok].expires.Format(time.RFC3339)})
}

// Slug is the App's slug; its bot user is Slug + "[bot]".
const Slug = "driftback"

func (f *Fake) getApp(w http.ResponseWriter, _ *http.Request, _ []string, _ int64) {
	writeJSON(w, http.StatusOK, map[string]any{"id": f.AppID, "slug": Slug, "name": "driftback"})
}

// getUser answers as GitHub does for an installation token, a workflow's
// GITHUB_TOKEN included: it is no user.
func (f *Fake) getUser(w http.ResponseWriter, _ *http.Request, _ []string, _ int64) {
	writeJSON(w, http.StatusForbidden, map[string]any{"message": "Resource not accessible by integration", "documentation_url": "https://docs.github.com/rest/users/users#get-the-authenticated-user"})
}

func (f *Fake) listInstallations(w http.ResponseWriter, _ *http.Request, _ []string, _ int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []map[string]any
	for id := range f.installations {
		out = append(out, map[string]any{"id": id, "app_id": f.AppID})
	}
	writeJSON(w, http.StatusOK, out)
}

// repo finds the repository of a request that the token's installation may see.
// pull finds the pull request a route names (owner, repository and number
// in m[1:4]), answering 404 as GitHub does when it or its repository is not
// there; f.mu is held.
func (f *Fake) pull(w http.ResponseWriter, m []string, inst int64) (*Repo, *Pull) {
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return nil, nil
	}
	n, _ := strconv.Atoi(m[3])
	p, ok := r.Pulls[n]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return nil, nil
	}
	return r, p
}

func (f *Fake) repo(w http.ResponseWriter, owner, name string, inst int64) *Repo {
	r, ok := f.repos[owner+"/"+name]
	if !ok || r.Installation != inst {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return nil
	}
	return r
}

func (f *Fake) getRepo(w http.ResponseWriter, _ *http.Request, m []string, inst int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	writeJSON(w, http.StatusOK, repoJSON(r))
}

func repoJSON(r *Repo) map[string]any {
	return map[string]any{
		"name": r.Name, "full_name": r.Owner + "/" + r.Name, "default_branch": r.DefaultBranch,
		"clone_url": r.CloneURL, "owner": map[string]any{"login": r.Owner},
	}
}

func (f *Fake) getPull(w http.ResponseWriter, _ *http.Request, m []string, inst int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, p := f.pull(w, m, inst)
	if p == nil {
		return
	}
	out := f.pullJSON(r, p)
	if p.MergeableAfter > 0 {
		p.MergeableAfter--
		out["mergeable"], out["merge_commit_sha"] = nil, nil
	}
	writeJSON(w, http.StatusOK, out)
}

// nilIfEmpty is null for "", as GitHub sends an absent SHA.
func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func headRepoJSON(p *Pull, name, full, owner string) any {
	if p.HeadRepoGone {
		return nil
	}
	return map[string]any{"name": name, "full_name": full, "owner": map[string]any{"login": owner}}
}

func (f *Fake) pullJSON(r *Repo, p *Pull) map[string]any {
	headRepo := p.HeadRepo
	if headRepo == "" {
		headRepo = r.Owner + "/" + r.Name
	}
	owner, name, _ := strings.Cut(headRepo, "/")
	var labels []map[string]any
	for _, l := range p.Labels {
		labels = append(labels, map[string]any{"name": l})
	}
	var mergedAt any
	if p.Merged {
		mergedAt = "2026-01-01T00:00:00Z"
	}
	return map[string]any{
		"number": p.Number, "title": p.Title, "state": p.State, "draft": p.Draft, "body": p.Body,
		"merged": p.Merged, "merged_at": mergedAt,
		"html_url": fmt.Sprintf("%s/%s/%s/pull/%d", f.Server.URL, r.Owner, r.Name, p.Number),
		"user":     map[string]any{"login": p.User},
		"labels":   labels,
		"head": map[string]any{"sha": p.HeadSHA, "ref": p.HeadRef, "label": owner + ":" + p.HeadRef,
			"repo": headRepoJSON(p, name, headRepo, owner)},
		"base":             map[string]any{"sha": p.BaseSHA, "ref": p.BaseRef, "repo": repoJSON(r)},
		"mergeable":        p.Mergeable,
		"merge_commit_sha": nilIfEmpty(p.MergeSHA),
	}
}

func (f *Fake) listComments(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	n, _ := strconv.Atoi(m[3])
	var all []*Comment
	for _, c := range f.comments {
		if c.Repo == r.Owner+"/"+r.Name && c.Issue == n {
			all = append(all, c)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	page, per := pageOf(req)
	start := min((page-1)*per, len(all))
	end := min(start+per, len(all))
	if end < len(all) {
		w.Header().Set("Link", fmt.Sprintf(`<%s%s?page=%d&per_page=%d>; rel="next"`, f.Server.URL, req.URL.Path, page+1, per))
	}
	out := []map[string]any{}
	for _, c := range all[start:end] {
		out = append(out, commentJSON(c))
	}
	writeJSON(w, http.StatusOK, out)
}

func pageOf(r *http.Request) (page, per int) {
	page, _ = strconv.Atoi(r.URL.Query().Get("page"))
	per, _ = strconv.Atoi(r.URL.Query().Get("per_page"))
	if page < 1 {
		page = 1
	}
	if per < 1 || per > 100 {
		per = 30
	}
	return page, per
}

func commentJSON(c *Comment) map[string]any {
	return map[string]any{"id": c.ID, "body": c.Body, "user": map[string]any{"login": c.User, "type": userType(c.User)},
		"created_at": c.Created.Format(time.RFC3339), "updated_at": c.Updated.Format(time.RFC3339)}
}

func userType(login string) string {
	if strings.HasSuffix(login, "[bot]") {
		return "Bot"
	}
	return "User"
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON"})
		return false
	}
	return true
}

func tooLong(w http.ResponseWriter, body string) bool {
	if len([]rune(body)) > MaxCommentBody {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
			"errors": []map[string]any{{"resource": "IssueComment", "code": "custom", "field": "body", "message": "body is too long (maximum is 65536 characters)"}}})
		return true
	}
	return false
}

func (f *Fake) createComment(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	var in struct{ Body string }
	if !readJSON(w, req, &in) || tooLong(w, in.Body) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	n, _ := strconv.Atoi(m[3])
	login, _, _ := f.writer(req)
	id := f.addComment(r.Owner+"/"+r.Name, n, login, in.Body)
	writeJSON(w, http.StatusCreated, commentJSON(f.comments[id]))
}

func (f *Fake) editComment(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	var in struct{ Body string }
	if !readJSON(w, req, &in) || tooLong(w, in.Body) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.repo(w, m[1], m[2], inst) == nil {
		return
	}
	id, _ := strconv.ParseInt(m[3], 10, 64)
	c, ok := f.comments[id]
	if !ok || c.Repo != m[1]+"/"+m[2] {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return
	}
	if login, _, _ := f.writer(req); c.User != login {
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "Resource not accessible by integration"})
		return
	}
	c.Body, c.Updated = in.Body, time.Now().UTC()
	writeJSON(w, http.StatusOK, commentJSON(c))
}

func (f *Fake) deleteComment(w http.ResponseWriter, _ *http.Request, m []string, inst int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.repo(w, m[1], m[2], inst) == nil {
		return
	}
	id, _ := strconv.ParseInt(m[3], 10, 64)
	c, ok := f.comments[id]
	if !ok || c.Repo != m[1]+"/"+m[2] {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return
	}
	delete(f.comments, id)
	w.WriteHeader(http.StatusNoContent)
}

func (f *Fake) listLabels(w http.ResponseWriter, _ *http.Request, m []string, inst int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	n, _ := strconv.Atoi(m[3])
	out := []map[string]any{}
	for _, l := range r.labelsOf(n) {
		out = append(out, map[string]any{"name": l})
	}
	writeJSON(w, http.StatusOK, out)
}

// listIssueEvents lists a pull request's "labeled" events, one for each of
// its labels, oldest first, as GitHub lists an issue's events.
func (f *Fake) listIssueEvents(w http.ResponseWriter, _ *http.Request, m []string, inst int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	n, _ := strconv.Atoi(m[3])
	out := []map[string]any{}
	if p, ok := r.Pulls[n]; ok {
		for i, l := range p.Labels {
			by, ok := p.LabeledBy[l]
			if !ok {
				by = p.User
			}
			out = append(out, map[string]any{"id": i + 1, "event": "labeled", "actor": map[string]any{"login": by},
				"label": map[string]any{"name": l}, "created_at": "2026-01-01T00:00:00Z"})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (f *Fake) permission(w http.ResponseWriter, _ *http.Request, m []string, inst int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	p, ok := r.Permissions[m[3]]
	if !ok {
		p = "none"
	}
	writeJSON(w, http.StatusOK, map[string]any{"permission": p, "user": map[string]any{"login": m[3]}})
}

type checkRunIn struct {
	Name       string `json:"name"`
	HeadSHA    string `json:"head_sha"`
	Status     string `json:"status"`
	Conclusion string `json:"conclusion"`
	Output     *struct {
		Title   string `json:"title"`
		Summary string `json:"summary"`
		Text    string `json:"text"`
	} `json:"output"`
}

func (f *Fake) applyCheckRun(w http.ResponseWriter, c *CheckRun, in checkRunIn) bool {
	if in.Output != nil && (len(in.Output.Summary) > 65535 || len(in.Output.Text) > 65535) {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Invalid request.\n\nOnly 65535 characters are allowed; 65536 were supplied."})
		return false
	}
	if in.Name != "" {
		c.Name = in.Name
	}
	if in.HeadSHA != "" {
		c.HeadSHA = in.HeadSHA
	}
	if in.Status != "" {
		c.Status = in.Status
	}
	if in.Conclusion != "" {
		c.Conclusion, c.Status = in.Conclusion, "completed"
	}
	if in.Output != nil {
		c.Title, c.Summary, c.Text = in.Output.Title, in.Output.Summary, in.Output.Text
	}
	return true
}

func checkRunJSON(c *CheckRun) map[string]any {
	return map[string]any{"id": c.ID, "name": c.Name, "head_sha": c.HeadSHA, "status": c.Status, "conclusion": c.Conclusion,
		"output": map[string]any{"title": c.Title, "summary": c.Summary, "text": c.Text},
		"app":    map[string]any{"id": c.AppID, "slug": c.AppSlug}}
}

func (f *Fake) createCheckRun(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	var in checkRunIn
	if !readJSON(w, req, &in) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	if in.Name == "" || in.HeadSHA == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed"})
		return
	}
	f.nextID++
	_, appID, slug := f.writer(req)
	c := &CheckRun{ID: f.nextID, Repo: r.Owner + "/" + r.Name, Status: "queued", AppID: appID, AppSlug: slug}
	if !f.applyCheckRun(w, c, in) {
		return
	}
	f.checkRuns[c.ID] = c
	writeJSON(w, http.StatusCreated, checkRunJSON(c))
}

func (f *Fake) updateCheckRun(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	var in checkRunIn
	if !readJSON(w, req, &in) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.repo(w, m[1], m[2], inst) == nil {
		return
	}
	id, _ := strconv.ParseInt(m[3], 10, 64)
	c, ok := f.checkRuns[id]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return
	}
	if _, appID, _ := f.writer(req); appID != c.AppID {
		// GitHub lets only the App that created a check run change it.
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "Invalid app_id `" + strconv.FormatInt(appID, 10) + "` - check run can only be modified by its creator."})
		return
	}
	if f.applyCheckRun(w, c, in) {
		writeJSON(w, http.StatusOK, checkRunJSON(c))
	}
}

func (f *Fake) listCheckRuns(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	runs := []map[string]any{}
	name := req.URL.Query().Get("check_name")
	app := req.URL.Query().Get("app_id")
	for _, c := range f.checkRuns {
		if c.Repo == r.Owner+"/"+r.Name && c.HeadSHA == m[3] && (name == "" || c.Name == name) && (app == "" || app == strconv.FormatInt(c.AppID, 10)) {
			runs = append(runs, checkRunJSON(c))
		}
	}
	// Newest first and paginated (30 a page, at most 100), as GitHub lists them.
	for i, j := 0, len(runs)-1; i < j; i, j = i+1, j-1 {
		runs[i], runs[j] = runs[j], runs[i]
	}
	page, per := pageOf(req)
	start := min((page-1)*per, len(runs))
	end := min(start+per, len(runs))
	if end < len(runs) {
		q := req.URL.Query()
		q.Set("page", strconv.Itoa(page+1))
		q.Set("per_page", strconv.Itoa(per))
		w.Header().Set("Link", fmt.Sprintf(`<%s%s?%s>; rel="next"`, f.Server.URL, req.URL.Path, q.Encode()))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(runs), "check_runs": runs[start:end]})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client reads what arrives
}
