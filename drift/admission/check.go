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
	psapi "k8s.io/pod-security-admission/api"

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
		// A dump made for other namespaces knows nothing of this one's.
		switch {
		case !quotas:
		case object.LacksIn(c.live, quotaKind, n) != "":
			c.lacks = append(c.lacks, "ResourceQuotas of namespace "+n)
		default:
			c.quotas[n] = c.readQuotas(n)
		}
		switch {
		case !limits:
		case object.LacksIn(c.live, limitRangeKind, n) != "":
			c.lacks = append(c.lacks, "LimitRanges of namespace "+n)
		default:
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

// evaluate runs one object through admission: its own request, then its
// pods'. Each request meets the plugins in kube-apiserver's order
// (LimitRanger, PodSecurity, ValidatingAdmissionPolicy; ResourceQuota
// after all, in checkQuotas) and, as there, the first that refuses it ends
// it: later plugins never see it. ch, when set, records the pods for the
// quota check.
func (c *checker) evaluate(obj, live *unstructured.Unstructured, k object.Kind, namespaces map[string]*corev1.Namespace, policies []*vap, ch *changed) []finding {
	ns := obj.GetNamespace()
	r := request{obj: obj, gvk: obj.GroupVersionKind(), gvr: schema.GroupVersionResource{Group: obj.GroupVersionKind().Group, Version: obj.GroupVersionKind().Version, Resource: k.Resource},
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
	// refuses adds what a plugin found and says whether it refused.
	refuses := func(fs ...finding) bool {
		out = append(out, fs...)
		for _, f := range fs {
			if f.reason != drift.DangerAdmissionWarning {
				return true
			}
		}
		return false
	}
	if ch != nil {
		defer func() { ch.pods = p }()
	}
	switch {
	case p != nil && p.direct:
		// A Pod is its own request: what LimitRanger sets is what the
		// validators see.
		p.creator = c.opts.Applier
		f, pod := c.limitPod(p.pod, ns, drift.DangerAdmissionRefused)
		if f != nil && refuses(*f) {
			return out
		}
		if pod != nil {
			p.pod = pod
		}
		if u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p.pod); err == nil {
			r.obj = &unstructured.Unstructured{Object: u}
		}
		if refuses(c.podSecurity(p, namespaces[ns], drift.DangerAdmissionRefused)...) {
			return out
		}
	case k.GroupKind() == schemaGK("", "PersistentVolumeClaim"):
		if f := c.limitClaim(obj, ns); f != nil && refuses(*f) {
			return out
		}
	case k.GroupKind() == namespaceKind:
		// The PodSecurity plugin refuses a Namespace whose labels it
		// cannot read.
		if _, errs := psapi.PolicyToEvaluate(namespaces[obj.GetName()].Labels, psapi.Policy{}); len(errs) > 0 && refuses(finding{reason: drift.DangerAdmissionRefused,
			rule: "pod-security labels", message: "PodSecurity refuses its labels: " + errs.ToAggregate().Error()}) {
			return out
		}
		r.obj = withLabels(obj, namespaces[obj.GetName()].Labels)
	}
	if refuses(c.evaluatePolicies(policies, r, namespaces)...) || p == nil || p.direct {
		return out
	}
	f, pod := c.limitPod(p.pod, ns, drift.DangerPodsRefused)
	if f != nil && refuses(*f) {
		return out
	}
	if pod != nil {
		p.pod = pod
	}
	if refuses(c.podSecurity(p, namespaces[ns], drift.DangerPodsRefused)...) {
		return out
	}
	if u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p.pod); err == nil {
		pr := request{obj: &unstructured.Unstructured{Object: u}, gvk: corev1.SchemeGroupVersion.WithKind("Pod"),
			gvr: corev1.SchemeGroupVersion.WithResource("pods"), namespace: ns, user: p.creator, refused: drift.DangerPodsRefused}
		for _, f := range c.evaluatePolicies(policies, pr, namespaces) {
			f.message = "its pods: " + f.message
			out = append(out, f)
		}
	}
	return out
}

// withLabels is a copy of o with these labels: a Namespace as the apply
// leaves it.
func withLabels(o *unstructured.Unstructured, labels map[string]string) *unstructured.Unstructured {
	o = o.DeepCopy()
	o.SetLabels(labels)
	return o
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
	if from == nil {
		return old // not rendered: no field of it is a Secret's
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
		paths := c.opts.GitOnly(from)
		if git != nil {
			paths = append(paths, c.opts.GitOnly(git)...)
		}
		for _, p := range paths {
			if v, err := object.SetValueAt(old.Object, p, object.ValueAt(from.Object, p)); err == nil {
				if m, ok := v.(map[string]any); ok {
					old.Object = m
				}
			}
		}
	}
	return old
}

// masked is a copy of o as a policy may see it: without the
// last-applied annotation (a copy of what was applied, values substituted
// from Secrets included), and a Secret's values replaced.
func masked(o *unstructured.Unstructured) *unstructured.Unstructured {
	o = o.DeepCopy()
	if a := o.GetAnnotations(); a != nil {
		if _, ok := a["kubectl.kubernetes.io/last-applied-configuration"]; ok {
			delete(a, "kubectl.kubernetes.io/last-applied-configuration")
			o.SetAnnotations(a)
		}
	}
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
	return o
}

// sayFinding is the text of a finding of what a sync refuses, for tests.
func (f finding) String() string { return fmt.Sprintf("%s [%s] %s", f.reason, f.rule, f.message) }
