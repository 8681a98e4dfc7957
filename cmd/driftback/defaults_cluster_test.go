package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/internal/kubetest"
)

// defaultedObjects leave to the apiserver what it defaults: a protocol in an
// atomic list of ports, a Service's protocol and target port, the volume
// claim templates' apiVersion and kind, a custom resource's schema defaults.
var defaultedObjects = map[string]string{
	"netpol.yaml": `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - ports: [{port: 80}, {port: 53, protocol: UDP}]
`,
	"service.yaml": `apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80}]
`,
	"web.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: "nginx:1.27", ports: [{containerPort: 80}]}]
`,
	"db.yaml": `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: "postgres:17"}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
`,
	"gadget.yaml": `apiVersion: defaults.example.com/v1
kind: Gadget
metadata: {name: g}
spec:
  ports: [{port: 80}]
`,
}

var gadgetCRD = strings.ReplaceAll(kubetest.DefaultingCRD, "GROUP", "defaults.example.com")

// TestDriftWritesNoServerDefaults applies objects that rely on server
// defaults as the reconciler would, scales one by hand, and requires
// `driftback drift` to codify the scale and nothing else, and `--write` to
// edit only that: a value the server defaulted is never proposed for Git.
func TestDriftWritesNoServerDefaults(t *testing.T) {
	env := kubetest.New(t)
	ns := env.Namespace
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(env.Setup)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(gvr schema.GroupVersionResource, namespace, doc string) {
		t.Helper()
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		if namespace != "" {
			m["metadata"].(map[string]any)["namespace"] = namespace
		}
		body, _ := json.Marshal(m)
		name := m["metadata"].(map[string]any)["name"].(string)
		force := true
		var res dynamic.ResourceInterface = dyn.Resource(gvr)
		if namespace != "" {
			res = dyn.Resource(gvr).Namespace(namespace)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := res.Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "kustomize-controller", Force: &force})
			if err == nil {
				return
			}
			if time.Now().After(deadline) { // a new CRD's kind is served a moment after it is created
				t.Fatalf("apply %s: %v", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	apply(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, "", gadgetCRD)
	resources := map[string]schema.GroupVersionResource{
		"netpol.yaml":  {Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
		"service.yaml": {Version: "v1", Resource: "services"},
		"web.yaml":     {Group: "apps", Version: "v1", Resource: "deployments"},
		"db.yaml":      {Group: "apps", Version: "v1", Resource: "statefulsets"},
		"gadget.yaml":  {Group: "defaults.example.com", Version: "v1", Resource: "gadgets"},
	}
	files := map[string]string{}
	var names []string
	for file, doc := range defaultedObjects {
		apply(resources[file], ns, doc)
		files["app/"+file] = doc
		names = append(names, file)
	}
	files["app/kustomization.yaml"] = "namespace: " + ns + "\nresources:\n- " + strings.Join(names, "\n- ") + "\n"
	if _, err := env.Client.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{FieldManager: "kubectl"}, "scale"); err != nil {
		t.Fatal(err)
	}
	kubeconfig := writeKubeconfig(t, env, filepath.Join(t.TempDir(), "kubeconfig"))

	repo := t.TempDir()
	writeTree(t, repo, files)
	args := []string{"drift", "--repo", repo, "--path", "app", "--kubeconfig", kubeconfig}
	out, errOut, code := runCLI(t, append(args, "--format", "json")...)
	if code != exitChanges {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	var plan struct {
		Codified []struct{ Object, Path string }
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.Codified) != 1 || plan.Codified[0].Path != ".spec.replicas" {
		t.Fatalf("codified %+v, want only the scale", plan.Codified)
	}
	if _, errOut, code := runCLI(t, append(args, "--write")...); code != exitChanges {
		t.Fatalf("--write: exit %d: %s", code, errOut)
	}
	for file, doc := range files {
		got, err := os.ReadFile(filepath.Join(repo, file))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != doc && file != "app/kustomization.yaml" && file != "app/web.yaml" {
			t.Errorf("%s was edited:\n%s", file, got)
		}
	}
	entries, err := os.ReadDir(filepath.Join(repo, "app"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "driftback-") && !strings.Contains(e.Name(), "deployment-web") {
			t.Errorf("--write added %s", e.Name())
		}
	}
	if out, errOut, code := runCLI(t, args...); code != exitOK || !strings.Contains(out, "nothing to codify") {
		t.Errorf("after --write: exit %d\n%s%s", code, out, errOut)
	}
}
