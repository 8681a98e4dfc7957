// Package app wires driftback's GitHub App: the HTTP server (webhook intake,
// /healthz, /readyz, /metrics), the queue, the routes from events to jobs, the
// pull-request handler that reads a pull request, has app/review compare it
// and publishes the result, and the drift loop's wiring. What each step does
// lives in the packages under app/.
package app

import (
	"context"
	"fmt"
	"github.com/driftback/driftback/app/aftermerge"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/driftback/driftback/app/driftloop"
	ghapp "github.com/driftback/driftback/app/github"
	"github.com/driftback/driftback/app/metrics"
	"github.com/driftback/driftback/app/queue"
	"github.com/driftback/driftback/app/review"
	"github.com/driftback/driftback/reconcile"
	"github.com/driftback/driftback/reconcile/charts"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftback/driftback/app/auditlog"
	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/repos"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/render"
)

// App holds what the pull-request flow needs across jobs.
type App struct {
	cfg *config.Config
	// audit reads a cluster's audit events; nil: none.
	audit    *auditlog.Receiver
	clients  *ghapp.Clients
	cache    *repos.Cache
	renderer *render.Renderer
	// charts fetches Helm charts from the repositories app.yml and the
	// default branches trust.
	charts *reconcile.Charts
	log    *slog.Logger
	now    func() time.Time

	mu       sync.Mutex
	clusters map[string]*review.Cluster
	// kubeClients are controller-runtime clients by cluster, for libraries
	// that take one (Flux's variable loading).
	kubeClients map[string]client.Client
	// targets are app.yml's and the discovered ones.
	targets *targets.Source
	// drift is woken when a default branch moves.
	drift *driftloop.DriftLoop
	// follow follows merged pull requests, under followCtx (the server's).
	follow    *aftermerge.Follower
	followCtx context.Context
	// metrics, when set, records render times and drift outcomes.
	metrics *metrics.Metrics
	// publishing serializes publishing per pull request: a find-or-create
	// that interleaved with another could create twice.
	publishing map[string]*sync.Mutex
	// PublishTimeout bounds the work of publishing; 0 means
	// DefaultPublishTimeout. Waits GitHub asks for are added to it.
	PublishTimeout time.Duration
	// MergeWaits are the pauses before asking GitHub again whether a pull
	// request merges while it does not know yet; nil: 1, 2 and 4 s.
	MergeWaits []time.Duration
	// wrapKube, when set, wraps the transport of every cluster client of the
	// pull-request flow; tests count the requests with it.
	wrapKube func(http.RoundTripper) http.RoundTripper
	// compared, when set, is given each pull request's report and checks
	// before they are published; tests read what was decided from it.
	compared func(pr int, rep *drift.Report, checks []review.CheckResult)
}

// publishLock returns the lock of one pull request's comment and checks.
func (a *App) publishLock(key string) *sync.Mutex {
	a.mu.Lock()
	defer a.mu.Unlock()
	l, ok := a.publishing[key]
	if !ok {
		l = &sync.Mutex{}
		a.publishing[key] = l
	}
	return l
}

// NewApp wires the pull-request flow.
func NewApp(cfg *config.Config, clients *ghapp.Clients, cache *repos.Cache, log *slog.Logger) *App {
	renderer := render.New(render.DefaultOptions())
	return &App{
		cfg: cfg, clients: clients, cache: cache, log: log, now: time.Now,
		renderer:   renderer,
		clusters:   map[string]*review.Cluster{},
		publishing: map[string]*sync.Mutex{},
		targets:    targets.NewSource(cfg, log),
		charts: &reconcile.Charts{
			// Indexes are parsed in render children, as charts are
			// rendered: what a repository writes never fills this
			// process's memory.
			Fetcher: charts.New(charts.Options{PrivateHosts: cfg.Helm.PrivateHosts, MaxBytes: cfg.Helm.MaxBytes,
				Timeout: cfg.Helm.FetchTimeout, CacheBytes: cfg.Helm.CacheBytes, Index: renderer.ChartIndex}),
			Listed: charts.NewTrust(cfg.Helm.Repositories),
		},
	}
}

// prRequest is the work on one pull request at one head SHA.
type prRequest struct {
	installation int64
	owner, repo  string
	number       int
	sha          string
	// forceLive shows live data on a fork's pull request: a writer asked.
	forceLive bool
}

func (r prRequest) key() string { return fmt.Sprintf("%s/%s#%d", r.owner, r.repo, r.number) }

// targetsOf returns a repository's targets, from app.yml and discovery
// (glob paths not yet expanded), and the discovered sources of the
// repository that cannot be rendered.
func (a *App) targetsOf(fullName string) ([]targets.Target, []*discover.Found) {
	return a.targets.Of(fullName)
}

func (a *App) publishTimeout() time.Duration {
	if a.PublishTimeout > 0 {
		return a.PublishTimeout
	}
	return ghapp.DefaultPublishTimeout
}

// followDeps are what following merges works with.
func (a *App) followDeps(ctx context.Context) aftermerge.Deps {
	return aftermerge.Deps{
		GitHub: a.clients.Installation, Object: a.targets.Object, Now: a.now, Log: a.log.With("loop", "after-merge"),
		Health:  func(f *discover.Found) discover.Health { return a.targets.Health(f, a.now()) },
		Holds:   aftermerge.HoldsIn(ctx, a.clients.Installation, a.cache),
		Dynamic: aftermerge.DynamicOf(a.cfg), Live: aftermerge.WatchedBy(a.drift), Measured: a.metrics.Prediction,
	}
}

// followMerge is the work of a merged pull request: following it on the
// targets it affected.
func (a *App) followMerge(ev *ghapp.PullRequestEvent) *queue.Job {
	m := aftermerge.Merge{Installation: ev.Installation, Owner: ev.Repo.Owner, Repo: ev.Repo.Name, Number: ev.Number, SHA: ev.MergeSHA, Head: ev.HeadSHA, At: ev.MergedAt}
	scope := aftermerge.Scope{Cache: a.cache,
		Targets: func(repo string) []targets.Target { t, _ := a.targetsOf(repo); return t },
		Leads:   func(cluster string) bool { return a.drift != nil && a.drift.Watcher(cluster) != nil }}
	return &queue.Job{Key: fmt.Sprintf("%s/%s#%d merged", m.Owner, m.Repo, m.Number), SHA: m.SHA, Log: a.log, Run: func(ctx context.Context) error {
		return a.follow.Merged(a.followCtx, ctx, scope, m, ev.BaseSHA, ev.BaseRef)
	}}
}

// driftDeps are what the drift loop works with.
func (a *App) driftDeps() driftloop.Deps {
	return driftloop.Deps{
		Config: a.cfg, Targets: a.targets, GitHub: a.clients, Cache: a.cache, Now: a.now,
		Kube: a.kubeClient, Capabilities: a.capabilities, Charts: a.charts, PublishTimeout: a.publishTimeout, Metrics: a.metrics, Audit: a.audit,
	}
}
