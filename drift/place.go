package drift

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Place puts a render's objects where the apiserver stores them when a
// reconciler applies them: a namespaced object that names no namespace in
// namespace (Argo CD's destination.namespace; "default" when empty, as the
// apiserver does), a cluster-scoped one without a namespace. Which kinds are
// namespaced comes from live, else the render's CRDs and the built-in kinds.
// A kind the cluster does not serve counts as namespaced, as Argo CD counts
// it; without a cluster (live nil) an object of a kind no one knows keeps the
// namespace it names, or none: a ClusterIssuer is not put in "default".
//
// The objects it moves are copies; the others are returned as they are, and
// nil stays nil. Scope, snapshot and comparison all see the placed objects,
// so an object is never read in one namespace and compared in another.
func Place(ctx context.Context, live LiveReader, objs []*unstructured.Unstructured, namespace string) ([]*unstructured.Unstructured, error) {
	if objs == nil {
		return nil, nil
	}
	objs, err := Typed(objs)
	if err != nil {
		return nil, err
	}
	namespaced, err := namespacedKinds(ctx, live, objs)
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o
		if ns := placedNamespace(o, namespaced, namespace, live != nil); ns != o.GetNamespace() {
			out[i] = o.DeepCopy()
			out[i].SetNamespace(ns)
		}
	}
	return out, nil
}

// placedNamespace is the namespace an object is stored in; unknownNamespaced
// says a kind namespaced does not list is namespaced (the cluster was asked).
func placedNamespace(o *unstructured.Unstructured, namespaced map[schema.GroupKind]bool, def string, unknownNamespaced bool) string {
	if def == "" {
		def = "default"
	}
	ns, known := namespaced[o.GroupVersionKind().GroupKind()]
	switch {
	case known && !ns:
		return ""
	case !known && !unknownNamespaced:
		return o.GetNamespace()
	case o.GetNamespace() == "":
		return def
	}
	return o.GetNamespace()
}

// Keys of the metadata reconcilers write on every object they apply, to
// track what they own.
const (
	argoInstanceLabel   = "app.kubernetes.io/instance"
	argoInstallationID  = "argocd.argoproj.io/installation-id"
	fluxNameLabel       = "kustomize.toolkit.fluxcd.io/name"
	fluxNamespaceLabel  = "kustomize.toolkit.fluxcd.io/namespace"
	maxLabelValueLength = 63
)

// keepTracking gives a desired object the tracking labels and annotations
// the reconciler wrote on its live counterpart (Argo CD's instance label,
// tracking-id and installation-id; Flux's owner labels), where Git sets none
// of its own: the reconciler writes them on every sync, so they are never
// drift, never a change and never written back. Argo CD compares the same
// way (it stamps the desired object, and normalises tracking before a diff).
func (t Tracking) keepTracking(desired, live *unstructured.Unstructured) {
	if live == nil {
		return
	}
	copyMeta := func(get func(*unstructured.Unstructured) map[string]string, set func(*unstructured.Unstructured, map[string]string)) func(string, func(string) bool) {
		return func(key string, owned func(string) bool) {
			v, ok := get(live)[key]
			if _, written := get(desired)[key]; !ok || written || !owned(v) {
				return
			}
			m := get(desired)
			if m == nil {
				m = map[string]string{}
			}
			m[key] = v
			set(desired, m)
		}
	}
	copyLabel := copyMeta((*unstructured.Unstructured).GetLabels, (*unstructured.Unstructured).SetLabels)
	copyAnnotation := copyMeta((*unstructured.Unstructured).GetAnnotations, (*unstructured.Unstructured).SetAnnotations)
	if app := t.ArgoCDApp; app != "" {
		key := t.ArgoCDInstanceLabel
		if key == "" {
			key = argoInstanceLabel
		}
		copyLabel(key, func(v string) bool {
			// annotation+label truncates the label to a label value's length.
			return v == app || (len(app) > maxLabelValueLength && v == strings.TrimRight(app[:maxLabelValueLength], "-._"))
		})
		copyAnnotation(argoTrackingID, func(v string) bool { return strings.HasPrefix(v, app+":") })
		copyAnnotation(argoInstallationID, func(string) bool { return true })
	}
	if t.FluxName != "" {
		copyLabel(fluxNameLabel, func(v string) bool { return v == t.FluxName })
		copyLabel(fluxNamespaceLabel, func(v string) bool { return t.FluxNamespace == "" || v == t.FluxNamespace })
	}
}
