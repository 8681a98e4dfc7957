package admission

import (
	"encoding/base64"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

// finding is one thing admission does to a request.
type finding struct {
	reason drift.DangerReason
	// rule names the rule, to find the same finding at the base.
	rule    string
	message string
}

var (
	namespaceKind  = schema.GroupKind{Kind: "Namespace"}
	quotaKind      = schema.GroupKind{Kind: "ResourceQuota"}
	limitRangeKind = schema.GroupKind{Kind: "LimitRange"}
)

func schemaGK(group, kind string) schema.GroupKind { return schema.GroupKind{Group: group, Kind: kind} }

// kindOf is a kind as the cluster serves it, with its resource name (a
// dump, which knows none, has it guessed from the kind as kubectl does).
// A live state that holds some kinds only (a dump) serves the rest too, as
// far as the check knows.
func (c *checker) kindOf(gvk schema.GroupVersionKind, namespaced bool) (object.Kind, bool) {
	k, ok := c.kinds[gvk.GroupKind()]
	if !ok {
		if !object.IsPartial(c.live) {
			return object.Kind{}, false
		}
		k = object.Kind{GroupVersionKind: gvk, Namespaced: namespaced}
	}
	if k.Resource == "" {
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		k.Resource = plural.Resource
	}
	return k, true
}

// readRules reads the rules the changed objects meet: the labels of their
// namespaces (the head's, where it renders the Namespace), the policies,
// and each namespace's quotas and limit ranges.
func (c *checker) readRules() {
	wanted := map[string]bool{}
	for _, ch := range c.changed {
		if ch.ref.Namespace != "" {
			wanted[ch.ref.Namespace] = true
		}
	}
	for _, n := range c.relabeled {
		wanted[n] = true
	}
	if c.served(namespaceKind, "Namespaces (their Pod Security labels)") {
		var refs []object.Ref
		for _, n := range sortedKeys(wanted) {
			refs = append(refs, object.Ref{Version: "v1", Kind: "Namespace", Name: n})
		}
		// The labels of the namespaces the change lands in: read whatever
		// the scope, as the policies are; they hold no one's data.
		got, err := c.live.Get(c.ctx, refs)
		if err != nil {
			c.problem("the labels of the namespaces %v could not be read: %v", sortedKeys(wanted), err)
		}
		for _, r := range refs {
			if o := got[r.Key()]; o != nil {
				c.liveNS[r.Name] = namespaceOf(o)
				c.namespaces[r.Name] = c.liveNS[r.Name]
			}
			if h := c.head[r.Key()]; h != nil {
				c.namespaces[r.Name] = applied(c.liveNS[r.Name], c.base[r.Key()], h)
			}
		}
	}
	c.policies, c.livePolicies = c.readPolicies()
	quotas, limits := c.served(quotaKind, "ResourceQuotas"), c.served(limitRangeKind, "LimitRanges")
	for _, n := range sortedKeys(wanted) {
		if quotas {
			c.quotas[n] = c.readQuotas(n)
		}
		if limits {
			c.limits[n] = c.readLimitRanges(n)
		}
	}
}

// applied is a Namespace as a server-side apply of head leaves it: the
// labels Git sets, over those others set live (a platform team's Pod
// Security labels stay when Git writes none), less those the base set and
// the head no longer does.
func applied(live *corev1.Namespace, base, head *unstructured.Unstructured) *corev1.Namespace {
	ns := namespaceOf(head)
	if live == nil {
		return ns
	}
	labels := map[string]string{}
	for k, v := range live.Labels {
		labels[k] = v
	}
	if base != nil {
		for k := range base.GetLabels() {
			if _, kept := ns.Labels[k]; !kept {
				delete(labels, k)
			}
		}
	}
	for k, v := range ns.Labels {
		labels[k] = v
	}
	ns.Labels = labels
	return ns
}

// checkObject checks one object a sync creates or changes: the object as
// the apiserver receives it, then the pods a workload's controller creates
// from it. A finding the base's object meets under today's rules too is
// the pull request's to know, not its doing: Before.
func (c *checker) checkObject(ch *changed) {
	k, ok := c.kindOf(ch.ref.GVK(), ch.ref.Namespace != "")
	if !ok {
		return // a kind the cluster does not serve: the sync fails on it already
	}
	head := c.prepare(ch.head)
	findings := c.evaluate(head, ch.live, k, c.namespaces, c.policies, ch)
	if len(findings) == 0 {
		return
	}
	var before []finding
	if ch.base != nil {
		before = c.evaluate(c.prepare(ch.base), ch.live, k, c.liveNS, c.livePolicies, nil)
	}
	for _, f := range findings {
		ch.refused = ch.refused || f.reason == drift.DangerAdmissionRefused
		ch.podsRefused = ch.podsRefused || f.reason == drift.DangerPodsRefused
		d := drift.Danger{Reason: f.reason, Message: f.message}
		d.Before = slices.ContainsFunc(before, func(b finding) bool { return b.rule == f.rule && b.reason == f.reason })
		c.danger(ch.at, d)
	}
}

// evaluate runs one object through admission: its own request (policies,
// a Pod's or a claim's limit ranges, a Pod's security level), then its
// pods' (limit ranges first, as LimitRanger mutates before the validators
// see them). ch, when set, records the pods for the quota check.
func (c *checker) evaluate(obj, live *unstructured.Unstructured, k object.Kind, namespaces map[string]*corev1.Namespace, policies []*vap, ch *changed) []finding {
	ns := obj.GetNamespace()
	gvr := k.GroupVersion().WithResource(k.Resource)
	r := request{obj: obj, gvk: obj.GroupVersionKind(), gvr: schema.GroupVersionResource{Group: obj.GroupVersionKind().Group, Version: obj.GroupVersionKind().Version, Resource: gvr.Resource},
		namespace: ns, name: obj.GetName(), user: c.opts.Applier, refused: drift.DangerAdmissionRefused}
	if live != nil {
		r.old = c.liveAsSeen(live, obj)
	}
	p, err := podsOf(obj)
	if err != nil {
		c.problem("what admission refuses of %s could not be checked: %v", object.RefOf(obj), err)
		return nil
	}
	var out []finding
	if p != nil && p.direct {
		// A Pod is its own request: what LimitRanger sets is what the
		// validators see.
		if f, pod := c.limitPod(p.pod, ns, drift.DangerAdmissionRefused); f != nil {
			out = append(out, *f)
		} else if pod != nil {
			p.pod = pod
		}
		if u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p.pod); err == nil {
			r.obj = &unstructured.Unstructured{Object: u}
		}
		out = append(out, c.podSecurity(p, namespaces[ns], drift.DangerAdmissionRefused)...)
	}
	if k.GroupKind() == schemaGK("", "PersistentVolumeClaim") {
		if f := c.limitClaim(obj, ns); f != nil {
			out = append(out, *f)
		}
	}
	out = append(out, c.evaluatePolicies(policies, r, namespaces)...)
	if p == nil || p.direct {
		if ch != nil {
			ch.pods = p
		}
		return out
	}
	if f, pod := c.limitPod(p.pod, ns, drift.DangerPodsRefused); f != nil {
		out = append(out, *f)
	} else if pod != nil {
		p.pod = pod
	}
	out = append(out, c.podSecurity(p, namespaces[ns], drift.DangerPodsRefused)...)
	if u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p.pod); err == nil {
		pr := request{obj: &unstructured.Unstructured{Object: u}, gvk: corev1.SchemeGroupVersion.WithKind("Pod"),
			gvr: corev1.SchemeGroupVersion.WithResource("pods"), namespace: ns, user: p.creator, refused: drift.DangerPodsRefused}
		for _, f := range c.evaluatePolicies(policies, pr, namespaces) {
			f.message = "its pods: " + f.message
			out = append(out, f)
		}
	}
	if ch != nil {
		ch.pods = p
	}
	return out
}

// prepare is an object as the apiserver's validators see it: defaulted,
// a Secret's values masked.
func (c *checker) prepare(o *unstructured.Unstructured) *unstructured.Unstructured {
	o = masked(o)
	if d, err := object.Defaulted(o); err == nil {
		return d
	}
	return o
}

// liveAsSeen is the live object a policy sees as oldObject: a Secret's
// values, and the fields whose live value is a Secret's, are the Git
// object's (the base's), so no policy a change brings can compare a value
// it guesses with the live one.
func (c *checker) liveAsSeen(live, git *unstructured.Unstructured) *unstructured.Unstructured {
	old := masked(live)
	ref := object.RefOf(live)
	from := c.base[ref.Key()]
	if from == nil {
		from = git
	}
	from = masked(from)
	if ref.Group == "" && ref.Kind == "Secret" {
		for _, f := range []string{"data", "stringData"} {
			delete(old.Object, f)
			if v, ok := from.Object[f]; ok {
				old.Object[f] = runtime.DeepCopyJSONValue(v)
			}
		}
	}
	if c.opts.GitOnly != nil {
		for _, p := range c.opts.GitOnly(git) {
			if v, err := object.SetValueAt(old.Object, p, object.ValueAt(from.Object, p)); err == nil {
				if m, ok := v.(map[string]any); ok {
					old.Object = m
				}
			}
		}
	}
	return old
}

// masked is a copy of o whose Secret values are replaced: a policy's
// message could otherwise print them.
func masked(o *unstructured.Unstructured) *unstructured.Unstructured {
	o = o.DeepCopy()
	if r := object.RefOf(o); r.Group != "" || r.Kind != "Secret" {
		return o
	}
	for _, f := range []string{"data", "stringData"} {
		hidden := "(hidden)"
		if f == "data" {
			hidden = base64.StdEncoding.EncodeToString([]byte(hidden))
		}
		if m, ok := o.Object[f].(map[string]any); ok {
			for k := range m {
				m[k] = hidden
			}
		} else if _, ok := o.Object[f]; ok {
			o.Object[f] = map[string]any{}
		}
	}
	if a := o.GetAnnotations(); a != nil {
		delete(a, "kubectl.kubernetes.io/last-applied-configuration")
		o.SetAnnotations(a)
	}
	return o
}

// sayFinding is the text of a finding of what a sync refuses, for tests.
func (f finding) String() string { return fmt.Sprintf("%s [%s] %s", f.reason, f.rule, f.message) }
