package config

import "time"

// LeaderElection lets several replicas serve webhooks and share the drift
// loop: each cluster's loop runs in the one replica that holds the cluster's
// Lease.
type LeaderElection struct {
	// Cluster is the clusters entry that holds the Lease, usually the one
	// driftback runs in. Empty: no election, this replica runs the drift loop
	// (run one replica only).
	Cluster string `yaml:"cluster"`
	// Namespace of the Lease (default $POD_NAMESPACE, else "driftback").
	Namespace string `yaml:"namespace"`
	// Name prefixes the Leases (default "driftback-drift"): NAME-CLUSTER for
	// each cluster, NAME-member-REPLICA for each replica.
	Name string `yaml:"name"`
	// LeaseDuration is how long a lease lasts without renewal (default 15s):
	// the longest a cluster's drift loop goes unowned after a replica dies.
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
