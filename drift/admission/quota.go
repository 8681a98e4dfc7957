package admission

import (
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	"k8s.io/apiserver/pkg/authentication/user"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/quota/v1/evaluator/core"
	"k8s.io/kubernetes/plugin/pkg/admission/limitranger"
	"k8s.io/utils/clock"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

// quotaState is a namespace's quotas, their usage moved along as the sync's
// requests are admitted.
type quotaState struct {
	quotas []corev1.ResourceQuota
}

func (c *checker) readQuotas(ns string) *quotaState {
	objs, err := c.scoped.List(c.ctx, quotaKind, ns, nil)
	if err != nil {
		c.problem("the ResourceQuotas of namespace %s could not be read: %v", ns, err)
		return nil
	}
	st := &quotaState{}
	for _, o := range objs {
		var q corev1.ResourceQuota
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &q); err != nil {
			c.problem("ResourceQuota %s/%s could not be read: %v", ns, o.GetName(), err)
			continue
		}
		st.quotas = append(st.quotas, q)
	}
	if len(st.quotas) == 0 {
		return nil
	}
	return st
}

func (c *checker) readLimitRanges(ns string) []*corev1.LimitRange {
	objs, err := c.scoped.List(c.ctx, limitRangeKind, ns, nil)
	if err != nil {
		c.problem("the LimitRanges of namespace %s could not be read: %v", ns, err)
		return nil
	}
	var out []*corev1.LimitRange
	for _, o := range objs {
		lr := &corev1.LimitRange{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, lr); err != nil {
			c.problem("LimitRange %s/%s could not be read: %v", ns, o.GetName(), err)
			continue
		}
		out = append(out, lr)
	}
	return out
}

// limitPod runs a pod through the namespace's LimitRanges as LimitRanger
// does: each one's defaults set, then each one's bounds checked. It
// returns the pod with the defaults set, or what refuses it.
func (c *checker) limitPod(pod *corev1.Pod, ns string, refused drift.DangerReason) (*finding, *corev1.Pod) {
	lrs := c.limits[ns]
	if len(lrs) == 0 {
		return nil, nil
	}
	var in api.Pod
	if err := object.BuiltinScheme().Convert(pod, &in, nil); err != nil {
		c.problem("the LimitRanges of namespace %s could not be checked: %v", ns, err)
		return nil, nil
	}
	for _, lr := range lrs {
		_ = limitranger.PodMutateLimitFunc(lr, &in) // it returns no error
	}
	for _, lr := range lrs {
		if err := limitranger.PodValidateLimitFunc(lr, &in); err != nil {
			return &finding{reason: refused, rule: "limitrange " + lr.Name,
				message: fmt.Sprintf("LimitRange %s refuses %s: %v", lr.Name, pod.GenerateName+pod.Name, err)}, nil
		}
	}
	out := &corev1.Pod{}
	if err := object.BuiltinScheme().Convert(&in, out, nil); err != nil {
		c.problem("the LimitRanges of namespace %s could not be checked: %v", ns, err)
		return nil, nil
	}
	out.APIVersion, out.Kind = "v1", "Pod"
	return nil, out
}

// limitClaim checks a PersistentVolumeClaim's storage request against the
// namespace's LimitRanges.
func (c *checker) limitClaim(o *unstructured.Unstructured, ns string) *finding {
	lrs := c.limits[ns]
	if len(lrs) == 0 {
		return nil
	}
	var v1pvc corev1.PersistentVolumeClaim
	var in api.PersistentVolumeClaim
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &v1pvc); err != nil {
		return nil // the apply's own validation says it
	}
	if err := object.BuiltinScheme().Convert(&v1pvc, &in, nil); err != nil {
		return nil
	}
	for _, lr := range lrs {
		if err := limitranger.PersistentVolumeClaimValidateLimitFunc(lr, &in); err != nil {
			return &finding{reason: drift.DangerAdmissionRefused, rule: "limitrange " + lr.Name, message: fmt.Sprintf("LimitRange %s refuses it: %v", lr.Name, err)}
		}
	}
	return nil
}

// evaluators are the quota evaluators kube-apiserver's ResourceQuota
// plugin registers: pods, services and claims by what they use, the rest
// by count.
var evaluators = sync.OnceValue(func() quota.Registry {
	es := []quota.Evaluator{core.NewPodEvaluator(nil, clock.RealClock{}), core.NewServiceEvaluator(nil), core.NewPersistentVolumeClaimEvaluator(nil)}
	for gvr, alias := range map[schema.GroupVersionResource]corev1.ResourceName{
		corev1.SchemeGroupVersion.WithResource("configmaps"):             corev1.ResourceConfigMaps,
		corev1.SchemeGroupVersion.WithResource("resourcequotas"):         corev1.ResourceQuotas,
		corev1.SchemeGroupVersion.WithResource("replicationcontrollers"): corev1.ResourceReplicationControllers,
		corev1.SchemeGroupVersion.WithResource("secrets"):                corev1.ResourceSecrets,
	} {
		es = append(es, generic.NewObjectCountEvaluator(gvr.GroupResource(), nil, alias))
	}
	return generic.NewRegistry(es)
})

func evaluatorFor(gr schema.GroupResource) quota.Evaluator {
	if e := evaluators().Get(gr); e != nil {
		return e
	}
	return generic.NewObjectCountEvaluator(gr, nil, "")
}

// checkQuotas counts the sync against each namespace's quotas as the
// ResourceQuota plugin does, from the usage the quotas' status holds: the
// objects it creates or changes first, in order, then the pods of each
// workload it changes, whose old pods (the live workload's) give back what
// they use. It is the steady state: the extra pods of a rolling update's
// surge are not counted.
func (c *checker) checkQuotas() {
	for _, ch := range c.changed {
		st := c.quotas[ch.ref.Namespace]
		if st == nil || ch.refused {
			continue
		}
		k, ok := c.kindOf(ch.ref.GVK(), true)
		if !ok {
			continue
		}
		obj, err := typed(masked(ch.head))
		if err != nil {
			continue
		}
		if ch.pods != nil && ch.pods.direct {
			obj = ch.pods.pod // with what LimitRanger sets
		}
		var old runtime.Object
		if ch.live != nil {
			if old, err = typed(masked(ch.live)); err != nil {
				continue
			}
		}
		gvr := ch.ref.GVK().GroupVersion().WithResource(k.Resource)
		if err := st.admit(obj, old, ch.ref.GVK(), gvr, c.opts.Applier); err != nil {
			c.danger(ch.at, drift.Danger{Reason: drift.DangerAdmissionRefused, Message: err.Error()})
		}
	}
	for _, ch := range c.changed {
		st := c.quotas[ch.ref.Namespace]
		if st == nil || ch.pods == nil || ch.pods.direct || ch.refused || ch.podsRefused {
			continue
		}
		n := ch.pods.replicas
		if _, set, _ := unstructured.NestedFieldNoCopy(ch.head.Object, "spec", "replicas"); !set && ch.live != nil {
			// Git leaves the count to someone else (an autoscaler): the
			// live count stays.
			if live, found, _ := unstructured.NestedInt64(ch.live.Object, "spec", "replicas"); found {
				n = int(live)
			}
		}
		if ch.live != nil && (ch.ref.Kind == "Deployment" || ch.ref.Kind == "StatefulSet" || ch.ref.Kind == "ReplicaSet" || ch.ref.Kind == "ReplicationController") {
			if old, err := podsOf(ch.live); err == nil && old != nil && old.replicas > 0 {
				if f, pod := c.limitPod(old.pod, ch.ref.Namespace, drift.DangerPodsRefused); f == nil && pod != nil {
					old.pod = pod
				}
				st.release(old.pod, old.replicas)
			}
		}
		if n < 0 {
			n = 1 // a DaemonSet: its pods are one per node; one is checked
		}
		// One pod as the plugin counts it, then as many more as surely
		// fit at once, then the next: the first refused one says why.
		for i := 0; i < n; {
			pod := ch.pods.pod.DeepCopy()
			pod.Name = fmt.Sprintf("%s%d", pod.GenerateName, i)
			err := st.admit(pod, nil, corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithResource("pods"), ch.pods.creator)
			if err != nil {
				msg := strings.Replace(err.Error(), fmt.Sprintf("pods %q is forbidden: ", pod.Name), "", 1)
				c.danger(ch.at, drift.Danger{Reason: drift.DangerPodsRefused, Count: n - i,
					Message: fmt.Sprintf("%s of its %s cannot be created: %s", plural(n-i, "pod"), plural(n, "pod"), msg)})
				break
			}
			i++
			i += st.take(pod, n-i-1)
		}
	}
}

// take counts up to n more pods like pod against the quotas at once, as
// many as fit in every quota that counts it with room to spare for one
// more, and says how many it counted.
func (st *quotaState) take(pod *corev1.Pod, n int) int {
	if n <= 0 {
		return 0
	}
	e := evaluatorFor(corev1.Resource("pods"))
	usage, err := e.Usage(pod)
	if err != nil {
		return 0
	}
	fit := n
	var counting []int
	for i := range st.quotas {
		q := &st.quotas[i]
		if ok, err := e.Matches(q, pod); err != nil || !ok {
			continue
		}
		counting = append(counting, i)
		for r, hard := range q.Status.Hard {
			u, ok := usage[r]
			if !ok || u.IsZero() {
				continue
			}
			used := q.Status.Used[r]
			fit = min(fit, int((hard.MilliValue()-used.MilliValue())/u.MilliValue()))
		}
	}
	if fit <= 0 {
		return 0
	}
	for _, i := range counting {
		q := &st.quotas[i]
		q.Status.Used = quota.Add(q.Status.Used, quota.Mask(times(usage, fit), quota.ResourceNames(q.Status.Hard)))
	}
	return fit
}

// times is usage n times over.
func times(usage corev1.ResourceList, n int) corev1.ResourceList {
	out := corev1.ResourceList{}
	for r, q := range usage {
		out[r] = *resource.NewMilliQuantity(q.MilliValue()*int64(n), q.Format)
	}
	return out
}

// admit counts one request against the quotas, as the plugin's
// CheckRequest does, and keeps the usage it adds.
func (st *quotaState) admit(obj, old runtime.Object, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, u user.Info) error {
	op, opts := admission.Create, runtime.Object(&metav1.CreateOptions{})
	if old != nil {
		op, opts = admission.Update, &metav1.UpdateOptions{}
	}
	name, ns := "", ""
	if m, ok := obj.(metav1.Object); ok {
		name, ns = m.GetName(), m.GetNamespace()
	}
	a := admission.NewAttributesRecord(obj, old, gvk, ns, name, gvr, "", op, opts, false, u)
	quotas, err := resourcequota.CheckRequest(st.quotas, a, evaluatorFor(gvr.GroupResource()), nil)
	if err != nil {
		return err
	}
	st.quotas = quotas
	return nil
}

// release gives back what n pods of a workload use: the old pods the
// change replaces.
func (st *quotaState) release(pod *corev1.Pod, n int) {
	e := evaluatorFor(corev1.Resource("pods"))
	usage, err := e.Usage(pod)
	if err != nil {
		return
	}
	total := corev1.ResourceList{}
	for range n {
		total = quota.Add(total, usage)
	}
	for i := range st.quotas {
		q := &st.quotas[i]
		if ok, err := e.Matches(q, pod); err == nil && ok {
			q.Status.Used = quota.SubtractWithNonNegativeResult(q.Status.Used, quota.Mask(total, quota.ResourceNames(q.Status.Used)))
		}
	}
}

// typed is a built-in object in its Go type, as the quota evaluators read
// it.
func typed(u *unstructured.Unstructured) (runtime.Object, error) {
	gvk := u.GroupVersionKind()
	if !object.BuiltinScheme().Recognizes(gvk) {
		return u, nil
	}
	obj, err := object.BuiltinScheme().New(gvk)
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}
