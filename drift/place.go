package drift

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

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
