// Package metrics is what driftback exposes on /metrics for Prometheus: webhook
// deliveries, jobs, renders, GitHub calls and its rate limit, failures, and
// the drift loop's outcomes and held clusters. Every method is safe on nil.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are driftback's Prometheus metrics, on a registry of their own (so
// two servers in one process do not collide). A nil *Metrics records nothing.
type Metrics struct {
	registry *prometheus.Registry

	deliveries    *prometheus.CounterVec
	jobs          *prometheus.HistogramVec
	renders       prometheus.Histogram
	githubCalls   *prometheus.CounterVec
	githubWrites  *prometheus.CounterVec
	rateRemaining prometheus.Gauge
	errors        *prometheus.CounterVec
	drifted       *prometheus.GaugeVec
	fights        *prometheus.GaugeVec
	driftActions  *prometheus.CounterVec
	leader        prometheus.Gauge
	held          *prometheus.GaugeVec
	heldMu        sync.Mutex
	heldSet       map[string]bool
	reconciler    reconcilerMetrics
	audit         *prometheus.CounterVec
}

// New registers driftback's metrics, the Go runtime's and the
// process's; queueDepth is read at each scrape.
func New(queueDepth func() float64) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "driftback_webhook_deliveries_total",
			Help: "Webhook deliveries by event and outcome (accepted, ignored, duplicate, bad_signature, too_large, bad_request, queue_full).",
		}, []string{"event", "outcome"}),
		jobs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "driftback_job_duration_seconds",
			Help:    "Time to process one pull request (or default-branch refresh), by outcome (done, failed, cancelled, deferred: waiting out GitHub's rate limit).",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"outcome"}),
		renders: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "driftback_render_duration_seconds",
			Help:    "Time to render the overlays of one request (cache hits included).",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}),
		githubCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "driftback_github_requests_total",
			Help: "GitHub API requests by kind (comment, check-run, pull, issue, label, ref, other), method and status code (\"error\" when no response came).",
		}, []string{"kind", "method", "code"}),
		githubWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "driftback_github_writes_total",
			Help: "GitHub API writes by the lane of the installation's pace they took: urgent (a same-repository pull request's comment and required check) or normal (everything else, a fork's pull request included).",
		}, []string{"lane"}),
		rateRemaining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "driftback_github_rate_limit_remaining",
			Help: "The primary rate limit's remaining requests, from the last GitHub response that said.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "driftback_errors_total",
			Help: "Failures by where they happened (job, drift_check).",
		}, []string{"where"}),
		drifted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "driftback_drifted_objects",
			Help: "Objects of a target changed live outside Git at the last drift check (waiting out the quiet period included).",
		}, []string{"repo", "target"}),
		fights: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "driftback_drift_fights",
			Help: "Fields of a target two writers keep changing back and forth (a fight, not drift), at the last drift check.",
		}, []string{"repo", "target"}),
		driftActions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "driftback_drift_actions_total",
			Help: "Drift pull requests and issues opened, updated, commented on and closed.",
		}, []string{"kind", "action"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "driftback_drift_leader",
			Help: "1 while this replica runs the drift loop of at least one cluster.",
		}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "driftback_drift_cluster_held",
			Help: "1 for each cluster whose drift loop runs in this replica (it holds the cluster's Lease).",
		}, []string{"cluster"}),
	}
	m.reconciler = newReconcilerMetrics(m.registry)
	m.audit = newAuditMetrics(m.registry)
	m.registry.MustRegister(m.deliveries, m.jobs, m.renders, m.githubCalls, m.githubWrites, m.rateRemaining, m.errors, m.drifted, m.fights, m.driftActions, m.leader, m.held,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "driftback_queue_depth", Help: "Pull requests waiting or in progress."}, queueDepth),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// knownEvents bounds the event label: the header of a rejected delivery is
// not trusted, and nothing should grow the label set without bound.
var knownEvents = map[string]bool{
	"pull_request": true, "issue_comment": true, "issues": true, "check_run": true, "push": true,
	"installation": true, "installation_repositories": true, "ping": true,
}

// Delivery counts a webhook delivery by its event and the status answered.
func (m *Metrics) Delivery(event string, status int) {
	if m == nil {
		return
	}
	outcome := map[int]string{
		http.StatusAccepted: "accepted", http.StatusNoContent: "ignored", http.StatusUnauthorized: "bad_signature",
		http.StatusRequestEntityTooLarge: "too_large", http.StatusServiceUnavailable: "queue_full",
	}[status]
	if outcome == "" {
		outcome = "bad_request"
	}
	if status == http.StatusUnauthorized || !knownEvents[event] {
		event = "other"
	}
	m.deliveries.WithLabelValues(event, outcome).Inc()
}

// Job records how long a job took, by its outcome.
func (m *Metrics) Job(outcome string, d time.Duration) {
	if m != nil {
		m.jobs.WithLabelValues(outcome).Observe(d.Seconds())
	}
}

// Render records how long a render took.
func (m *Metrics) Render(d time.Duration) {
	if m != nil {
		m.renders.Observe(d.Seconds())
	}
}

// GitHubCall counts a GitHub API call, and a write by the lane of the
// installation's pace it took, and keeps the rate limit GitHub reports.
func (m *Metrics) GitHubCall(kind, method, lane string, resp *http.Response) {
	if m == nil {
		return
	}
	code := "error"
	if resp != nil {
		code = strconv.Itoa(resp.StatusCode)
		if v := resp.Header.Get("X-RateLimit-Remaining"); v != "" {
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				m.rateRemaining.Set(n)
			}
		}
	}
	m.githubCalls.WithLabelValues(kind, method, code).Inc()
	if lane != "" {
		m.githubWrites.WithLabelValues(lane).Inc()
	}
}

// Failure counts a failure by where it happened.
func (m *Metrics) Failure(where string) {
	if m != nil {
		m.errors.WithLabelValues(where).Inc()
	}
}

// DriftFights sets a target's fields in a fight at its last drift check.
func (m *Metrics) DriftFights(repo, target string, n int) {
	if m != nil {
		m.fights.WithLabelValues(repo, target).Set(float64(n))
	}
}

// DriftedObjects sets a target's objects changed live at its last drift check.
func (m *Metrics) DriftedObjects(repo, target string, n int) {
	if m != nil {
		m.drifted.WithLabelValues(repo, target).Set(float64(n))
	}
}

// DriftAction counts a drift pull request or issue opened, updated or closed.
func (m *Metrics) DriftAction(kind, action string) {
	if m != nil {
		m.driftActions.WithLabelValues(kind, action).Inc()
	}
}

// setHeld records whether this replica runs a cluster's drift loop.
func (m *Metrics) SetHeld(cluster string, on bool) {
	if m == nil {
		return
	}
	m.heldMu.Lock()
	defer m.heldMu.Unlock()
	if m.heldSet == nil {
		m.heldSet = map[string]bool{}
	}
	if on {
		m.heldSet[cluster] = true
		m.held.WithLabelValues(cluster).Set(1)
	} else {
		delete(m.heldSet, cluster)
		m.held.WithLabelValues(cluster).Set(0)
	}
	if len(m.heldSet) > 0 {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

// statusRecorder keeps the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(s int) {
	r.status = s
	r.ResponseWriter.WriteHeader(s)
}

// CountDeliveries wraps the webhook handler with the deliveries counter.
func (m *Metrics) CountDeliveries(next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		m.Delivery(r.Header.Get("X-GitHub-Event"), rec.status)
	})
}

// Gather returns the metrics as a scrape of /metrics reads them.
func (m *Metrics) Gather() ([]*dto.MetricFamily, error) { return m.registry.Gather() }
