package driftloop

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
)

// noteWatched tells the audit receiver of a target's cluster which
// objects' events to keep: those of the namespaces it renders into and its
// cluster-scoped objects.
func (d *DriftLoop) noteWatched(cluster string, namespaces []string, desired []*unstructured.Unstructured) {
	a := d.deps.Audit
	if a == nil || a.Cluster != cluster {
		return
	}
	var names []string
	for _, o := range desired {
		if o.GetNamespace() == "" {
			names = append(names, o.GetName())
		}
	}
	a.Note(namespaces, names)
}

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
