package metrics

import "github.com/prometheus/client_golang/prometheus"

// newAuditMetrics counts the audit events driftback reads.
func newAuditMetrics(r *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "driftback_audit_events_total",
		Help: "Audit events read: received (every event of an accepted batch or line), kept (a write to a watched object), dropped (kept but for the index's bound), matched (a drifted field attributed to one); refused counts requests refused (unauthenticated, too large, too many, malformed).",
	}, []string{"outcome"})
	for _, o := range []string{"received", "kept", "dropped", "matched", "refused"} {
		c.WithLabelValues(o) // at zero from the start, for increase()
	}
	r.MustRegister(c)
	return c
}

// Audit counts n audit events of an outcome: received, kept, dropped,
// matched, refused.
func (m *Metrics) Audit(outcome string, n int) {
	if m != nil && n > 0 {
		m.audit.WithLabelValues(outcome).Add(float64(n))
	}
}
