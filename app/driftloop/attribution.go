package driftloop

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/app/auditlog"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/audit"
	"github.com/driftback/driftback/drift/livestate"
)

// watchedObjects are, by cluster, the namespaces the drift loop's targets
// render into and the names of their cluster-scoped objects: the objects
// whose audit events are kept.
type watchedObjects struct {
	mu         sync.Mutex
	namespaces map[string]map[string]bool
	names      map[string]map[string]bool
}

// note records a target's render on a cluster as watched.
func (o *watchedObjects) note(cluster string, namespaces []string, desired []*unstructured.Unstructured) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.namespaces == nil {
		o.namespaces, o.names = map[string]map[string]bool{}, map[string]map[string]bool{}
	}
	if o.namespaces[cluster] == nil {
		o.namespaces[cluster], o.names[cluster] = map[string]bool{}, map[string]bool{}
	}
	for _, n := range namespaces {
		o.namespaces[cluster][n] = true
	}
	for _, d := range desired {
		if d.GetNamespace() == "" {
			o.names[cluster][d.GetName()] = true
		}
	}
}

// Keeps says whether an audit event of an object on cluster is kept: it is
// in a namespace a target renders into, or a cluster-scoped object one
// renders.
func (d *DriftLoop) Keeps(cluster string) func(audit.Object) bool {
	return func(o audit.Object) bool {
		d.watched.mu.Lock()
		defer d.watched.mu.Unlock()
		if o.Namespace != "" {
			return d.watched.namespaces[cluster][o.Namespace]
		}
		return d.watched.names[cluster][o.Name]
	}
}

// SetAudit gives the loop a cluster's audit events, before it runs.
func (d *DriftLoop) SetAudit(r *auditlog.Receiver) { d.deps.Audit = r }

// attribute names, on each live-changed field, the person the cluster's
// audit events say made it; it says whether the audit log was read.
func (d *DriftLoop) attribute(ctx context.Context, w *livestate.Watcher, cluster string, changes []drift.Change) bool {
	a := d.deps.Audit
	if a == nil || a.Cluster != cluster {
		return false
	}
	resources := map[[2]string]string{}
	if kinds, err := w.Kinds(ctx); err == nil {
		for _, k := range kinds {
			resources[[2]string{k.Group, k.Kind}] = k.Resource
		}
	}
	n := a.Index.AttributeChanges(changes, func(group, kind string) string { return resources[[2]string{group, kind}] }, a.Identities())
	d.deps.Metrics.Audit("matched", n)
	return true
}
