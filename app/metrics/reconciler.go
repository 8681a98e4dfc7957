package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// reconcilerMetrics say whether the reconcilers apply Git, and whether the
// drift loop itself still looks: either stopping is never silent.
type reconcilerMetrics struct {
	stalled    *prometheus.GaugeVec
	behind     *prometheus.GaugeVec
	lastCheck  *prometheus.GaugeVec
	prediction *prometheus.CounterVec
	synced     *prometheus.GaugeVec
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
	m.prediction = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "driftback_prediction_objects_total",
		Help: "Objects a merged pull request's comment predicted, checked once its reconciler applied it: as_predicted; unchanged (predicted to change, did not); unpredicted (changed, not predicted).",
	}, []string{"outcome"})
	m.synced = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "driftback_drift_caches_synced",
		Help: "1 when every watch the drift loop's last pass over a cluster needed was listed and synced, 0 when one was not.",
	}, []string{"cluster"})
	for _, o := range []string{"as_predicted", "unchanged", "unpredicted"} {
		m.prediction.WithLabelValues(o) // at zero from the start, for increase()
	}
	r.MustRegister(m.stalled, m.behind, m.lastCheck, m.prediction, m.synced)
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

// Prediction counts how a merge's prediction held: objects as predicted,
// predicted but unchanged, changed but not predicted.
func (m *Metrics) Prediction(asPredicted, unchanged, unpredicted int) {
	if m == nil {
		return
	}
	m.reconciler.prediction.WithLabelValues("as_predicted").Add(float64(max(asPredicted, 0)))
	m.reconciler.prediction.WithLabelValues("unchanged").Add(float64(unchanged))
	m.reconciler.prediction.WithLabelValues("unpredicted").Add(float64(unpredicted))
}

// CachesSynced records whether the drift loop's last pass over a cluster
// had every watch it needed synced.
func (m *Metrics) CachesSynced(cluster string, synced bool) {
	if m == nil {
		return
	}
	v := 0.0
	if synced {
		v = 1
	}
	m.reconciler.synced.WithLabelValues(cluster).Set(v)
}
