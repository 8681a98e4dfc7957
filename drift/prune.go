package drift

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/argocd"
)

// Tracking says how the reconciler marks the live objects it owns; a sync
// prunes those that leave Git. The zero value tracks nothing: only objects in
// the base render and not in the head render are pruned.
type Tracking struct {
	// ArgoCDApp is an Argo CD application name: objects whose
	// argocd.argoproj.io/tracking-id annotation starts with "<app>:" or whose
	// app.kubernetes.io/instance label is <app>.
	ArgoCDApp string `json:"argocdApp,omitempty" yaml:"argocdApp,omitempty"`
	// ArgoCDInstanceLabel is the label Argo CD tracks with when its
	// application.instanceLabelKey is not the default app.kubernetes.io/instance.
	ArgoCDInstanceLabel string `json:"argocdInstanceLabel,omitempty" yaml:"argocdInstanceLabel,omitempty"`
	// ArgoCDTrackingMethod is Argo CD's application.resourceTrackingMethod:
	// "label", "annotation" or "annotation+label"; empty matches either,
	// as Argo CD's default changed between releases.
	ArgoCDTrackingMethod string `json:"argocdTrackingMethod,omitempty" yaml:"argocdTrackingMethod,omitempty"`
	// FluxName names a Flux Kustomization: objects labelled
	// kustomize.toolkit.fluxcd.io/name with it (and /namespace with
	// FluxNamespace).
	FluxName string `json:"fluxName,omitempty" yaml:"fluxName,omitempty"`
	// FluxNamespace is the Flux Kustomization's namespace.
	FluxNamespace string `json:"fluxNamespace,omitempty" yaml:"fluxNamespace,omitempty"`
	// Selector is any label selector, such as "app.kubernetes.io/part-of=shop".
	Selector string `json:"selector,omitempty" yaml:"selector,omitempty"`
}

// Annotations that turn a prune into "kept".
const (
	argoSyncOptions    = "argocd.argoproj.io/sync-options"
	argoTrackingID     = "argocd.argoproj.io/tracking-id"
	fluxPrune          = "kustomize.toolkit.fluxcd.io/prune"
	helmResourcePolicy = "helm.sh/resource-policy"
)

func (t Tracking) selectors() ([]labels.Selector, error) {
	var out []labels.Selector
	if t.ArgoCDApp != "" && t.ArgoCDTrackingMethod != "annotation" && t.ArgoCDTrackingMethod != "annotation+label" {
		key := t.ArgoCDInstanceLabel
		if key == "" {
			key = "app.kubernetes.io/instance"
		}
		out = append(out, labels.SelectorFromSet(labels.Set{key: t.ArgoCDApp}))
	}
	if t.FluxName != "" {
		set := labels.Set{"kustomize.toolkit.fluxcd.io/name": t.FluxName}
		if t.FluxNamespace != "" {
			set["kustomize.toolkit.fluxcd.io/namespace"] = t.FluxNamespace
		}
		out = append(out, labels.SelectorFromSet(set))
	}
	if t.Selector != "" {
		s, err := labels.Parse(t.Selector)
		if err != nil {
			return nil, fmt.Errorf("tracking selector %q: %w", t.Selector, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// Owns says a live object is one the reconciler applied: its labels match
// the tracking's selectors, or it carries Argo CD's tracking annotation.
func (t Tracking) Owns(o *unstructured.Unstructured) bool {
	if t.annotated(o) {
		return true
	}
	sels, err := t.selectors()
	if err != nil {
		return false
	}
	for _, s := range sels {
		if s.Matches(labels.Set(o.GetLabels())) {
			return true
		}
	}
	return false
}

// tracked reports whether a live object carries the Argo CD tracking annotation.
func (t Tracking) annotated(o *unstructured.Unstructured) bool {
	return t.ArgoCDApp != "" && t.ArgoCDTrackingMethod != "label" && strings.HasPrefix(o.GetAnnotations()[argoTrackingID], t.ArgoCDApp+":")
}

// keptBy names the annotation that keeps o in place when a sync would prune it.
func keptBy(o *unstructured.Unstructured) string {
	a := o.GetAnnotations()
	for _, opt := range strings.Split(a[argoSyncOptions], ",") {
		if strings.TrimSpace(opt) == "Prune=false" {
			return argoSyncOptions + ": Prune=false"
		}
	}
	if a[fluxPrune] == "disabled" {
		return fluxPrune + ": disabled"
	}
	if a[helmResourcePolicy] == "keep" {
		return helmResourcePolicy + ": keep"
	}
	return ""
}

// prunes lists what a sync deletes: live objects of the base render that the
// head drops, and live objects the reconciler tracks that the head does not
// render. Objects owned by another object are left to their owner.
func (c *comparer) prunes(base []*unstructured.Unstructured, inHead map[string]bool, liveObjs map[string]*unstructured.Unstructured) ([]Change, error) {
	candidates := map[string]*unstructured.Unstructured{}
	inBase := map[string]bool{}
	for _, b := range base {
		k := object.RefOf(b).Key()
		inBase[k] = true
		if inHead[k] {
			continue
		}
		if l, ok := liveObjs[k]; ok {
			candidates[k] = l
		}
	}
	tracked, err := c.trackedObjects(base)
	if err != nil {
		return nil, err
	}
	for _, l := range tracked {
		k := object.RefOf(l).Key()
		if inHead[k] || c.newer[k] || len(l.GetOwnerReferences()) > 0 {
			continue
		}
		if c.opts.Tracking.ArgoCDApp != "" && argocd.IsHook(l.GetAnnotations()) {
			continue // Argo CD deletes its hooks by their delete policy, never by pruning
		}
		if c.tipUnknown != "" && !inBase[k] {
			// Perhaps the base branch's since the merge base: not known.
			ch := newChange(object.RefOf(l), ActionUnchanged) // Git, head against merge base, does not touch it
			ch.Note = "not compared: the base branch's tip does not render (" + c.tipUnknown + "), so whether it added this object since this branch left it, which merging keeps, is unknown"
			c.t.Unread = append(c.t.Unread, ch)
			continue
		}
		maskSecret(l)
		candidates[k] = l
		liveObjs[k] = l
	}
	var out []Change
	for _, l := range candidates {
		ch := newChange(object.RefOf(l), ActionDelete)
		if by := keptBy(l); by != "" {
			ch.Action, ch.KeptBy = ActionKeep, by
		} else if c.opts.NoPrune != "" {
			ch.Action, ch.KeptBy = ActionKeep, c.opts.NoPrune
		}
		out = append(out, ch)
	}
	sortChanges(out)
	return out, nil
}

// trackedObjects lists the live objects the Tracking selects, over every
// listable kind (label tracking), or over the kinds of the base render (the
// Argo CD annotation, which no server-side selector can match).
func (c *comparer) trackedObjects(base []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	sels, err := c.opts.Tracking.selectors()
	if err != nil || (len(sels) == 0 && c.opts.Tracking.ArgoCDApp == "") {
		return nil, err
	}
	kinds, err := c.live.Kinds(c.ctx)
	if err != nil {
		return nil, fmt.Errorf("discover kinds for prune: %w", err)
	}
	seen := map[string]bool{}
	var out []*unstructured.Unstructured
	add := func(objs []*unstructured.Unstructured) {
		for _, o := range objs {
			if k := object.RefOf(o).Key(); !seen[k] {
				seen[k] = true
				out = append(out, o)
			}
		}
	}
	for _, k := range kinds {
		for _, sel := range sels {
			objs, err := c.live.List(c.ctx, k.GroupKind(), "", sel)
			if err != nil {
				return nil, fmt.Errorf("list %s for prune: %w", k.GroupKind(), err)
			}
			add(objs)
		}
	}
	if c.opts.Tracking.ArgoCDApp != "" && c.opts.Tracking.ArgoCDTrackingMethod != "label" {
		baseKinds := map[string]bool{}
		for _, b := range base {
			gk := b.GroupVersionKind().GroupKind()
			if baseKinds[gk.String()] {
				continue
			}
			baseKinds[gk.String()] = true
			objs, err := c.live.List(c.ctx, gk, "", nil)
			if err != nil {
				return nil, fmt.Errorf("list %s for prune: %w", gk, err)
			}
			var annotated []*unstructured.Unstructured
			for _, o := range objs {
				if c.opts.Tracking.annotated(o) {
					annotated = append(annotated, o)
				}
			}
			add(annotated)
		}
	}
	return out, nil
}
