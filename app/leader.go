package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderElection lets several replicas serve webhooks while one of them, the
// holder of a Lease, runs the drift loop.
type LeaderElection struct {
	// Cluster is the clusters entry that holds the Lease, usually the one
	// driftback runs in. Empty: no election, this replica runs the drift loop
	// (run one replica only).
	Cluster string `yaml:"cluster"`
	// Namespace of the Lease (default $POD_NAMESPACE, else "driftback").
	Namespace string `yaml:"namespace"`
	// Name of the Lease (default "driftback-drift").
	Name string `yaml:"name"`
	// LeaseDuration is how long a lease lasts without renewal (default 15s):
	// the longest the drift loop goes unowned after a replica dies.
	LeaseDuration time.Duration `yaml:"leaseDuration"`
	// RenewDeadline is how long the leader keeps trying to renew before it
	// stops its drift loop (default 10s).
	RenewDeadline time.Duration `yaml:"renewDeadline"`
	// RetryPeriod is how often candidates try (default 2s).
	RetryPeriod time.Duration `yaml:"retryPeriod"`
}

func (l *LeaderElection) defaults(env func(string) string) {
	if l.Namespace == "" {
		l.Namespace = env("POD_NAMESPACE")
	}
	if l.Namespace == "" {
		l.Namespace = "driftback"
	}
	if l.Name == "" {
		l.Name = "driftback-drift"
	}
	if l.LeaseDuration <= 0 {
		l.LeaseDuration = 15 * time.Second
	}
	if l.RenewDeadline <= 0 {
		l.RenewDeadline = 10 * time.Second
	}
	if l.RetryPeriod <= 0 {
		l.RetryPeriod = 2 * time.Second
	}
}

// identity names this replica in the Lease: the pod's name, else the host's,
// with a random suffix so two processes on one host differ.
func identity() string {
	name := os.Getenv("POD_NAME")
	if name == "" {
		name, _ = os.Hostname() // empty is fine: the suffix still tells replicas apart
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand does not fail on supported platforms
	return name + "-" + hex.EncodeToString(b)
}

// runElected runs fn while this replica holds the Lease, again each time it
// wins it back, until ctx ends. fn's context ends when leadership is lost;
// fn must not overlap itself (DriftLoop.Run waits for a previous run).
func runElected(ctx context.Context, cfg *rest.Config, le LeaderElection, id string, log *slog.Logger, m *Metrics, fn func(context.Context)) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	for ctx.Err() == nil {
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, Name: le.Name, ReleaseOnCancel: true,
			LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					m.setLeader(true)
					log.Info("leading: the drift loop runs here", "lease", le.Namespace+"/"+le.Name, "identity", id)
					fn(lctx)
				},
				OnStoppedLeading: func() {
					m.setLeader(false)
					log.Info("not leading", "identity", id)
				},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		elector.Run(ctx)
	}
	return ctx.Err()
}
