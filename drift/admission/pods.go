package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/driftback/driftback/drift/object"
)

// pods is what a workload's controller creates: a pod built from its
// template, as the apiserver will receive it.
type pods struct {
	pod *corev1.Pod
	// replicas is how many run at once; -1 when the cluster decides (a
	// DaemonSet: one per node).
	replicas int
	// creator is the controller that creates them: the user admission
	// sees.
	creator user.Info
	// direct says the object is the Pod itself.
	direct bool
}

// templatePath is where each workload kind holds its pod template, with the
// field counting its pods and the controller that creates them.
var templatePath = map[string]struct {
	template []string
	replicas []string
	creator  string
}{
	"apps/Deployment":        {[]string{"spec", "template"}, []string{"spec", "replicas"}, "replicaset-controller"},
	"apps/ReplicaSet":        {[]string{"spec", "template"}, []string{"spec", "replicas"}, "replicaset-controller"},
	"apps/StatefulSet":       {[]string{"spec", "template"}, []string{"spec", "replicas"}, "statefulset-controller"},
	"apps/DaemonSet":         {[]string{"spec", "template"}, nil, "daemon-set-controller"},
	"/ReplicationController": {[]string{"spec", "template"}, []string{"spec", "replicas"}, "replication-controller"},
	"batch/Job":              {[]string{"spec", "template"}, []string{"spec", "parallelism"}, "job-controller"},
	"batch/CronJob":          {[]string{"spec", "jobTemplate", "spec", "template"}, []string{"spec", "jobTemplate", "spec", "parallelism"}, "job-controller"},
}

// podsOf builds the pod a workload's controller creates (nil for an object
// that makes no pods), defaulted as the apiserver defaults it.
func podsOf(o *unstructured.Unstructured) (*pods, error) {
	gvk := o.GroupVersionKind()
	if gvk.Group == "" && gvk.Kind == "Pod" {
		pod := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, pod); err != nil {
			return nil, fmt.Errorf("read %s: %w", object.RefOf(o), err)
		}
		defaultPod(pod)
		return &pods{pod: pod, replicas: 1, direct: true}, nil
	}
	at, ok := templatePath[gvk.Group+"/"+gvk.Kind]
	if !ok {
		return nil, nil
	}
	tm, found, err := unstructured.NestedMap(o.Object, at.template...)
	if err != nil || !found {
		return nil, err
	}
	var tmpl corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tm, &tmpl); err != nil {
		return nil, fmt.Errorf("read the pod template of %s: %w", object.RefOf(o), err)
	}
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Namespace, pod.Name, pod.GenerateName = o.GetNamespace(), "", o.GetName()+"-"
	defaultPod(pod)
	p := &pods{pod: pod, replicas: -1, creator: serviceAccount("kube-system", at.creator)}
	if at.replicas != nil {
		p.replicas = 1
		if n, found, _ := unstructured.NestedInt64(o.Object, at.replicas...); found {
			p.replicas = int(n)
		}
	}
	return p, nil
}

// defaultPod fills what the apiserver's defaulting fills in a new pod.
func defaultPod(pod *corev1.Pod) {
	pod.APIVersion, pod.Kind = "v1", "Pod"
	object.BuiltinScheme().Default(pod)
}

// podAttrsName names a workload's pods for a reader: "pods of
// Deployment/shop/web".
func podAttrsName(o *unstructured.Unstructured) string {
	return "pods of " + object.RefOf(o).String()
}
