package app

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/driftback/driftback/app/driftloop"
	ghapp "github.com/driftback/driftback/app/github"

	"k8s.io/client-go/rest"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/prgen"
)

// secondReplica is another driftback process on the same configuration,
// GitHub and cluster, with a disk of its own.
func (d *driftWorld) secondReplica(name string) *Server {
	d.t.Helper()
	cfg := *d.cfg
	cfg.Server.CacheDir = filepath.Join(d.dir, "cache-"+name)
	srv, err := NewServer(context.Background(), &cfg, &config.Secrets{PrivateKey: d.gh.KeyPEM(), WebhookSecret: []byte(d.secret)},
		d.logs.logger(d.t, slog.LevelInfo).With("replica", name))
	if err != nil {
		d.t.Fatal(err)
	}
	srv.App.clients = ghapp.NewClients(cfg.GitHub.AppID, d.gh.KeyPEM(), cfg.GitHub.APIURL, ghapp.RetryPolicy{})
	srv.Drift.Debounce = 50 * time.Millisecond
	d.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Queue.Close(ctx)
	})
	return srv
}

// TestLeaderHandoverMidCycleOpensOnePullRequest: two replicas share the drift
// loop's cluster Leases on the real apiserver (one cluster: one holds it). The leader decides to open a drift
// pull request and loses its leadership right there; the other replica takes
// over and opens it. One pull request, however the handover falls.
func TestLeaderHandoverMidCycleOpensOnePullRequest(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 300*time.Millisecond, nil)
	a, b := d.secondReplica("a"), d.secondReplica("b")
	le := config.LeaderElection{Namespace: d.env.Namespace, Name: "driftback-drift",
		// Replica a releases the Lease when stopped, so b takes it at its next
		// try: generous renewal times cost the test nothing and cannot flake.
		LeaseDuration: 10 * time.Second, RenewDeadline: 8 * time.Second, RetryPeriod: 100 * time.Millisecond}

	atOpen := make(chan struct{})
	var stopped atomic.Bool
	a.Drift.BeforeAct = func(ctx context.Context, action prgen.Action) {
		if action == prgen.ActionOpen && !stopped.Load() {
			close(atOpen)
			<-ctx.Done() // leadership ends here, mid-cycle
		}
	}
	var leaderA, leaderB atomic.Bool
	actx, stopA := context.WithCancel(context.Background())
	doneA := make(chan struct{})
	go func() {
		defer close(doneA)
		_ = runShards(actx, d.env.Config, le, "replica-a", []string{"test"}, func(ctx context.Context, c string) {
			leaderA.Store(true)
			_ = a.Drift.RunCluster(ctx, c)
		})
	}()
	d.waitFor("replica a to lead", leaderA.Load)
	bctx, stopB := context.WithCancel(context.Background())
	doneB := make(chan struct{})
	// b's looks at the Leases are counted, to know it has tried.
	var triesB atomic.Int64
	cfgB := rest.CopyConfig(d.env.Config)
	cfgB.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasSuffix(r.URL.Path, "/leases") {
				triesB.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	go func() {
		defer close(doneB)
		_ = runShards(bctx, cfgB, le, "replica-b", []string{"test"}, func(ctx context.Context, c string) {
			leaderB.Store(true)
			_ = b.Drift.RunCluster(ctx, c)
		})
	}()
	t.Cleanup(func() {
		stopA()
		stopB()
		<-doneA
		<-doneB
	})
	d.waitFor("replica b to look at the Leases", func() bool { return triesB.Load() >= 3 })
	if leaderB.Load() {
		t.Fatal("both replicas lead")
	}

	d.scale(6, "kubectl")
	select {
	case <-atOpen:
	case <-time.After(60 * time.Second):
		t.Fatal("replica a never decided to open the pull request")
	}
	stopped.Store(true)
	stopA() // replica a stops: its lease is released mid-cycle
	d.waitFor("replica b to lead", leaderB.Load)
	d.waitFor("the drift pull request", func() bool { return len(d.openPulls()) == 1 })
	start := b.Drift.Checks()
	d.waitFor("replica b to check again", func() bool { return b.Drift.Checks() >= start+3 })
	if n := len(d.gh.Pulls(fullName)); n != 1 {
		t.Fatalf("%d pull requests after the handover, want 1: %+v", n, d.gh.Pulls(fullName))
	}
}

// TestSplitBrainOpensOnePullRequest: even two replicas that both believe they
// lead (no election at all) open one pull request: the one that decides
// second finds GitHub refusing a second open pull request from the branch,
// and takes it as done.
func TestSplitBrainOpensOnePullRequest(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 300*time.Millisecond, nil)
	a, b := d.secondReplica("a"), d.secondReplica("b")
	release := make(chan struct{})
	var once atomic.Bool
	a.Drift.BeforeAct = func(ctx context.Context, action prgen.Action) {
		if action == prgen.ActionOpen && once.CompareAndSwap(false, true) {
			select { // hold a back until b has opened the pull request
			case <-release:
			case <-ctx.Done():
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	doneA, doneB := make(chan struct{}), make(chan struct{})
	go func() { defer close(doneA); _ = a.Drift.Run(ctx) }()
	d.scale(7, "kubectl")
	d.waitFor("replica a to decide", once.Load)
	go func() { defer close(doneB); _ = b.Drift.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-doneA
		<-doneB
	})
	d.waitFor("replica b's pull request", func() bool { return len(d.openPulls()) == 1 })
	close(release)
	start := a.Drift.Checks()
	d.waitFor("replica a to finish its check", func() bool { return a.Drift.Checks() > start })
	if n := len(d.gh.Pulls(fullName)); n != 1 {
		t.Fatalf("%d pull requests from two replicas, want 1: %+v", n, d.gh.Pulls(fullName))
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// runShards runs one replica's share of the clusters' drift loops.
func runShards(ctx context.Context, cfg *rest.Config, le config.LeaderElection, id string, clusters []string, run func(context.Context, string)) error {
	sh, err := driftloop.NewShards(cfg, le, id, clusters, discard, nil, run)
	if err != nil {
		return err
	}
	return sh.Run(ctx)
}

// TestAReplicasIdentityGivesItsAddress: the identity a replica campaigns
// with carries its audit endpoint's address (POD_IP and the port), where
// the others carry their share of the audit events; what is not an
// address gives none.
func TestAReplicasIdentityGivesItsAddress(t *testing.T) {
	t.Setenv("POD_NAME", "driftback-7d9f8-xk2p")
	for podIP, want := range map[string]string{"10.244.1.7": "10.244.1.7:8444", "fd00::1:7": "[fd00::1:7]:8444", "": "", "10.0.0.1:80": "", "evil.example.com": ""} {
		t.Setenv("POD_IP", podIP)
		id := identity("8444")
		if !strings.HasPrefix(id, "driftback-7d9f8-xk2p-") || replicaAddr(id) != want {
			t.Errorf("POD_IP %q: identity %q gives %q, want %q", podIP, id, replicaAddr(id), want)
		}
	}
	if id := identity(""); replicaAddr(id) != "" {
		t.Errorf("without an audit endpoint, identity %q gives an address", id)
	}
	for _, forged := range []string{"r1@not-an-address:80", "r1@10.0.0.1", "r1@10.0.0.1:0", "r1@10.0.0.1:http", "r1@evil.example.com:443"} {
		if got := replicaAddr(forged); got != "" {
			t.Errorf("%q gives %q", forged, got)
		}
	}
}
