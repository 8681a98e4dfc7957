package apidefaults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/driftback/driftback/internal/apidefaults"
	"github.com/driftback/driftback/internal/kubetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

var resources = map[string]schema.GroupVersionResource{
	"NetworkPolicy":           {Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
	"Service":                 {Version: "v1", Resource: "services"},
	"Deployment":              {Group: "apps", Version: "v1", Resource: "deployments"},
	"StatefulSet":             {Group: "apps", Version: "v1", Resource: "statefulsets"},
	"DaemonSet":               {Group: "apps", Version: "v1", Resource: "daemonsets"},
	"CronJob":                 {Group: "batch", Version: "v1", Resource: "cronjobs"},
	"Job":                     {Group: "batch", Version: "v1", Resource: "jobs"},
	"Pod":                     {Version: "v1", Resource: "pods"},
	"Ingress":                 {Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"},
	"HorizontalPodAutoscaler": {Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"},
	"ConfigMap":               {Version: "v1", Resource: "configmaps"},
}

const manifests = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: np}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - ports: [{port: 80}, {port: 53, protocol: UDP}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80}, {name: named, port: 443, targetPort: https}]
---
apiVersion: v1
kind: Service
metadata: {name: lb}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports: [{containerPort: 80}]
        resources: {limits: {cpu: "0.5"}}
        readinessProbe: {httpGet: {path: /, port: 80}}
        env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
      volumes:
      - name: cfg
        configMap: {name: cfg}
      - name: scratch
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: postgres:17}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      hostNetwork: true
      containers: [{name: a, image: busybox:latest, ports: [{containerPort: 9100}]}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: c, image: busybox}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: once}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: Pod
metadata: {name: pod}
spec:
  containers: [{name: c, image: busybox, resources: {limits: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: ing}
spec:
  rules:
  - http:
      paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: hpa}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 3
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data: {a: b}
`

// notDefaulting are the fields the apiserver fills by other means than
// defaulting and conversion: allocation (cluster IPs, node ports), admission
// plugins (priority, default tolerations) and the Job strategy's generated
// selector. A prediction never compares them: Git does not set them.
var notDefaulting = map[string][]string{
	"Service": {".spec.clusterIP", ".spec.clusterIPs", ".spec.ipFamilies", ".spec.ipFamilyPolicy", ".spec.ports[0].nodePort"},
	"Pod":     {".spec.preemptionPolicy", ".spec.priority", ".spec.tolerations"},
	"Job":     {".spec.selector", ".spec.template.metadata.labels"},
}

// TestDefaultsAgreeWithTheServer creates each object with a server-side
// dry-run apply on the real apiserver and requires the local scheme's
// defaulting and storage round trip to produce the same object, field for
// field, apart from what the server fills by other means than defaulting.
func TestDefaultsAgreeWithTheServer(t *testing.T) {
	env := kubetest.New(t)
	dyn, err := dynamic.NewForConfig(env.Setup)
	if err != nil {
		t.Fatal(err)
	}
	s := apidefaults.NewScheme()
	for _, doc := range strings.Split(manifests, "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetNamespace(env.Namespace)
		t.Run(u.GetKind()+"/"+u.GetName(), func(t *testing.T) {
			body, _ := json.Marshal(u.Object)
			force := true
			srv, err := dyn.Resource(resources[u.GetKind()]).Namespace(env.Namespace).Patch(context.Background(), u.GetName(), types.ApplyPatchType, body,
				metav1.PatchOptions{FieldManager: "t", Force: &force, DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				t.Fatal(err)
			}
			obj, err := s.New(u.GroupVersionKind())
			if err != nil {
				t.Fatal(err)
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
				t.Fatal(err)
			}
			s.Default(obj)
			stored, err := apidefaults.Store(s, obj)
			if err != nil {
				t.Fatal(err)
			}
			local, err := runtime.DefaultUnstructuredConverter.ToUnstructured(stored)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range []map[string]any{srv.Object, local} {
				delete(o, "metadata")
				delete(o, "status")
			}
			var onlyServer, onlyLocal []string
			walk("", normalize(srv.Object), normalize(local), &onlyServer, &onlyLocal)
			var unexplained []string
			for _, f := range onlyServer {
				if !filled(u.GetKind(), f) {
					unexplained = append(unexplained, f)
				}
			}
			sort.Strings(unexplained)
			sort.Strings(onlyLocal)
			if len(unexplained) > 0 || len(onlyLocal) > 0 {
				t.Errorf("the server set %v that local defaulting did not; local defaulting set %v that the server did not", unexplained, onlyLocal)
			}
		})
	}
}

// filled says the server-only field f (path=value) of kind is set by other
// means than defaulting.
func filled(kind, f string) bool {
	path, _, _ := strings.Cut(f, "=")
	for _, p := range notDefaulting[kind] {
		if path == p {
			return true
		}
	}
	return false
}

func normalize(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func walk(path string, s, l any, onlyS, onlyL *[]string) {
	sm, sok := s.(map[string]any)
	lm, lok := l.(map[string]any)
	if sok && lok {
		for k := range sm {
			walk(path+"."+k, sm[k], lm[k], onlyS, onlyL)
		}
		for k := range lm {
			if _, ok := sm[k]; !ok {
				walk(path+"."+k, nil, lm[k], onlyS, onlyL)
			}
		}
		return
	}
	sl, sok := s.([]any)
	ll, lok := l.([]any)
	if sok && lok && len(sl) == len(ll) {
		for i := range sl {
			walk(fmt.Sprintf("%s[%d]", path, i), sl[i], ll[i], onlyS, onlyL)
		}
		return
	}
	if reflect.DeepEqual(s, l) {
		return
	}
	switch {
	case l == nil:
		*onlyS = append(*onlyS, fmt.Sprintf("%s=%v", path, s))
	case s == nil:
		*onlyL = append(*onlyL, fmt.Sprintf("%s=%v", path, l))
	default:
		*onlyS = append(*onlyS, fmt.Sprintf("%s=%v(local %v)", path, s, l))
	}
}
