package admission_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/admission"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/kubetest"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// objs reads YAML documents, placing namespaced ones in ns.
func objs(t *testing.T, ns string, docs ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(strings.ReplaceAll(d, "NS", ns)), &u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// check runs a check of head (with base) against the live cluster, each
// object of head a create, or an update where base has it.
func check(t *testing.T, env *kubetest.Env, base, head []*unstructured.Unstructured, opts admission.Options) *drift.Target {
	t.Helper()
	live, err := livestate.NewClusterReader(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	inBase := map[string]bool{}
	for _, o := range base {
		inBase[object.RefOf(o).Key()] = true
	}
	tg := &drift.Target{}
	for _, o := range head {
		a := drift.ActionCreate
		if inBase[object.RefOf(o).Key()] {
			a = drift.ActionUpdate
		}
		tg.Changes = append(tg.Changes, drift.Change{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), Action: a})
	}
	admission.Check(context.Background(), live, nil, admission.Input{Base: base, Head: head}, opts, tg)
	return tg
}

// dangers lists a target's dangers as "Kind/name reason", with Before
// marked.
func dangers(tg *drift.Target) map[string]drift.Danger {
	out := map[string]drift.Danger{}
	for _, c := range tg.Changes {
		for _, d := range c.Danger {
			out[c.Kind+"/"+c.Name+" "+string(d.Reason)] = d
		}
	}
	return out
}

// apiserverRefuses creates obj in ns (a pod built from a workload's
// template, for a workload) with the test's admin credentials and says
// what the apiserver answers: "" when it admits it. The pod is created
// server-side, admission and all, and deleted again.
func apiserverRefuses(t *testing.T, env *kubetest.Env, ns string, o *unstructured.Unstructured, asPod bool) string {
	t.Helper()
	ctx := context.Background()
	if asPod {
		tmpl, _, _ := unstructured.NestedMap(o.Object, "spec", "template")
		if o.GetKind() == "CronJob" {
			tmpl, _, _ = unstructured.NestedMap(o.Object, "spec", "jobTemplate", "spec", "template")
		}
		var pt corev1.PodTemplateSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pt); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: pt.ObjectMeta, Spec: pt.Spec}
		pod.Namespace, pod.GenerateName = ns, o.GetName()+"-"
		got, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return err.Error()
		}
		_ = env.Client.CoreV1().Pods(ns).Delete(ctx, got.Name, metav1.DeleteOptions{})
		return ""
	}
	c := o.DeepCopy()
	if c.GetNamespace() != "" {
		c.SetNamespace(ns)
	}
	a, err := kubetest.NewApplier(env.Setup)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply("test", c); err != nil {
		return err.Error()
	}
	return ""
}

func serviceAccount(t *testing.T, env *kubetest.Env, ns string) {
	t.Helper()
	_, err := env.Client.CoreV1().ServiceAccounts(ns).Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func label(t *testing.T, env *kubetest.Env, ns string, labels map[string]string) {
	t.Helper()
	n, err := env.Client.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for k, v := range labels {
		n.Labels[k] = v
	}
	if _, err := env.Client.CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func deployment(name string, replicas int, container string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %s, namespace: NS}
spec:
  replicas: %d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers:
%[3]s`, name, replicas, container)
}

const (
	restrictedContainer = `      - name: app
        image: registry.example.com/app:1
        securityContext:
          allowPrivilegeEscalation: false
          runAsNonRoot: true
          capabilities: {drop: [ALL]}
          seccompProfile: {type: RuntimeDefault}
`
	privilegedContainer = `      - name: app
        image: registry.example.com/app:1
        securityContext: {privileged: true}
`
)

// refused says whether a target's change of kind/name carries a danger of
// the given reason, not one marked Before.
func refused(tg *drift.Target, kind, name string, reason drift.DangerReason) bool {
	for _, c := range tg.Changes {
		if c.Kind != kind || c.Name != name {
			continue
		}
		for _, d := range c.Danger {
			if d.Reason == reason && !d.Before {
				return true
			}
		}
	}
	return false
}

// agree creates each object of head in ns, and a pod of each workload's
// template, and fails where the apiserver's verdict differs from the
// check's: admission-refused for the object, pods-refused for its pod.
func agree(t *testing.T, env *kubetest.Env, ns string, tg *drift.Target, head []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range head {
		ours := refused(tg, o.GetKind(), o.GetName(), drift.DangerAdmissionRefused)
		theirs := apiserverRefuses(t, env, ns, o, false)
		if ours != (theirs != "") {
			t.Errorf("%s/%s: driftback refuses it: %v; the apiserver: %q; driftback's dangers: %v", o.GetKind(), o.GetName(), ours, theirs, dangers(tg))
		}
		if _, workload, _ := unstructured.NestedMap(o.Object, "spec", "template"); !workload && o.GetKind() != "CronJob" {
			continue
		}
		ours = refused(tg, o.GetKind(), o.GetName(), drift.DangerPodsRefused)
		theirs = apiserverRefuses(t, env, ns, o, true)
		if ours != (theirs != "") {
			t.Errorf("pods of %s/%s: driftback refuses them: %v; the apiserver: %q; driftback's dangers: %v", o.GetKind(), o.GetName(), ours, theirs, dangers(tg))
		}
	}
}

// TestPodSecurityAsTheAPIServerEnforcesIt: in a namespace enforcing
// restricted, a Deployment whose pods run privileged has its pods refused
// (the Deployment itself is applied), a privileged Pod is refused outright,
// a restricted Deployment passes; warn=restricted over enforce=baseline
// only warns. Each verdict is the apiserver's own: the same pods created
// there are refused or admitted alike.
func TestPodSecurityAsTheAPIServerEnforcesIt(t *testing.T) {
	env := kubetest.New(t)
	ns := env.Namespace
	label(t, env, ns, map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"})
	serviceAccount(t, env, ns)
	head := objs(t, ns, deployment("web", 2, restrictedContainer), deployment("root", 1, privilegedContainer),
		"apiVersion: v1\nkind: Pod\nmetadata: {name: debug, namespace: NS}\nspec:\n  containers:\n"+privilegedContainer)
	tg := check(t, env, nil, head, admission.Options{})
	d := dangers(tg)
	if _, ok := d["Deployment/root pods-refused"]; !ok || !strings.Contains(d["Deployment/root pods-refused"].Message, `violates PodSecurity "restricted:latest"`) {
		t.Errorf("Deployment/root: %v; want its pods refused by restricted:latest", d)
	}
	if _, ok := d["Pod/debug admission-refused"]; !ok {
		t.Errorf("Pod/debug: %v; want it refused", d)
	}
	if refused(tg, "Deployment", "web", drift.DangerPodsRefused) || len(d) != 2 {
		t.Errorf("dangers %v; want only root's pods and the debug Pod", d)
	}
	agree(t, env, ns, tg, head)

	// warn above enforce: a warning, nothing refused.
	other := kubetest.New(t)
	label(t, other, other.Namespace, map[string]string{"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "restricted"})
	serviceAccount(t, other, other.Namespace)
	head = objs(t, other.Namespace, deployment("root", 1, "      - {name: app, image: registry.example.com/app:1}\n"))
	tg = check(t, other, nil, head, admission.Options{})
	d = dangers(tg)
	if w, ok := d["Deployment/root admission-warning"]; !ok || len(d) != 1 || !strings.Contains(w.Message, "would violate PodSecurity \"restricted:latest\" (warn") {
		t.Errorf("warn=restricted: %v; want one admission-warning", d)
	}
	agree(t, other, other.Namespace, tg, head)
}

// warnings collects the apiserver's warning headers.
type warnings struct{ got []string }

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) { w.got = append(w.got, text) }

// TestTighteningANamespaceNamesTheWorkloadsItWillRefuse: a pull request
// that raises a namespace's enforce level from baseline to restricted is
// told which running workloads' pods the new level refuses (a Deployment
// running as root, not a restricted one, not one the pull request itself
// changes), as the apiserver warns when the same label is set.
func TestTighteningANamespaceNamesTheWorkloadsItWillRefuse(t *testing.T) {
	env := kubetest.New(t)
	ns := env.Namespace
	label(t, env, ns, map[string]string{"pod-security.kubernetes.io/enforce": "baseline"})
	serviceAccount(t, env, ns)
	running := objs(t, ns, deployment("root", 1, "      - {name: app, image: registry.example.com/app:1}\n"), deployment("web", 1, restrictedContainer),
		deployment("changing", 1, "      - {name: app, image: registry.example.com/app:1}\n"))
	kubetest.Apply(t, env.Setup, "kustomize-controller", running...)
	// A pod of the root Deployment runs, as its controller made it.
	if msg := apiserverRefuses(t, env, ns, running[0], true); msg != "" {
		t.Fatal(msg)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "root-1", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}}}
	if _, err := env.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nsYAML := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: NS\n  labels: {pod-security.kubernetes.io/enforce: %s}\n"
	base := append(objs(t, ns, fmt.Sprintf(nsYAML, "baseline")), running[2])
	head := objs(t, ns, fmt.Sprintf(nsYAML, "restricted"), deployment("changing", 2, "      - {name: app, image: registry.example.com/app:1}\n"))
	tg := check(t, env, base, head, admission.Options{})
	d := dangers(tg)
	got, ok := d["Namespace/"+ns+" pods-refused"]
	if !ok || got.Count != 2 || len(got.Lost) != 2 || got.Lost[0].Name != "root" || got.Lost[1].Kind != "Pod" || !strings.Contains(got.Message, `from "baseline:latest" to "restricted:latest"`) {
		t.Fatalf("the namespace's tightening: %+v; want Deployment root and Pod root-1 named", d)
	}
	if _, ok := d["Deployment/changing pods-refused"]; !ok {
		t.Errorf("the Deployment the change also changes: %v; want its pods refused under the new level", d)
	}
	// The apiserver says the same when the label is set.
	w := &warnings{}
	cfg := *env.Setup
	cfg.WarningHandler = w
	a, err := kubetest.NewApplier(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply("test", head[0]); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(w.got, "\n"), `existing pods in namespace "`+ns+`" violate the new PodSecurity enforce level "restricted:latest"`) {
		t.Errorf("the apiserver's warnings: %q", w.got)
	}
	// Loosening it again names nothing.
	tg = check(t, env, head[:1], objs(t, ns, fmt.Sprintf(nsYAML, "baseline")), admission.Options{})
	if d := dangers(tg); len(d) != 0 {
		t.Errorf("loosening: %v", d)
	}
}

// policy installs a ValidatingAdmissionPolicy and its binding, and waits
// until the apiserver enforces it (its informer has seen both).
func policy(t *testing.T, env *kubetest.Env, probe *unstructured.Unstructured, docs ...string) {
	t.Helper()
	kubetest.Apply(t, env.Setup, "test", objs(t, env.Namespace, docs...)...)
	// A new name each time: applying an object unchanged does not go
	// through admission again.
	try := 0
	kubetest.Eventually(t, 30*time.Second, "the policy to be enforced", func() bool {
		try++
		p := probe.DeepCopy()
		p.SetName(fmt.Sprintf("%s-%d", p.GetName(), try))
		return apiserverRefuses(t, env, env.Namespace, p, false) != ""
	})
}

// TestValidatingAdmissionPoliciesAsTheAPIServerRunsThem: the cluster's
// policies, evaluated with the apiserver's CEL libraries on what the head
// renders: a Deployment over the replica bound its ConfigMap parameter
// sets is refused (the sync fails), one within it passes; pods whose
// template uses a :latest image are refused where a policy matches pods
// (their Deployment is applied); a Warn binding only warns; a binding whose
// parameter is missing denies, as parameterNotFoundAction says. The same
// objects and pods created on the apiserver meet the same verdicts.
func TestValidatingAdmissionPoliciesAsTheAPIServerRunsThem(t *testing.T) {
	env := kubetest.New(t)
	ns := env.Namespace
	serviceAccount(t, env, ns)
	label(t, env, ns, map[string]string{"policy-test": ns})
	probe := objs(t, ns, deployment("probe", 9, restrictedContainer))[0]
	policy(t, env, probe, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replicas-NS}
spec:
  failurePolicy: Fail
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - expression: "object.spec.replicas <= int(params.data.max)"
    messageExpression: "'replicas ' + string(object.spec.replicas) + ' over ' + params.data.max"
`, `apiVersion: v1
kind: ConfigMap
metadata: {name: limits, namespace: NS}
data: {max: "5"}
`, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replicas-NS}
spec:
  policyName: replicas-NS
  validationActions: [Deny]
  paramRef: {name: limits, parameterNotFoundAction: Deny}
  matchResources:
    namespaceSelector: {matchLabels: {policy-test: NS}}
`)
	podProbe := objs(t, ns, "apiVersion: v1\nkind: Pod\nmetadata: {name: probe, namespace: NS}\nspec:\n  containers:\n  - {name: app, image: registry.example.com/app:latest}\n")[0]
	policy(t, env, podProbe, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: pinned-NS}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - expression: "object.spec.containers.all(c, !c.image.endsWith(':latest'))"
    message: "images must be pinned"
`, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: pinned-NS}
spec:
  policyName: pinned-NS
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {policy-test: NS}}
`)
	latest := "      - {name: app, image: registry.example.com/app:latest}\n"
	head := objs(t, ns, deployment("big", 8, restrictedContainer), deployment("small", 2, restrictedContainer), deployment("floating", 1, latest))
	tg := check(t, env, nil, head, admission.Options{})
	d := dangers(tg)
	if got := d["Deployment/big admission-refused"]; !strings.Contains(got.Message, "ValidatingAdmissionPolicy 'replicas-"+ns+"' with binding 'replicas-"+ns+"' denied request: replicas 8 over 5") {
		t.Errorf("Deployment/big: %v; want refused with the policy's message", d)
	}
	if got := d["Deployment/floating pods-refused"]; !strings.Contains(got.Message, "images must be pinned") {
		t.Errorf("Deployment/floating: %v; want its pods refused", d)
	}
	if len(d) != 2 || len(tg.Errors) > 0 {
		t.Errorf("dangers %v, errors %v; want big's and floating's pods only", d, tg.Errors)
	}
	agree(t, env, ns, tg, head)

	// A Warn binding warns; a missing parameter denies as the binding says.
	kubetest.Apply(t, env.Setup, "test", objs(t, ns, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: pinned-NS}
spec:
  policyName: pinned-NS
  validationActions: [Warn]
  matchResources:
    namespaceSelector: {matchLabels: {policy-test: NS}}
`)...)
	tg = check(t, env, nil, head[1:], admission.Options{})
	if d := dangers(tg); len(d) != 1 || !strings.Contains(d["Deployment/floating admission-warning"].Message, "images must be pinned") {
		t.Errorf("a Warn binding: %v; want one warning", d)
	}
	// Without its parameter, the binding refuses every Deployment: their
	// pods are never made, so nothing is said of them.
	if err := env.Client.CoreV1().ConfigMaps(ns).Delete(context.Background(), "limits", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tg = check(t, env, nil, head[1:], admission.Options{})
	d = dangers(tg)
	for _, name := range []string{"small", "floating"} {
		if got := d["Deployment/"+name+" admission-refused"]; !strings.Contains(got.Message, "no params found for policy binding with `Deny` parameterNotFoundAction") {
			t.Errorf("a missing parameter: %v; want Deployment/%s refused", d, name)
		}
	}
	if len(d) != 2 {
		t.Errorf("a missing parameter: %v; want the two Deployments refused, nothing of their pods", d)
	}
	try := 0
	kubetest.Eventually(t, 30*time.Second, "the apiserver to see the parameter gone", func() bool {
		try++
		p := head[1].DeepCopy()
		p.SetName(fmt.Sprintf("small-%d", try))
		return strings.Contains(apiserverRefuses(t, env, ns, p, false), "no params found for policy binding with `Deny` parameterNotFoundAction")
	})
}

// TestQuotasAndLimitRangesAsTheAPIServerCountsThem: a namespace's
// ResourceQuota, with what is live counted (its status, as the quota
// controller keeps it: here the apiserver's own admission moves it as the
// test creates pods), and its LimitRange (defaults set before the quota
// counts, bounds checked). Scaling a Deployment from 2 to 4 pods where the
// quota allows 3 refuses 1 of them; a third ConfigMap over a count of 2
// fails the sync; a container over the LimitRange's maximum has its pods
// refused; a claim over the maximum storage is refused. Within the bounds,
// nothing. The apiserver, given the same objects and pods, agrees.
func TestQuotasAndLimitRangesAsTheAPIServerCountsThem(t *testing.T) {
	env := kubetest.New(t)
	ns := env.Namespace
	serviceAccount(t, env, ns)
	ctx := context.Background()
	kubetest.Apply(t, env.Setup, "test", objs(t, ns, `apiVersion: v1
kind: LimitRange
metadata: {name: limits, namespace: NS}
spec:
  limits:
  - type: Container
    max: {cpu: 500m}
    default: {cpu: 200m, memory: 64Mi}
    defaultRequest: {cpu: 100m, memory: 32Mi}
  - type: PersistentVolumeClaim
    max: {storage: 1Gi}
`, `apiVersion: v1
kind: ResourceQuota
metadata: {name: compute, namespace: NS}
spec:
  hard: {pods: "3", requests.cpu: "1", count/configmaps: "3"}
`)...)
	// What the quota controller would write: the quota's hard limits and
	// usage (the namespace holds nothing yet but kube-root-ca.crt, which no
	// controller makes here).
	q, err := env.Client.CoreV1().ResourceQuotas(ns).Get(ctx, "compute", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Status.Hard = q.Spec.Hard
	q.Status.Used = corev1.ResourceList{"pods": resource.MustParse("0"), "requests.cpu": resource.MustParse("0"), "count/configmaps": resource.MustParse("0")}
	if _, err := env.Client.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	noLimits := "      - {name: app, image: registry.example.com/app:1}\n"
	web := objs(t, ns, deployment("web", 2, noLimits))
	kubetest.Apply(t, env.Setup, "kustomize-controller", web...)
	// Its two pods, as its controller creates them: the apiserver's quota
	// admission counts them into the quota's status.
	if n := podsAdmitted(t, env, ns, web[0], 2); n != 2 {
		t.Fatalf("%d of web's 2 live pods admitted", n)
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: NS}\n"
	kubetest.Apply(t, env.Setup, "test", objs(t, ns, fmt.Sprintf(cm, "one"))...)
	base := objs(t, ns, deployment("web", 2, noLimits), fmt.Sprintf(cm, "one"))
	head := objs(t, ns, deployment("web", 4, noLimits), fmt.Sprintf(cm, "one"), fmt.Sprintf(cm, "two"), fmt.Sprintf(cm, "three"), fmt.Sprintf(cm, "four"),
		deployment("greedy", 1, "      - {name: app, image: registry.example.com/app:1, resources: {limits: {cpu: \"1\"}}}\n"),
		"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: big, namespace: NS}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 5Gi}}\n",
		"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: small, namespace: NS}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n")
	tg := check(t, env, base, head[:1], admission.Options{})
	// One, unchanged, is no change of the sync.
	tg2 := check(t, env, base, head[2:], admission.Options{})
	tg.Changes = append(tg.Changes, tg2.Changes...)
	d := dangers(tg)
	webPods := d["Deployment/web pods-refused"]
	if webPods.Count != 1 || !strings.Contains(webPods.Message, "1 pod of its 4 pods cannot be created: exceeded quota: compute, requested: pods=1, used: pods=3, limited: pods=3") {
		t.Errorf("web scaled to 4: %+v; want 1 of its pods refused by quota compute", webPods)
	}
	if got := d["ConfigMap/four admission-refused"]; !strings.Contains(got.Message, "exceeded quota: compute") {
		t.Errorf("a fourth ConfigMap: %v; want it refused", d)
	}
	if got := d["Deployment/greedy pods-refused"]; !strings.Contains(got.Message, "maximum cpu usage per Container is 500m, but limit is 1") {
		t.Errorf("greedy: %v; want its pods refused by the LimitRange", d)
	}
	if got := d["PersistentVolumeClaim/big admission-refused"]; !strings.Contains(got.Message, "maximum storage usage per PersistentVolumeClaim is 1Gi, but request is 5Gi") {
		t.Errorf("claim big: %v; want it refused by the LimitRange", d)
	}
	if len(d) != 4 || len(tg.Errors)+len(tg2.Errors) > 0 {
		t.Errorf("dangers %v, errors %v %v; want four", d, tg.Errors, tg2.Errors)
	}
	// The apiserver: web's two new pods (one fits), the ConfigMaps in
	// order, greedy's pod, the claims.
	if n := podsAdmitted(t, env, ns, head[0], 2); n != 1 {
		t.Errorf("the apiserver admitted %d of web's 2 new pods; driftback says 1 is refused", n)
	}
	for _, o := range head[2:] {
		ours := refused(tg, o.GetKind(), o.GetName(), drift.DangerAdmissionRefused)
		if theirs := apiserverRefuses(t, env, ns, o, false); ours != (theirs != "") {
			t.Errorf("%s/%s: driftback refuses it: %v; the apiserver: %q", o.GetKind(), o.GetName(), ours, theirs)
		}
	}
	if n := podsAdmitted(t, env, ns, head[5], 1); n != 0 {
		t.Errorf("the apiserver admitted greedy's pod")
	}
}

// podsAdmitted creates n pods of a workload's template in ns, kept, and
// says how many the apiserver admitted.
func podsAdmitted(t *testing.T, env *kubetest.Env, ns string, o *unstructured.Unstructured, n int) int {
	t.Helper()
	tmpl, _, _ := unstructured.NestedMap(o.Object, "spec", "template")
	var pt corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pt); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range n {
		pod := &corev1.Pod{ObjectMeta: pt.ObjectMeta, Spec: pt.Spec}
		pod.Namespace, pod.GenerateName = ns, o.GetName()+"-"
		if _, err := env.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err == nil {
			admitted++
		} else {
			t.Logf("pod of %s: %v", o.GetName(), err)
		}
	}
	return admitted
}

// crd is a small CustomResourceDefinition of group example.com with the
// annotations a project's install bundle puts on it.
func crd(plural, kind, channel, version string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.upgrades-NS.example.com
  annotations: {example.com/channel: %[3]s, example.com/bundle-version: %[4]s}
spec:
  group: upgrades-NS.example.com
  scope: Namespaced
  names: {plural: %[1]s, kind: %[2]s}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, plural, kind, channel, version)
}

// TestAnUpgradePolicySeesTheOldObject: the shape of the policies projects
// ship with their CRDs to guard upgrades (seen in a public GitOps
// repository that vendors one): written with a namespace though
// cluster-scoped, matching every resource of a group while its binding
// narrows it, comparing object with oldObject (null on a create) and
// matching a version annotation with a regular expression. An update that
// moves a CRD from the stable channel to the preview one, and a create of
// an old bundle version, are refused, as the apiserver refuses them; a
// stable, current one passes.
func TestAnUpgradePolicySeesTheOldObject(t *testing.T) {
	env := kubetest.New(t)
	ns := env.Namespace
	kubetest.Apply(t, env.Setup, "test", objs(t, ns, crd("widgets", "Widget", "stable", "v2.1.0"))...)
	kubetest.Apply(t, env.Setup, "test", objs(t, ns, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: upgrades-NS
  namespace: NS
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [apiextensions.k8s.io], apiVersions: [v1], operations: [CREATE, UPDATE], resources: ['*']}
  validations:
  - expression: object.spec.group != 'upgrades-NS.example.com' || oldObject == null || object.metadata.annotations['example.com/channel'] == oldObject.metadata.annotations['example.com/channel']
    message: a CRD does not change channel in place
    reason: Invalid
  - expression: object.spec.group != 'upgrades-NS.example.com' || !matches(object.metadata.annotations['example.com/bundle-version'], '^v[01]\\.')
    message: bundles before v2 are not installed
`, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: upgrades-NS
  namespace: NS
spec:
  policyName: upgrades-NS
  validationActions: [Deny]
  matchResources:
    resourceRules:
    - {apiGroups: [apiextensions.k8s.io], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [customresourcedefinitions]}
`)...)
	try := 0
	kubetest.Eventually(t, 30*time.Second, "the policy to be enforced", func() bool {
		try++
		probe := objs(t, ns, crd(fmt.Sprintf("probes%d", try), "Probe", "stable", "v0.1.0"))[0]
		return strings.Contains(apiserverRefuses(t, env, ns, probe, false), "bundles before v2 are not installed")
	})
	base := objs(t, ns, crd("widgets", "Widget", "stable", "v2.1.0"))
	head := objs(t, ns, crd("widgets", "Widget", "preview", "v2.1.0"), crd("gadgets", "Gadget", "stable", "v1.4.0"), crd("gizmos", "Gizmo", "stable", "v2.1.0"))
	tg := check(t, env, base, head, admission.Options{})
	d := dangers(tg)
	if !strings.Contains(d["CustomResourceDefinition/widgets.upgrades-"+ns+".example.com admission-refused"].Message, "a CRD does not change channel in place") ||
		!strings.Contains(d["CustomResourceDefinition/gadgets.upgrades-"+ns+".example.com admission-refused"].Message, "bundles before v2 are not installed") || len(d) != 2 || len(tg.Errors) > 0 {
		t.Errorf("dangers %v, errors %v; want widgets' channel change and gadgets' old bundle refused", d, tg.Errors)
	}
	agree(t, env, ns, tg, head)
}

// TestRulesTheCredentialsMayNotReadAreSaid: with a read role that lists
// Deployments and nothing of the rules, a comparison read through a
// snapshot (as serve and diff read) says the rules could not be read:
// never "nothing refused".
func TestRulesTheCredentialsMayNotReadAreSaid(t *testing.T) {
	env := kubetest.New(t)
	ns := env.Namespace
	ctx := context.Background()
	label(t, env, ns, map[string]string{"pod-security.kubernetes.io/enforce": "baseline"})
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-deployments"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list"}}}}
	if _, err := env.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-deployments"}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "narrow"}}}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reader, err := livestate.NewClusterReader(kubetest.Impersonate(env.Config, ns, "narrow"))
	if err != nil {
		t.Fatal(err)
	}
	head := objs(t, ns, deployment("root", 1, privilegedContainer))
	snap, err := livestate.NewSnapshot(ctx, reader, head)
	if err != nil {
		t.Fatal(err)
	}
	tg := &drift.Target{Changes: []drift.Change{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "root", Action: drift.ActionCreate}}}
	admission.Check(ctx, snap, nil, admission.Input{Head: head}, admission.Options{}, tg)
	errs := strings.Join(tg.Errors, "\n")
	for _, want := range []string{"the labels of the namespaces", "ValidatingAdmissionPolicies could not be read", "the ResourceQuotas of namespace " + ns + " could not be read", "the LimitRanges of namespace " + ns + " could not be read"} {
		if !strings.Contains(errs, want) {
			t.Errorf("errors %q lack %q", errs, want)
		}
	}
	if len(dangers(tg)) != 0 {
		t.Errorf("dangers %v from rules that were not read", dangers(tg))
	}
}
