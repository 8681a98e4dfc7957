package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// reconcilerMetrics say whether the reconcilers apply Git, and whether the
// drift loop itself still looks: either stopping is never silent.
type reconcilerMetrics struct {
	stalled   *prometheus.GaugeVec
	behind    *prometheus.GaugeVec
	lastCheck *prometheus.GaugeVec
}

func newReconcilerMetrics(r *prometheus.Registry) reconcilerMetrics {
	m := reconcilerMetrics{
		stalled: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "driftback_reconciler_stalled",
			Help: "1 while a target's reconciler fails or has stalled (not reconciling, or not applying its source's newest revision, within its bound), else 0.",
		}, []string{"repo", "target", "cluster"}),
		behind: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "driftback_reconciler_behind_seconds",
			Help: "Seconds the newest revision of a target's source has waited to be applied; 0 once applied.",
		}, []string{"repo", "target", "cluster"}),
		lastCheck: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "driftback_drift_last_check_timestamp_seconds",
			Help: "When the drift loop last finished looking at a target (Unix seconds), compared or not.",
		}, []string{"repo", "target", "cluster"}),
	}
	r.MustRegister(m.stalled, m.behind, m.lastCheck)
	return m
}

// Reconciler records a target's reconciler at its last drift check: whether
// it blocks (fails or stalled) and how long its source's newest revision has
// waited.
func (m *Metrics) Reconciler(repo, target, cluster string, blocks bool, behind time.Duration) {
	if m == nil {
		return
	}
	v := 0.0
	if blocks {
		v = 1
	}
	m.reconciler.stalled.WithLabelValues(repo, target, cluster).Set(v)
	m.reconciler.behind.WithLabelValues(repo, target, cluster).Set(max(behind, 0).Seconds())
}

// Checked records that the drift loop looked at a target at t.
func (m *Metrics) Checked(repo, target, cluster string, t time.Time) {
	if m != nil {
		m.reconciler.lastCheck.WithLabelValues(repo, target, cluster).Set(float64(t.Unix()))
	}
}
