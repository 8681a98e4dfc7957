package metrics

import "github.com/prometheus/client_golang/prometheus"

// newAuditMetrics counts the audit events driftback reads.
func newAuditMetrics(r *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "driftback_audit_events_total",
		Help: "Audit events read: received (every event of an accepted batch or line), kept (a write to a watched object), dropped (kept but for the index's bound), matched (an event a drifted field was first attributed to); refused counts requests refused (unauthenticated, too large, too many, busy, malformed) and bad lines; forwarded counts batches carried to the replica running the cluster's drift loop.",
	}, []string{"outcome"})
	for _, o := range []string{"received", "kept", "dropped", "matched", "refused", "forwarded"} {
		c.WithLabelValues(o) // at zero from the start, for increase()
	}
	r.MustRegister(c)
	return c
}

// Audit counts n audit events of an outcome: received, kept, dropped,
// matched, refused, forwarded.
func (m *Metrics) Audit(outcome string, n int) {
	if m != nil && n > 0 {
		m.audit.WithLabelValues(outcome).Add(float64(n))
	}
}
