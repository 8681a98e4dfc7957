package discover

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
)

// HealthState is what a target's reconciler is doing, by its own status.
type HealthState string

// Health states. Only Failing and Stalled stop a target's drift from being
// proposed: then the cluster differs from Git because Git is not applied.
const (
	// HealthUnknown: nothing written yet, or not read.
	HealthUnknown HealthState = ""
	// HealthApplying: it applies its source, or is at it within the bound.
	HealthApplying HealthState = "applying"
	// HealthFailing: it says it fails (Ready False, a sync failed, its
	// source cannot be fetched).
	HealthFailing HealthState = "failing"
	// HealthStalled: it is silent. It has not reconciled, or not applied
	// its source's newest revision, within the bound, or its controller
	// has no ready pod.
	HealthStalled HealthState = "stalled"
)

// Health is a reconciler object's state, as of one moment.
type Health struct {
	State HealthState `json:"state,omitempty"`
	// Why is the reconciler's own words ("BuildFailed: …") or what was
	// seen ("has not reconciled it since …"); empty when it applies.
	Why string `json:"why,omitempty"`
	// Since is when the state began, when the status says.
	Since time.Time `json:"since,omitzero"`
	// Applied is the last revision it applied; Newest its source's newest
	// (Flux's GitRepository artifact), when known.
	Applied string `json:"applied,omitempty"`
	Newest  string `json:"newest,omitempty"`
	// Behind is how long Newest has waited to be applied; zero when
	// applied.
	Behind time.Duration `json:"behind,omitempty"`
	// Reconciled is when the controller last reconciled the object, when
	// its status says.
	Reconciled time.Time `json:"reconciled,omitzero"`
	// Bound is how long a reconciler may be silent before it counts as
	// stalled.
	Bound time.Duration `json:"bound,omitempty"`
	// Fetch is how often its source is fetched (a GitRepository's
	// spec.interval); zero when it fetches as Git changes.
	Fetch time.Duration `json:"fetch,omitempty"`
}

// Blocks says the target's differences are Git not being applied, not drift:
// nothing is proposed until the reconciler applies again.
func (h Health) Blocks() bool { return h.State == HealthFailing || h.State == HealthStalled }

// Controller is the state of a reconciler's controller workload
// (kustomize-controller's Deployment, argocd-application-controller's
// StatefulSet), as read from the cluster.
type Controller struct {
	// Object is "Deployment flux-system/kustomize-controller".
	Object string
	Ready  int64
	Wanted int64
	// Since is when it was first read with no ready pod; zero while it
	// has one.
	Since time.Time
}

// down says the controller has had no ready pod for longer than bound: a
// restart or a node drain is not a stall. A nil controller (not found) is
// never down.
func (c *Controller) down(now time.Time, bound time.Duration) bool {
	return c != nil && c.Ready == 0 && !c.Since.IsZero() && now.Sub(c.Since) > bound
}

// stuckSync is how long an Argo CD sync may run before it counts as stuck.
const stuckSync = 2 * time.Hour

// minBound is the shortest silence counted as a stall: controllers queue,
// and a large cluster's reconcile takes minutes.
const minBound = 5 * time.Minute

// FluxBound is how long a Kustomization may go without reconciling, or
// without applying its source's newest revision: twice its interval (its
// retryInterval if longer), and at least five minutes.
func FluxBound(ks *unstructured.Unstructured) time.Duration {
	interval := durationAt(ks, "spec", "interval")
	if retry := durationAt(ks, "spec", "retryInterval"); retry > interval {
		interval = retry
	}
	return max(2*interval, minBound)
}

// ArgoCDBound is the same for an Application, from the controller's resync
// period (argocd-cm timeout.reconciliation, 120s by default) and its jitter
// (up to 60s). A negative resync is refresh turned off
// (timeout.reconciliation: 0s, for webhook-driven setups): then the
// Application is refreshed only when Git changes, and silence is no stall;
// the bound is zero.
func ArgoCDBound(resync time.Duration) time.Duration {
	switch {
	case resync < 0:
		return 0
	case resync == 0:
		resync = 2 * time.Minute
	}
	return max(2*(resync+time.Minute), minBound)
}

// settling are the Ready=False reasons of a Kustomization whose apply
// succeeded: Git is applied, and kustomize-controller retries at its
// retryInterval; what differs then is still drift.
var settling = map[string]bool{"HealthCheckFailed": true, "PruneFailed": true}

// FluxHealth reads a Kustomization's state from its status and its
// GitRepository's (src; nil when not read); ctrl is kustomize-controller's
// state, nil when unknown.
func FluxHealth(ks, src *unstructured.Unstructured, ctrl *Controller, now time.Time) Health {
	h := Health{Bound: FluxBound(ks)}
	str := func(o *unstructured.Unstructured, fields ...string) string {
		v, _, _ := unstructured.NestedString(o.Object, fields...)
		return v
	}
	h.Applied = str(ks, "status", "lastAppliedRevision")
	if hist, _, _ := unstructured.NestedSlice(ks.Object, "status", "history"); len(hist) > 0 {
		if m, ok := hist[0].(map[string]any); ok {
			s, _ := m["lastReconciled"].(string)
			h.Reconciled = parseTime(s)
		}
	}
	if src != nil {
		h.Newest = str(src, "status", "artifact", "revision")
		h.Fetch = durationAt(src, "spec", "interval")
		// A fetch that failed once is retried at the source's interval,
		// and the last artifact is still applied: only a lasting failure
		// stops new commits.
		if c := condition(src, "Ready"); c.status == "False" && !c.since.IsZero() && now.Sub(c.since) > h.Bound {
			return h.with(HealthFailing, c.since, "its GitRepository %s cannot be fetched: %s", src.GetNamespace()+"/"+src.GetName(), c.words())
		}
	}
	ready := condition(ks, "Ready")
	switch {
	case ready.status == "False" && !settling[ready.reason]:
		return h.with(HealthFailing, ready.since, "%s", ready.words())
	case ctrl.down(now, h.Bound):
		return h.with(HealthStalled, ctrl.Since, "%s has had no ready pod for %s (%d wanted)", ctrl.Object, since(now, ctrl.Since), ctrl.Wanted)
	}
	if h.Newest != "" && h.Newest != h.Applied {
		fetched := parseTime(str(src, "status", "artifact", "lastUpdateTime"))
		if !fetched.IsZero() {
			h.Behind = now.Sub(fetched)
		}
		if h.Behind > h.Bound {
			last := "nothing applied yet"
			if h.Applied != "" {
				last = "it last applied " + h.Applied
			}
			return h.with(HealthStalled, fetched, "it has not applied %s, fetched %s ago (%s)", h.Newest, since(now, fetched), last)
		}
	}
	if !h.Reconciled.IsZero() && now.Sub(h.Reconciled) > h.Bound {
		return h.with(HealthStalled, h.Reconciled, "kustomize-controller has not reconciled it for %s (its interval is %s)", since(now, h.Reconciled), durationAt(ks, "spec", "interval"))
	}
	if ready.status == "" {
		if created := ks.GetCreationTimestamp().Time; now.Sub(created) > h.Bound {
			return h.with(HealthStalled, created, "it has no status %s after it was created: is kustomize-controller running?", since(now, created))
		}
		return h
	}
	h.State = HealthApplying
	return h
}

// ArgoCDHealth reads an Application's state from its status; ctrl is
// argocd-application-controller's state, nil when unknown; resync is the
// controller's resync period (zero: Argo CD's default).
func ArgoCDHealth(app *unstructured.Unstructured, ctrl *Controller, resync time.Duration, now time.Time) Health {
	h := Health{Bound: ArgoCDBound(resync)}
	str := func(fields ...string) string {
		v, _, _ := unstructured.NestedString(app.Object, fields...)
		return v
	}
	h.Applied = str("status", "operationState", "syncResult", "revision")
	h.Newest = str("status", "sync", "revision")
	h.Reconciled = parseTime(str("status", "reconciledAt"))
	conds, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		msg, _ := m["message"].(string)
		at, _ := m["lastTransitionTime"].(string)
		if strings.HasSuffix(typ, "Error") {
			return h.with(HealthFailing, parseTime(at), "%s: %s", typ, msg)
		}
	}
	switch phase := str("status", "operationState", "phase"); phase {
	case "Failed", "Error":
		return h.with(HealthFailing, parseTime(str("status", "operationState", "finishedAt")), "its last sync ended %s: %s", strings.ToLower(phase), str("status", "operationState", "message"))
	case "Running":
		// Hooks and waves (a migration) make long syncs: only one
		// running for hours is stuck.
		if started := parseTime(str("status", "operationState", "startedAt")); !started.IsZero() && now.Sub(started) > stuckSync {
			return h.with(HealthStalled, started, "a sync has been running for %s: %s", since(now, started), str("status", "operationState", "message"))
		}
	}
	switch {
	case ctrl.down(now, max(h.Bound, minBound)):
		return h.with(HealthStalled, ctrl.Since, "%s has had no ready pod for %s (%d wanted)", ctrl.Object, since(now, ctrl.Since), ctrl.Wanted)
	case h.Bound == 0:
		// Refresh is off: the Application is reconciled when Git changes.
	case !h.Reconciled.IsZero() && now.Sub(h.Reconciled) > h.Bound:
		return h.with(HealthStalled, h.Reconciled, "argocd-application-controller has not reconciled it for %s", since(now, h.Reconciled))
	case h.Reconciled.IsZero():
		if created := app.GetCreationTimestamp().Time; now.Sub(created) > h.Bound {
			return h.with(HealthStalled, created, "it has no status %s after it was created: is argocd-application-controller running?", since(now, created))
		}
		return h
	}
	h.State = HealthApplying
	return h
}

func (h Health) with(state HealthState, at time.Time, format string, args ...any) Health {
	h.State, h.Since, h.Why = state, at, fmt.Sprintf(format, args...)
	return h
}

// cond is one status condition.
type cond struct {
	status, reason, message string
	since                   time.Time
}

func (c cond) words() string {
	switch {
	case c.reason == "":
		return c.message
	case c.message == "":
		return c.reason
	}
	return c.reason + ": " + c.message
}

// Ready reads an object's Ready condition: its status ("True", "False",
// "Unknown"; "" when it has none) and its reason and message as
// "reason: message".
func Ready(o *unstructured.Unstructured) (status, words string) {
	c := condition(o, "Ready")
	return c.status, c.words()
}

// Settling says a Ready=False reason of a Kustomization leaves Git applied
// (a health check or a prune failed after the apply).
func Settling(reason string) bool { return settling[reason] }

func condition(o *unstructured.Unstructured, typ string) cond {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if t, _ := m["type"].(string); t != typ {
			continue
		}
		var out cond
		out.status, _ = m["status"].(string)
		out.reason, _ = m["reason"].(string)
		out.message, _ = m["message"].(string)
		at, _ := m["lastTransitionTime"].(string)
		out.since = parseTime(at)
		return out
	}
	return cond{}
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

func durationAt(o *unstructured.Unstructured, fields ...string) time.Duration {
	s, _, _ := unstructured.NestedString(o.Object, fields...)
	return parseDuration(s)
}

// since is how long ago t was, as kubectl says an age ("3d4h", "2m30s").
func since(now, t time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return duration.HumanDuration(now.Sub(t))
}

// Fate says what becomes of a live change on the target if nobody acts: the
// reconcilers revert the fields Git sets when they apply it again (Flux at
// every interval; Argo CD at once with selfHeal, else at the next commit it
// syncs), and leave the fields Git does not set. Empty when the reconciler
// is not known (a target of app.yml alone) or applies nothing (suspended).
func (f *Found) Fate() string {
	if f == nil || f.Suspended != "" {
		return ""
	}
	switch f.Reconciler {
	case ReconcilerFlux:
		if f.Interval <= 0 {
			return ""
		}
		every := duration.HumanDuration(f.Interval)
		return fmt.Sprintf("kustomize-controller applies Git every %s: its next apply, at most %s after a change, reverts the fields Git sets unless the change is merged into Git; fields Git does not set stay.", every, every)
	case ReconcilerArgoCD:
		if f.SelfHeal {
			return "Argo CD's self-heal syncs as soon as it sees a change: it reverts the fields Git sets unless the change is merged into Git; fields Git does not set stay."
		}
		return "Argo CD syncs this Application only when Git changes (selfHeal is off): a live change stays until the next commit it syncs, which reverts the fields Git sets."
	}
	return ""
}
