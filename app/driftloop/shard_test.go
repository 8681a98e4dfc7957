package driftloop

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/internal/kubetest"
)

// holdings records which replica runs which cluster's loop, and any moment
// two ran the same cluster.
type holdings struct {
	mu       sync.Mutex
	by       map[string]string // cluster → replica
	overlaps []string
}

func (h *holdings) run(replica string) func(context.Context, string) {
	return func(ctx context.Context, c string) {
		h.mu.Lock()
		if other, ok := h.by[c]; ok {
			h.overlaps = append(h.overlaps, fmt.Sprintf("%s ran by %s and %s at %s", c, other, replica, time.Now().Format(time.StampMilli)))
		}
		h.by[c] = replica
		h.mu.Unlock()
		<-ctx.Done()
		h.mu.Lock()
		if h.by[c] == replica {
			delete(h.by, c)
		}
		h.mu.Unlock()
	}
}

// counts says how many clusters each replica runs, and how many run at all.
func (h *holdings) counts() (map[string]int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for _, r := range h.by {
		out[r]++
	}
	return out, len(h.by)
}

func (h *holdings) heldBy(replica string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for c, r := range h.by {
		if r == replica {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// TestShardsShareClustersByLease: on the real apiserver, three replicas share
// six clusters, two each, every cluster run by exactly one; a replica killed
// without releasing its Leases loses its clusters to the others within the
// Lease duration (plus a look); a new replica takes its share back; no
// cluster is ever run by two replicas at once.
func TestShardsShareClustersByLease(t *testing.T) {
	t.Parallel()
	env := kubetest.New(t)
	le := config.LeaderElection{Namespace: env.Namespace, Name: "driftback-drift",
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 200 * time.Millisecond}
	clusters := []string{"eu-1", "eu-2", "us-1", "us-2", "ap-1", "Prod_Cluster.with.dots"}
	h := &holdings{by: map[string]string{}}
	type replica struct {
		stop   context.CancelFunc
		done   chan struct{}
		shards *Shards
	}
	start := func(id string, crash bool) replica {
		ctx, cancel := context.WithCancel(context.Background())
		sh, err := NewShards(env.Config, le, id, clusters, discard, nil, h.run(id))
		if err != nil {
			t.Fatal(err)
		}
		sh.crash = crash
		r := replica{stop: cancel, done: make(chan struct{}), shards: sh}
		go func() {
			defer close(r.done)
			if err := sh.Run(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("%s: %v", id, err)
			}
		}()
		return r
	}
	replicas := map[string]replica{"r0": start("r0", true), "r1": start("r1", false), "r2": start("r2", false)}
	t.Cleanup(func() {
		for _, r := range replicas {
			r.stop()
			<-r.done
		}
	})
	waitShares := func(what string, want map[string]int, within time.Duration) time.Duration {
		t.Helper()
		began := time.Now()
		for {
			got, total := h.counts()
			ok := total == len(clusters) && len(got) == len(want)
			for r, n := range want {
				ok = ok && got[r] == n
			}
			if ok {
				return time.Since(began)
			}
			if time.Since(began) > within {
				t.Fatalf("%s: clusters per replica %v (%d of %d run), want %v", what, got, total, len(clusters), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitShares("three replicas", map[string]int{"r0": 2, "r1": 2, "r2": 2}, 60*time.Second)
	// Every replica knows who runs each cluster (where its audit events
	// go), from its next look at the Leases.
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range clusters {
		for name, r := range replicas {
			for {
				h.mu.Lock()
				want := h.by[c]
				h.mu.Unlock()
				id, here := r.shards.Holder(c)
				if id == want && here == (want == name) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s says %s is held by %q (here %v), want %q", name, c, id, here, want)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}

	lost := h.heldBy("r0")
	killed := replicas["r0"]
	delete(replicas, "r0")
	killed.stop() // a crash: its Leases are left to expire
	<-killed.done
	moved := waitShares("after r0 died", map[string]int{"r1": 3, "r2": 3}, 60*time.Second)
	t.Logf("r0's clusters %v moved in %s", lost, moved.Round(time.Millisecond))
	if limit := le.LeaseDuration + 5*le.RetryPeriod + 2*time.Second; moved > limit {
		t.Errorf("r0's clusters %v moved in %s, want within the Lease duration and a look (%s)", lost, moved.Round(time.Millisecond), limit)
	}

	replicas["r3"] = start("r3", false)
	waitShares("a replica joined", map[string]int{"r1": 2, "r2": 2, "r3": 2}, 60*time.Second)

	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.overlaps) > 0 {
		t.Errorf("clusters run by two replicas at once:\n%s", strings.Join(h.overlaps, "\n"))
	}
}

func TestLeaseSuffix(t *testing.T) {
	for in, want := range map[string]string{
		"eu-1":                   "eu-1",
		"prod":                   "prod",
		"Prod_Cluster.with.dots": "prod-cluster-with-dots-",
	} {
		got := leaseSuffix(in)
		if !strings.HasPrefix(got, want) || strings.Trim(got, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" || len(got) > 63 {
			t.Errorf("leaseSuffix(%q) = %q", in, got)
		}
		if in == want && got != want {
			t.Errorf("leaseSuffix(%q) = %q, want it unchanged", in, got)
		}
	}
	if leaseSuffix("a.b") == leaseSuffix("a-b") {
		t.Error("two cluster names share a Lease")
	}
}

var discard = slog.New(slog.DiscardHandler)
