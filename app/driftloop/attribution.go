package driftloop

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/audit"
	"github.com/driftback/driftback/drift/livestate"
)

// noteWatched tells the audit receiver of a target's cluster which
// objects' events to keep: those it renders.
func (d *DriftLoop) noteWatched(ctx context.Context, w *livestate.Watcher, cluster string, desired []*unstructured.Unstructured) {
	a := d.deps.Audit
	if a == nil || a.Cluster != cluster {
		return
	}
	resource := resources(ctx, w)
	var objs []audit.Object
	for _, o := range desired {
		gvk := o.GroupVersionKind()
		if r := resource(gvk.Group, gvk.Kind); r != "" {
			objs = append(objs, audit.Object{Group: gvk.Group, Resource: r, Namespace: o.GetNamespace(), Name: o.GetName()})
		}
	}
	a.Note(objs)
}

// resources names each kind's resource, as the cluster serves it.
func resources(ctx context.Context, w *livestate.Watcher) func(group, kind string) string {
	m := map[[2]string]string{}
	if kinds, err := w.Kinds(ctx); err == nil {
		for _, k := range kinds {
			m[[2]string{k.Group, k.Kind}] = k.Resource
		}
	}
	return func(group, kind string) string { return m[[2]string{group, kind}] }
}

// attribute names, on each live-changed field, the person the cluster's
// audit events say made it; it says whether the audit log was read.
func (d *DriftLoop) attribute(ctx context.Context, w *livestate.Watcher, cluster string, changes []drift.Change) bool {
	a := d.deps.Audit
	if a == nil || a.Cluster != cluster {
		return false
	}
	n := a.Index.AttributeChanges(changes, resources(ctx, w), a.Identities())
	d.deps.Metrics.Audit("matched", n)
	return true
}
