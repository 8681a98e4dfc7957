package drift

import (
	"fmt"
	"sort"

	"github.com/driftback/driftback/drift/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// An autoscaler owns the replicas of the workload it targets: a
// HorizontalPodAutoscaler (any autoscaling version) or a KEDA ScaledObject.
type autoscaler struct {
	kind, name string
	min, max   int64
}

func (a autoscaler) String() string {
	return fmt.Sprintf("%s/%s (min %d, max %d replicas)", a.kind, a.name, a.min, a.max)
}

// scaleTarget reads an HPA or a ScaledObject: the key (as Ref.Key) of the
// workload it scales, and its bounds. ok is false for any other object.
func scaleTarget(o *unstructured.Unstructured) (key string, a autoscaler, ok bool) {
	gk := o.GroupVersionKind().GroupKind()
	ref, found, _ := unstructured.NestedMap(o.Object, "spec", "scaleTargetRef")
	if !found || (gk != object.HPAKind && gk != object.ScaledObjectKind) {
		return "", autoscaler{}, false
	}
	str := func(k, def string) string {
		if s, ok := ref[k].(string); ok && s != "" {
			return s
		}
		return def
	}
	num := func(k string, def int64) int64 {
		if v, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", k); ok {
			switch n := v.(type) {
			case int64:
				return n
			case float64:
				return int64(n)
			}
		}
		return def
	}
	a = autoscaler{kind: o.GetKind(), name: o.GetName()}
	kind, apiVersion := str("kind", ""), str("apiVersion", "")
	if gk == object.HPAKind {
		a.min, a.max = num("minReplicas", 1), num("maxReplicas", 0)
	} else { // KEDA's defaults
		kind, apiVersion = str("kind", "Deployment"), str("apiVersion", "apps/v1")
		a.min, a.max = num("minReplicaCount", 0), num("maxReplicaCount", 100)
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" || str("name", "") == "" {
		return "", autoscaler{}, false
	}
	return gv.Group + "/" + kind + "/" + o.GetNamespace() + "/" + str("name", ""), a, true
}

// autoscalers finds who scales each workload of the renders: autoscalers in
// the renders, then, when the cluster is read, those live in the workloads'
// namespaces (one list per kind and namespace, only for workloads that Git
// gives replicas or whose replicas drifted).
func (c *comparer) autoscalers(renders ...[]*unstructured.Unstructured) map[string]autoscaler {
	out := map[string]autoscaler{}
	namespaces := map[string]bool{}
	for _, objs := range renders {
		for _, o := range objs {
			if key, a, ok := scaleTarget(o); ok {
				out[key] = a
				continue
			}
			if _, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas"); ok && o.GetNamespace() != "" {
				namespaces[o.GetNamespace()] = true
			}
		}
	}
	if c.live == nil || len(namespaces) == 0 {
		return out
	}
	kinds, err := c.live.Kinds(c.ctx)
	if err != nil {
		return out
	}
	served := map[schema.GroupKind]bool{}
	for _, k := range kinds {
		served[k.GroupKind()] = true
	}
	sorted := make([]string, 0, len(namespaces))
	for ns := range namespaces {
		sorted = append(sorted, ns)
	}
	sort.Strings(sorted)
	found := func(objs []*unstructured.Unstructured) {
		for _, o := range objs {
			if key, a, ok := scaleTarget(o); ok && namespaces[o.GetNamespace()] {
				if _, inGit := out[key]; !inGit {
					out[key] = a
				}
			}
		}
	}
	coverer, _ := c.live.(object.Coverer)
	for _, gk := range object.AutoscalerKinds {
		if !served[gk] {
			continue
		}
		covered := coverer != nil
		for _, ns := range sorted {
			covered = covered && coverer.Covers(gk, ns)
		}
		// Many namespaces, no scope and no caches: one list for all.
		if !covered && c.opts.Scope == nil && len(sorted) >= object.ClusterWideFrom {
			objs, err := c.live.List(c.ctx, gk, "", nil)
			if err == nil {
				found(objs)
				continue
			}
			if !apierrors.IsForbidden(err) {
				c.addError(fmt.Sprintf("list %s to find what autoscales: %v", gk.Kind, err))
				continue
			}
		}
		for _, ns := range sorted {
			if c.opts.Scope != nil && !c.opts.Scope.Namespaces[ns] {
				continue
			}
			objs, err := c.live.List(c.ctx, gk, ns, nil)
			if apierrors.IsForbidden(err) {
				continue // credentials that cannot read autoscalers: none known
			}
			if err != nil {
				c.addError(fmt.Sprintf("list %s in %s to find what autoscales: %v", gk.Kind, ns, err))
				continue
			}
			found(objs)
		}
	}
	return out
}

// autoscaled marks the replicas fields of autoscaled workloads with their
// autoscaler, and warns where the head render sets replicas on one: every
// sync resets what the autoscaler chose, and the autoscaler scales back.
func (c *comparer) autoscaled(base, head []*unstructured.Unstructured) {
	scalers := c.autoscalers(head, base)
	if len(scalers) == 0 {
		return
	}
	mark := func(changes []Change) {
		for i := range changes {
			a, ok := scalers[changes[i].Ref().Key()]
			if !ok {
				continue
			}
			for j := range changes[i].Fields {
				if changes[i].Fields[j].Path == ".spec.replicas" {
					changes[i].Fields[j].Autoscaler = a.String()
				}
			}
		}
	}
	mark(c.t.PR)
	mark(c.t.Changes)
	mark(c.t.Drift)

	// The warning goes on the workload's entry, else on its autoscaler's, in
	// the live impact and in the Git change alike (a report tells one of them).
	warn := func(changes []Change, d Danger, keys ...string) {
		for _, key := range keys {
			for i := range changes {
				if changes[i].Ref().Key() == key {
					changes[i].Danger = append(changes[i].Danger, d)
					return
				}
			}
		}
	}
	for _, o := range head {
		key := object.RefOf(o).Key()
		a, ok := scalers[key]
		if !ok {
			continue
		}
		replicas, set, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas")
		if !set {
			continue
		}
		d := Danger{Reason: DangerAutoscaledReplicas, Count: 1, Message: fmt.Sprintf(
			"Git sets replicas (%v) on a workload that %s scales: every sync resets the autoscaler's choice and it scales back; leave replicas out of Git and set the autoscaler's bounds instead", replicas, a)}
		warn(c.t.Changes, d, key, scalerKey(o.GetNamespace(), a))
		warn(c.t.PR, d, key, scalerKey(o.GetNamespace(), a))
	}
}

// scalerKey is the Ref.Key of an autoscaler in namespace ns.
func scalerKey(ns string, a autoscaler) string {
	group := object.HPAKind.Group
	if a.kind == object.ScaledObjectKind.Kind {
		group = object.ScaledObjectKind.Group
	}
	return group + "/" + a.kind + "/" + ns + "/" + a.name
}
