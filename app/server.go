package app

import (
	"context"
	"errors"
	"fmt"
	"github.com/driftback/driftback/app/aftermerge"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/driftback/driftback/app/auditlog"
	"github.com/driftback/driftback/app/driftloop"
	ghapp "github.com/driftback/driftback/app/github"
	"github.com/driftback/driftback/app/metrics"
	"github.com/driftback/driftback/app/queue"

	"golang.org/x/time/rate"
	"k8s.io/client-go/rest"

	"github.com/golang-jwt/jwt/v4"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/repos"
)

// Server is driftback serving webhooks.
type Server struct {
	App     *App
	Queue   *queue.Queue
	Webhook *Webhook
	// Metrics are served on /metrics.
	Metrics *metrics.Metrics
	// Drift is the drift loop; Serve runs it.
	Drift *driftloop.DriftLoop
	// Audit reads a cluster's audit events (app.yml's audit); nil: none.
	Audit   *auditlog.Receiver
	handler http.Handler
	ready   atomic.Bool
	log     *slog.Logger
	// shards are the clusters' Leases this replica campaigns for; nil runs
	// every cluster's drift loop here (no leader election).
	shards atomic.Pointer[driftloop.Shards]
}

// runSharded runs the drift loop of each cluster whose Lease this replica
// holds, until ctx ends.
func (s *Server) runSharded(ctx context.Context, cfg *rest.Config, le config.LeaderElection, id string) error {
	sh, err := driftloop.NewShards(cfg, le, id, s.Drift.Clusters(), s.log, s.Metrics, func(ctx context.Context, c string) { _ = s.Drift.RunCluster(ctx, c) })
	if err != nil {
		return err
	}
	s.shards.Store(sh)
	return sh.Run(ctx)
}

// heldClusters are the clusters whose drift loop runs in this replica.
func (s *Server) heldClusters() []string {
	if sh := s.shards.Load(); sh != nil {
		return sh.Held()
	}
	if s.App.cfg.Server.LeaderElection.Cluster == "" {
		return s.Drift.Clusters()
	}
	return nil
}

// NewServer builds the server from a configuration and its secrets. Work runs
// on ctx, not on any request's context.
func NewServer(ctx context.Context, cfg *config.Config, secrets *config.Secrets, log *slog.Logger) (*Server, error) {
	if _, err := jwt.ParseRSAPrivateKeyFromPEM(secrets.PrivateKey); err != nil {
		return nil, fmt.Errorf("github private key: %w (download the App's .pem from its settings page)", err)
	}
	dir := cfg.Server.CacheDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "driftback-cache-"); err != nil {
			return nil, err
		}
	}
	cache, err := repos.New(dir, cfg.Server.CacheMaxBytes)
	if err != nil {
		return nil, err
	}
	cache.FetchTimeout = cfg.Server.FetchTimeout
	clients := ghapp.NewClients(cfg.GitHub.AppID, secrets.PrivateKey, cfg.GitHub.APIURL, ghapp.RetryPolicy{PerMinute: cfg.GitHub.Pace.PerMinute, PerHour: cfg.GitHub.Pace.PerHour})
	var q *queue.Queue
	m := metrics.New(func() float64 { return float64(q.Depth()) })
	clients.Observe(m.GitHubCall)
	a := NewApp(cfg, clients, cache, log)
	if cfg.Audit.Enabled() {
		a.audit = auditlog.New(cfg.Audit, secrets.AuditToken, m.Audit, log.With("audit", cfg.Audit.Cluster))
	}
	// The queue outlives the signal that stops intake: Serve closes it with a
	// grace period.
	q = queue.New(context.WithoutCancel(ctx), cfg.Server.Workers, cfg.Server.QueueSize, cfg.Server.JobTimeout, log, m)
	a.metrics = m
	s := &Server{App: a, Queue: q, Webhook: NewWebhook(secrets.WebhookSecret, q, a, log), Drift: driftloop.New(a.driftDeps(), log.With("loop", "drift")), Metrics: m, Audit: a.audit, log: log}
	s.Webhook.MaxUnverified, s.Webhook.ReadTimeout = cfg.Server.MaxUnverifiedBytes, cfg.Server.ReadTimeout
	a.drift = s.Drift
	a.follow, a.followCtx = aftermerge.New(a.followDeps(ctx)), ctx
	mux := http.NewServeMux()
	mux.Handle("/webhook", m.CountDeliveries(s.Webhook))
	mux.Handle("/metrics", m.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
		fmt.Fprintln(w, "drift loop clusters held here:", strings.Join(s.heldClusters(), ", "))
		for _, line := range s.App.targets.Status() {
			fmt.Fprintln(w, line)
		}
	})
	s.handler = mux
	s.ready.Store(true)
	return s, nil
}

// sometimes passes on one write a minute (the log of refused TLS clients,
// which anyone reaching the port can make).
type sometimes struct {
	w    io.Writer
	once rate.Sometimes
}

func (s *sometimes) Write(p []byte) (int, error) {
	s.once.Do(func() { _, _ = s.w.Write(p) })
	return len(p), nil
}

// Handler serves /webhook, /healthz, /readyz and /metrics.
func (s *Server) Handler() http.Handler { return s.handler }

// Run is `driftback serve`: it loads the configuration at path, with its
// DRIFTBACK_… overrides and secrets from env, and serves on the configured
// address until ctx ends (SIGTERM), then stops taking deliveries and gives
// running work up to grace to finish. Configuration errors come back before
// anything listens.
func Run(ctx context.Context, path string, env func(string) string, grace time.Duration, log *slog.Logger) error {
	cfg, err := config.LoadConfig(path, env)
	if err != nil {
		return err
	}
	secrets, err := cfg.LoadSecrets(env)
	if err != nil {
		return err
	}
	for _, w := range cfg.UnknownEnv(os.Environ()) {
		log.Warn("an environment variable is not read", "problem", w)
	}
	log.Info("effective configuration", "config", cfg.Redacted(secrets))
	srv, err := NewServer(ctx, cfg, secrets, log)
	if err != nil {
		return err
	}
	return srv.Serve(ctx, cfg.Server.Listen, grace)
}

// Serve listens on addr until ctx ends, then stops taking deliveries and gives
// running work up to grace to finish.
func (s *Server) Serve(ctx context.Context, addr string, grace time.Duration) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: s.App.cfg.Server.ReadTimeout}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("serving", "addr", ln.Addr().String())
	le := s.App.cfg.Server.LeaderElection
	auditPort := "" // where this replica's audit endpoint listens, when it does
	if a := s.Audit; a != nil && s.App.cfg.Audit.Listen != "" {
		aln, err := a.Listen()
		if err != nil {
			return err
		}
		if le.Cluster != "" && slices.Contains(s.Drift.Clusters(), a.Cluster) {
			// Replicas share the drift loops: a batch goes to the one
			// running this cluster's.
			_, auditPort, _ = net.SplitHostPort(aln.Addr().String())
			a.Route = s.auditRoute
			if net.ParseIP(os.Getenv("POD_IP")) == nil {
				s.log.Warn("POD_IP is not set: the other replicas cannot carry their share of the audit events here (set it from status.podIP, as deploy/ does)")
			}
		}
		// Bounded in header bytes (and connections: Listen); a client
		// refused in the TLS handshake (no certificate, another CA's) is
		// said in driftback's log, at most once a minute, not on stderr.
		asrv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute,
			MaxHeaderBytes: 16 << 10, ErrorLog: log.New(&sometimes{w: slog.NewLogLogger(s.log.With("audit", a.Cluster).Handler(), slog.LevelWarn).Writer(), once: rate.Sometimes{Interval: time.Minute}}, "", 0)}
		defer asrv.Close()
		go func() { errc <- asrv.Serve(aln) }()
		s.log.Info("serving audit events", "addr", aln.Addr().String())
	} else if a != nil {
		go func() {
			if err := a.Follow(ctx, time.Second); err != nil {
				s.log.Error("the audit log file is not read", "err", err)
			}
		}()
	}
	s.App.targets.SetOnChange(s.Drift.WakeAll)
	go s.App.targets.Run(ctx)
	driftDone := make(chan struct{})
	go func() {
		defer close(driftDone)
		if le.Cluster == "" {
			_ = s.Drift.Run(ctx) // ends with ctx
			return
		}
		cfg, err := s.App.cfg.Clusters[le.Cluster].RESTConfig()
		if err == nil {
			err = s.runSharded(ctx, cfg, le, identity(auditPort))
		}
		if err != nil && ctx.Err() == nil {
			s.log.Error("leader election stopped: this replica will not run the drift loop", "err", err)
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.ready.Store(false)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	s.Queue.Close(sctx)
	followed := make(chan struct{})
	go func() { s.App.follow.Wait(); close(followed) }() // each follow says it stopped
	for _, done := range []chan struct{}{driftDone, followed} {
		select {
		case <-done:
		case <-sctx.Done():
		}
	}
	s.log.Info("stopped")
	return nil
}
