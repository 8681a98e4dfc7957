package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-github/v60/github"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/metrics"
	"github.com/driftback/driftback/internal/githubfake"
	"github.com/driftback/driftback/internal/gittest"
	"github.com/driftback/driftback/internal/kubetest"
)

const (
	owner    = "acme"
	repoName = "gitops"
	fullName = owner + "/" + repoName
	instID   = int64(77)
)

// world is everything an end-to-end test talks to: the GitHub fake, a real git
// server holding the repository, the real apiserver, and driftback's handler
// served over HTTP.
type world struct {
	t      testing.TB
	gh     *githubfake.Fake
	git    *gittest.Server
	env    *kubetest.Env
	local  *git.Repository
	dir    string
	cfg    *config.Config
	secret string
	srv    *Server
	http   *httptest.Server
	// url is where driftback's webhook and health endpoints answer.
	url    string
	cancel context.CancelFunc
	seq    int
	// logs holds every log line; no secret may be among them.
	logs *logCapture
	// message, when set, is the next commit's message; parents its
	// parents (a merge), consumed like it.
	message string
	parents []plumbing.Hash
}

func newWorld(t testing.TB, configure func(*config.Config)) *world {
	t.Helper()
	return newWorldOn(t, kubetest.New(t), configure)
}

// newWorldOn is newWorld on a cluster of the test's own (kubetest.NewAudited).
func newWorldOn(t testing.TB, env *kubetest.Env, configure func(*config.Config)) *world {
	t.Helper()
	w := &world{t: t, env: env, secret: "e2e-webhook-secret", logs: &logCapture{}}
	var err error
	if w.gh, err = githubfake.New(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.gh.Close)
	// Registered first, so it runs last: after the servers have stopped.
	t.Cleanup(func() { w.logs.check(t) })
	w.logs.secret(string(w.gh.KeyPEM()))
	w.logs.secret(w.secret)
	w.logs.secretsFrom(w.gh.Credentials) // installation tokens and App JWTs
	for _, k := range [][]byte{w.env.Config.KeyData, []byte(w.env.Config.BearerToken)} {
		if len(k) > 0 {
			w.logs.secret(string(k)) // the kubeconfig's client key or token
		}
	}

	// A git server that takes installation tokens, as GitHub's does.
	w.git = gittest.NewServer(t, w.gh.ValidToken)

	w.dir = t.TempDir()
	if w.local, err = git.PlainInit(filepath.Join(w.dir, "work"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := w.local.CreateRemote(&gitconfig.RemoteConfig{Name: "origin", URLs: []string{w.git.URL(fullName)}}); err != nil {
		t.Fatal(err)
	}
	w.gh.AddRepo(&githubfake.Repo{Owner: owner, Name: repoName, Installation: instID,
		CloneURL:    w.git.URL(fullName),
		Permissions: map[string]string{"maintainer": "write", "visitor": "read"}})

	kubeconfig := writeKubeconfigFile(t, w.env, filepath.Join(w.dir, "kubeconfig"))
	keyFile := filepath.Join(w.dir, "key.pem")
	if err := os.WriteFile(keyFile, w.gh.KeyPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	y := fmt.Sprintf(`github:
  appID: %d
  privateKeyFile: %s
  apiURL: %s
server:
  workers: 2
  queueSize: 16
  cacheDir: %s
clusters:
  test:
    kubeconfig: %s
targets:
- name: prod
  repo: %s
  path: deploy/prod
  cluster: test
  policy:
    failOn: [pvc-removal]
- name: staging
  repo: %s
  path: deploy/staging
  cluster: test
`, w.gh.AppID, keyFile, w.gh.URL(), filepath.Join(w.dir, "cache"), kubeconfig, fullName, fullName)
	if w.cfg, err = config.ParseConfig([]byte(y), func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if configure != nil {
		configure(w.cfg)
	}
	w.start()
	return w
}

// start runs a driftback server (again, after stop: a restart).
func (w *world) start() {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	secrets := &config.Secrets{PrivateKey: w.gh.KeyPEM(), WebhookSecret: []byte(w.secret), AuditToken: []byte(auditToken)}
	srv, err := NewServer(ctx, w.cfg, secrets, w.logs.logger(w.t, slog.LevelWarn))
	if err != nil {
		w.t.Fatal(err)
	}
	// The GitHub clients keep the production retry policy NewServer gives them.
	w.srv, w.cancel = srv, cancel
	w.http = httptest.NewServer(srv.Handler())
	w.url = w.http.URL
	w.t.Cleanup(w.stop)
}

func (w *world) stop() {
	if w.http != nil {
		w.http.Close()
		w.http = nil
	}
	if w.cancel != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		w.srv.Queue.Close(ctx)
		cancel()
		w.cancel()
		w.cancel = nil
	}
}

type testWriter struct{ t testing.TB }

func (tw testWriter) Write(p []byte) (int, error) {
	tw.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// ns puts the test's namespace into a manifest.
func (w *world) ns(y string) string { return strings.ReplaceAll(y, "NS", w.env.Namespace) }

// commit writes files (nil deletes) on top of parent (zero: the current HEAD)
// and returns the new commit.
func (w *world) commit(parent plumbing.Hash, files map[string]any) plumbing.Hash {
	w.t.Helper()
	wt, err := w.local.Worktree()
	if err != nil {
		w.t.Fatal(err)
	}
	if !parent.IsZero() {
		if err := wt.Checkout(&git.CheckoutOptions{Hash: parent, Force: true}); err != nil {
			w.t.Fatal(err)
		}
	}
	root := filepath.Join(w.dir, "work")
	for name, v := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if v == nil {
			_ = os.Remove(p) // absent already is what we want
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			w.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(w.ns(v.(string))), 0o644); err != nil {
			w.t.Fatal(err)
		}
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		w.t.Fatal(err)
	}
	w.seq++
	msg := fmt.Sprintf("change %d", w.seq)
	if w.message != "" {
		msg, w.message = w.message, ""
	}
	parents := w.parents
	w.parents = nil
	h, err := wt.Commit(msg, &git.CommitOptions{All: true, AllowEmptyCommits: true, Parents: parents,
		Author: &object.Signature{Name: "dev", Email: "dev@example.com", When: time.Unix(1_760_000_000+int64(w.seq), 0)}})
	if err != nil {
		w.t.Fatal(err)
	}
	return h
}

// push publishes commits to refs on the git server.
func (w *world) push(refs map[string]plumbing.Hash) {
	w.t.Helper()
	if err := gittest.Push(w.local, refs, w.gh.Token(instID)); err != nil {
		w.t.Fatal(err)
	}
}

// openPR pushes base to main and head to the pull request's ref, and records
// the pull request on the fake.
func (w *world) openPR(number int, base, head plumbing.Hash, mutate func(*githubfake.Pull)) {
	w.t.Helper()
	w.push(map[string]plumbing.Hash{"refs/heads/main": base, fmt.Sprintf("refs/pull/%d/head", number): head})
	p := githubfake.Pull{Number: number, Title: "change", User: "dev", HeadSHA: head.String(), HeadRef: "feature",
		BaseSHA: base.String(), BaseRef: "main"}
	if mutate != nil {
		mutate(&p)
	}
	w.gh.SetPull(fullName, p)
}

// deliver signs and POSTs an event to driftback and returns the status.
func (w *world) deliver(event, id string, payload any) int {
	w.t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		w.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, w.url+"/webhook", strings.NewReader(string(body)))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", sign(w.secret, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func repoPayload() *github.Repository {
	return &github.Repository{Name: github.String(repoName), FullName: github.String(fullName), Owner: &github.User{Login: github.String(owner)}}
}

func prPayload(action string, number int, sha string) *github.PullRequestEvent {
	return &github.PullRequestEvent{
		Action: github.String(action), Number: github.Int(number), Repo: repoPayload(),
		PullRequest:  &github.PullRequest{Number: github.Int(number), Head: &github.PullRequestBranch{SHA: github.String(sha)}},
		Installation: &github.Installation{ID: github.Int64(instID)},
	}
}

// e2eWait bounds every wait of the end-to-end tests. It is generous: they
// run side by side on two cores under the race detector, and a condition
// that holds ends the wait at once.
const e2eWait = 3 * time.Minute

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// waitUntil is eventually with the condition last, as a wait reads best
// where the condition is a long function.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	eventually(t, cond, what)
}

// eventually polls cond until it holds and fails t after e2eWait, saying
// what it waited for and, when given, what it saw last.
func eventually(t testing.TB, cond func() bool, what string, saw ...func() string) {
	t.Helper()
	deadline := time.Now().Add(e2eWait)
	for !cond() {
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("waited %s for %s", e2eWait, what)
			for _, s := range saw {
				msg += "; " + s()
			}
			t.Fatal(msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// queueIdle says no job is queued or running: what a job publishes is all
// written.
func (w *world) queueIdle() bool {
	return w.srv.Queue.Idle()
}

// waitChecks waits until at least n check runs on sha are completed and no
// job is queued or running.
func (w *world) waitChecks(sha string, n int) []githubfake.CheckRun {
	w.t.Helper()
	var runs []githubfake.CheckRun
	eventually(w.t, func() bool {
		runs = w.gh.CheckRuns(fullName, sha)
		done := 0
		for _, r := range runs {
			if r.Status == "completed" {
				done++
			}
		}
		return done >= n && w.queueIdle()
	}, fmt.Sprintf("%d check runs on %s", n, sha), func() string {
		return fmt.Sprintf("have %+v; calls %v", runs, lastCalls(w.gh.Calls(), 10))
	})
	return runs
}

func lastCalls(c []githubfake.Call, n int) []githubfake.Call {
	return c[max(0, len(c)-n):]
}

// apply server-side applies a manifest to the cluster as Flux would.
func (w *world) apply(y string) {
	w.t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(w.ns(y)), &u.Object); err != nil {
		w.t.Fatal(err)
	}
	kubetest.Apply(w.t, w.env.Config, "kustomize-controller", u)
}

// countClusterReads counts the requests driftback's cluster clients make
// from now on (the pull-request flow's and the drift loop's), watches left
// out: once open they run on and are no reads.
func (w *world) countClusterReads() *atomic.Int64 {
	var n atomic.Int64
	w.srv.App.wrapKube = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Query().Get("watch") != "true" {
				n.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}
	return &n
}

// writesByLane counts the GitHub writes driftback made, by the lane of the
// pace they took, as a scrape of its metrics tells (the clients must be
// observed by the server's metrics).
func (w *world) writesByLane() map[string]float64 {
	w.t.Helper()
	ms, err := w.srv.Metrics.Gather()
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range ms {
		if f.GetName() == "driftback_github_writes_total" {
			for _, s := range f.GetMetric() {
				for _, l := range s.GetLabel() {
					out[l.GetValue()] += s.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

func parseTestConfig(t *testing.T, y string) *config.Config {
	t.Helper()
	cfg, err := config.ParseConfig([]byte(y), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// gauge reads a gauge of the server's metrics, as a scrape would, by its
// labels; 0 when it has no such series.
func gauge(t testing.TB, m *metrics.Metrics, name string, labels map[string]string) float64 {
	return sample(t, m, name, labels).GetGauge().GetValue()
}

// counter reads a counter of the server's metrics the same way.
func counter(t testing.TB, m *metrics.Metrics, name string, labels map[string]string) float64 {
	return sample(t, m, name, labels).GetCounter().GetValue()
}

// sample is the series of a metric with exactly the given labels; nil when
// there is none.
func sample(t testing.TB, m *metrics.Metrics, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	ms, err := m.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ms {
		if f.GetName() != name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			return s
		}
	}
	return nil
}
