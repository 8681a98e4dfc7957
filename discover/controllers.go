package discover

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The controllers' workloads, found by the labels their installs set (flux
// install and bootstrap; Argo CD's manifests and Helm chart).
const (
	fluxControllerSelector = "app.kubernetes.io/component=kustomize-controller"
	argoControllerSelector = "app.kubernetes.io/name=argocd-application-controller"
)

// readControllers reads the state of the reconcilers' controllers. A
// controller not found (other labels, or not readable) is unknown, never
// counted as down.
func (w *Watcher) readControllers(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	read := map[Reconciler]*Controller{}
	if w.opts.Flux {
		read[ReconcilerFlux] = w.readController(ctx, metav1.NamespaceAll, fluxControllerSelector)
	}
	if w.opts.ArgoCD {
		read[ReconcilerArgoCD] = w.readController(ctx, argoNamespace(w.opts.Settings), argoControllerSelector)
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for r, c := range read {
		if c == nil || c.Ready > 0 {
			continue
		}
		c.Since = now
		if prev := w.controllers[r]; prev != nil && prev.Ready == 0 && !prev.Since.IsZero() {
			c.Since = prev.Since // down since it was first seen down
		}
	}
	w.controllers, w.controllersAt = read, now
}

// readController sums the ready and wanted pods of the Deployments and
// StatefulSets selector finds in ns; nil when it finds none.
func (w *Watcher) readController(ctx context.Context, ns, selector string) *Controller {
	var c *Controller
	add := func(kind, namespace, name string, ready, wanted int32) {
		if c == nil {
			c = &Controller{Object: objectName(kind, namespace, name)}
		} else {
			c.Object += ", " + objectName(kind, namespace, name)
		}
		c.Ready += int64(ready)
		c.Wanted += int64(wanted)
	}
	opts := metav1.ListOptions{LabelSelector: selector}
	if l, err := w.kube.AppsV1().Deployments(ns).List(ctx, opts); err == nil {
		for _, d := range l.Items {
			wanted := int32(1)
			if d.Spec.Replicas != nil {
				wanted = *d.Spec.Replicas
			}
			if wanted > 0 { // scaled to zero on purpose: Suspended-like, said by the objects' own status
				add("Deployment", d.Namespace, d.Name, d.Status.ReadyReplicas, wanted)
			}
		}
	}
	if l, err := w.kube.AppsV1().StatefulSets(ns).List(ctx, opts); err == nil {
		for _, s := range l.Items {
			wanted := int32(1)
			if s.Spec.Replicas != nil {
				wanted = *s.Spec.Replicas
			}
			if wanted > 0 {
				add("StatefulSet", s.Namespace, s.Name, s.Status.ReadyReplicas, wanted)
			}
		}
	}
	return c
}

// Object is a found object as it is now (its status with it), from the
// informers' caches; nil when it is gone or not read.
func (w *Watcher) Object(f *Found) *unstructured.Unstructured {
	w.mu.Lock()
	defer w.mu.Unlock()
	gvr := FluxKustomizations
	if f.Reconciler == ReconcilerArgoCD {
		gvr = ArgoCDApplications
	}
	if o := w.cached(gvr, f.Namespace, f.Name); o != nil {
		return o.DeepCopy()
	}
	return nil
}

// cached is an object of the informers' caches; the caller holds w.mu.
func (w *Watcher) cached(gvr schema.GroupVersionResource, namespace, name string) *unstructured.Unstructured {
	for _, inf := range w.informers[gvr] {
		if o, ok, err := inf.GetStore().GetByKey(cacheKey(namespace, name)); err == nil && ok {
			if u, ok := o.(*unstructured.Unstructured); ok {
				return u
			}
		}
	}
	return nil
}

// Health is the state of a found object's reconciler now, read from the
// informers' caches (fresh with every status the controller writes).
func (w *Watcher) Health(f *Found, now time.Time) Health {
	w.mu.Lock()
	defer w.mu.Unlock()
	get := w.cached
	switch f.Reconciler {
	case ReconcilerFlux:
		ks := get(FluxKustomizations, f.Namespace, f.Name)
		if ks == nil {
			return Health{}
		}
		name, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "name")
		ns, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "namespace")
		if ns == "" {
			ns = ks.GetNamespace()
		}
		return FluxHealth(ks, get(FluxGitRepositories, ns, name), w.controllers[ReconcilerFlux], now)
	case ReconcilerArgoCD:
		app := get(ArgoCDApplications, f.Namespace, f.Name)
		if app == nil {
			return Health{}
		}
		return ArgoCDHealth(app, w.controllers[ReconcilerArgoCD], w.settings.ArgoCDResync, now)
	}
	return Health{}
}

// cacheKey is an object's key in an informer's store
// (cache.MetaNamespaceKeyFunc's).
func cacheKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
