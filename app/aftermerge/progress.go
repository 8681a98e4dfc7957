// Package aftermerge follows a merged pull request on each target it
// affected: until the target's reconciler applied the merge commit and the
// workloads it changed are ready, or it failed, or its deadline passed. What
// it sees is written as one GitHub Deployment per target and merge, its
// status updated in place. It only reads the cluster, from watches.
package aftermerge

import (
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/driftback/driftback/discover"
)

// Applied is what a reconciler's status says of a commit.
type Applied int

// What a reconciler did with a commit.
const (
	Waiting Applied = iota // not yet
	Done                   // applied it, or a later commit that holds it
	Failed                 // tried it and failed
)

// Progress reads a reconciler object's status for the merge commit sha:
// applied, failed (with its own words) or not yet. holds says whether a
// commit the reconciler applied holds sha (a later merge).
func Progress(f *discover.Found, obj *unstructured.Unstructured, sha string, holds func(applied string) bool) (Applied, string) {
	str := func(fields ...string) string {
		v, _, _ := unstructured.NestedString(obj.Object, fields...)
		return v
	}
	commitOf := func(rev string) string {
		// Flux writes "main@sha1:<sha>" (and "sha1:<sha>" without a branch).
		if i := strings.LastIndex(rev, ":"); i >= 0 {
			return rev[i+1:]
		}
		return rev
	}
	switch f.Reconciler {
	case discover.ReconcilerFlux:
		applied := commitOf(str("status", "lastAppliedRevision"))
		if applied == sha || applied != "" && holds != nil && holds(applied) {
			return Done, ""
		}
		attempted := commitOf(str("status", "lastAttemptedRevision"))
		if attempted != sha && (attempted == "" || holds == nil || !holds(attempted)) {
			break
		}
		ready, words := discover.Ready(obj)
		reason, _, _ := strings.Cut(words, ":")
		switch {
		case ready == "False" && discover.Settling(reason):
			// Applied, then a health check or prune failed: lastAppliedRevision
			// waits for them; the workloads say why.
			return Done, ""
		case ready == "False":
			return Failed, words
		}
	case discover.ReconcilerArgoCD:
		synced := str("status", "operationState", "syncResult", "revision")
		phase := str("status", "operationState", "phase")
		if (synced == sha || synced != "" && holds != nil && holds(synced)) && phase == "Succeeded" {
			return Done, ""
		}
		if (phase == "Failed" || phase == "Error") && (synced == sha || str("status", "operationState", "operation", "sync", "revision") == sha) {
			return Failed, "its sync ended " + strings.ToLower(phase) + ": " + str("status", "operationState", "message")
		}
		if str("status", "sync", "revision") == sha && str("status", "sync", "status") == "Synced" {
			return Done, "" // nothing to apply: already as Git says
		}
	}
	return Waiting, ""
}

// workloadKinds are what a merge is followed into: what runs pods.
var workloadKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "DaemonSet": true, "Job": true}

// Workload is one workload's readiness.
type Workload struct {
	// Object is "Deployment/shop/web".
	Object string
	Ready  bool
	Failed bool
	// Says is kstatus's message ("Available: 1/3").
	Says string
}

// Readiness computes a workload's readiness as kstatus does (what flux and
// kubectl's wait read).
func Readiness(u *unstructured.Unstructured) Workload {
	w := Workload{Object: u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()}
	res, err := status.Compute(u)
	switch {
	case err != nil:
		w.Says = err.Error()
	case res.Status == status.CurrentStatus:
		w.Ready, w.Says = true, res.Message
	case res.Status == status.FailedStatus:
		w.Failed, w.Says = true, res.Message
	default:
		w.Says = res.Message
	}
	return w
}

// podTrouble names what keeps pods from running: a container waiting
// (ImagePullBackOff, CrashLoopBackOff…) or a pod no node takes.
func podTrouble(pods []*corev1.Pod) string {
	for _, p := range pods {
		for _, c := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if w := c.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
				return strings.TrimSpace(fmt.Sprintf("%s (pod %s): %s", w.Reason, p.Name, w.Message))
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return strings.TrimSpace(fmt.Sprintf("%s (pod %s): %s", c.Reason, p.Name, c.Message))
			}
		}
	}
	return ""
}

// ChangedSince says whether the reconciler's apply changed or created a
// live object at or after t: its field manager's entry (kustomize-controller
// applies, argocd-controller updates) was written then, or the object is
// that new. managers are the reconciler's field managers.
func ChangedSince(u *unstructured.Unstructured, managers []string, t time.Time) bool {
	t = t.Truncate(time.Second) // the API's precision
	if !u.GetCreationTimestamp().Time.Before(t) {
		return true
	}
	for _, m := range u.GetManagedFields() {
		for _, name := range managers {
			if m.Manager == name && m.Time != nil && !m.Time.Time.Before(t) && m.Subresource == "" {
				return true
			}
		}
	}
	return false
}

// PodsOf are the pods a workload runs, by its selector.
func PodsOf(u *unstructured.Unstructured, pods []*corev1.Pod) []*corev1.Pod {
	sel, ok, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
	if !ok || len(sel) == 0 {
		return nil
	}
	var out []*corev1.Pod
pods:
	for _, p := range pods {
		if p.Namespace != u.GetNamespace() {
			continue
		}
		for k, v := range sel {
			if p.Labels[k] != v {
				continue pods
			}
		}
		out = append(out, p)
	}
	return out
}

// toPod reads a pod from its unstructured form.
func toPod(u *unstructured.Unstructured) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	return p, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p)
}

// podCounts are a workload's ready and wanted pods, from its status (a Job
// counts the pods that succeeded of those it must complete).
func podCounts(u *unstructured.Unstructured) (ready, wanted int) {
	num := func(fields ...string) int {
		v, _, _ := unstructured.NestedInt64(u.Object, fields...)
		return int(v)
	}
	switch u.GetKind() {
	case "DaemonSet":
		return num("status", "numberReady"), num("status", "desiredNumberScheduled")
	case "Job":
		wanted = 1
		if c, ok, _ := unstructured.NestedInt64(u.Object, "spec", "completions"); ok {
			wanted = int(c)
		}
		return num("status", "succeeded"), wanted
	}
	wanted = 1
	if r, ok, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); ok {
		wanted = int(r)
	}
	return num("status", "readyReplicas"), wanted
}
