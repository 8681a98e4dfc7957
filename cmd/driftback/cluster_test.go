package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/kubetest"
)

// TestDiffAgainstACluster runs `driftback diff --kubeconfig` against the real
// apiserver, in both modes, and checks the scale made by hand is reported with
// its manager.
func TestDiffAgainstACluster(t *testing.T) {
	env := kubetest.New(t)
	ns := env.Namespace
	dir := t.TempDir()
	for _, tree := range []string{"base", "head"} {
		writeTree(t, filepath.Join(dir, tree), map[string]string{
			"app/kustomization.yaml": "namespace: " + ns + "\nresources:\n- deploy.yaml\n",
			"app/deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: "nginx:` + map[string]string{"base": "1.27", "head": "1.28"}[tree] + `"}]
`,
		})
	}
	ctx := context.Background()
	live := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"` + ns + `"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}}}`)
	force := true
	if _, err := env.Client.AppsV1().Deployments(ns).Patch(ctx, "web", types.ApplyPatchType, live, metav1.PatchOptions{FieldManager: "kustomize-controller", Force: &force}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{FieldManager: "kubectl"}, "scale"); err != nil {
		t.Fatal(err)
	}
	kubeconfig := writeKubeconfig(t, env, filepath.Join(dir, "kubeconfig"))
	for _, mode := range []string{"read-only", "dry-run"} {
		t.Run(mode, func(t *testing.T) {
			out, errOut, code := runCLI(t, "diff", "--base", filepath.Join(dir, "base"), "--head", filepath.Join(dir, "head"),
				"--kubeconfig", kubeconfig, "--mode", mode, "--format", "json")
			if code != exitChanges {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var rep drift.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if len(rep.Targets) != 1 || rep.Targets[0].Path != "app" {
				t.Fatalf("targets: %+v", rep.Targets)
			}
			got := map[string]object.Field{}
			for _, ch := range rep.Targets[0].Changes {
				for _, f := range ch.Fields {
					got[f.Path] = f
				}
			}
			if f := got[".spec.replicas"]; f.Manager != "kubectl" || f.Subresource != "scale" || f.Kind != object.FieldDrift {
				t.Errorf(".spec.replicas: %+v", f)
			}
			if f := got[`.spec.template.spec.containers[name="web"].image`]; f.Desired != "nginx:1.28" || f.Live != "nginx:1.27" {
				t.Errorf("image: %+v", f)
			}
		})
	}
}

func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeKubeconfig writes a kubeconfig for the test apiserver, as a user's
// would be: no client limits of its own.
func writeKubeconfig(t testing.TB, env *kubetest.Env, path string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData, Token: env.Config.BearerToken}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	cfg.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDumpHoldsWhatDiffReads: `driftback dump` writes what comparing an
// overlay needs, and `diff --live` on it says what `diff --kubeconfig`
// says (the claim's removal and its danger, the ConfigMap's change), but
// for the Secret it never writes, which it says is not compared.
func TestDumpHoldsWhatDiffReads(t *testing.T) {
	env := kubetest.New(t)
	ns := env.Namespace
	for _, y := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: NS}\ndata: {mode: normal}\n",
		"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: NS}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: token, namespace: NS}\nstringData: {token: dump-canary-8812}\n",
	} {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(strings.ReplaceAll(y, "NS", ns)), &u.Object); err != nil {
			t.Fatal(err)
		}
		kubetest.Apply(t, env.Setup, "kustomize-controller", u)
	}
	dir := t.TempDir()
	files := map[string]string{
		"app/kustomization.yaml": "namespace: " + ns + "\nresources: [settings.yaml, data.yaml, token.yaml]\n",
		"app/settings.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: normal}\n",
		"app/data.yaml":          "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n",
		"app/token.yaml":         "apiVersion: v1\nkind: Secret\nmetadata: {name: token}\nstringData: {token: dump-canary-8812}\n",
	}
	writeTree(t, filepath.Join(dir, "base"), files)
	files["app/kustomization.yaml"] = "namespace: " + ns + "\nresources: [settings.yaml, token.yaml]\n"
	files["app/settings.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: fast}\n"
	writeTree(t, filepath.Join(dir, "head"), files)
	kubeconfig := writeKubeconfig(t, env, filepath.Join(dir, "kubeconfig"))
	dump := filepath.Join(dir, "live")
	_, errOut, code := runCLI(t, "dump", "--repo", filepath.Join(dir, "base"), "--path", "app", "--kubeconfig", kubeconfig, "--out", dump)
	if code != exitOK || !strings.Contains(errOut, "Secrets are never written") {
		t.Fatalf("dump: exit %d: %s", code, errOut)
	}
	written, err := os.ReadDir(dump)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range written {
		b, err := os.ReadFile(filepath.Join(dump, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "dump-canary") || strings.Contains(string(b), "ZHVtcC1jYW5hcnk") {
			t.Errorf("%s holds the Secret's value", f.Name())
		}
	}
	type report struct {
		Targets []struct {
			Changes []struct {
				Kind, Name, Action string
				Danger             []struct{ Reason string }
			}
			Unread []struct{ Kind, Name string }
		}
	}
	read := func(args ...string) report {
		t.Helper()
		out, errOut, code := runCLI(t, append([]string{"diff", "--base", filepath.Join(dir, "base"), "--head", filepath.Join(dir, "head"), "--format", "json"}, args...)...)
		if code == exitError {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		var r report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	said := func(r report) map[string]string {
		out := map[string]string{}
		for _, c := range r.Targets[0].Changes {
			s := c.Action
			for _, d := range c.Danger {
				s += " " + d.Reason
			}
			out[c.Kind+"/"+c.Name] = s
		}
		return out
	}
	cluster, fromDump := read("--kubeconfig", kubeconfig), read("--live", dump)
	want := said(cluster)
	delete(want, "Secret/token") // never in a dump
	if got := said(fromDump); !maps.Equal(got, want) {
		t.Errorf("from the dump %v, from the cluster %v", got, want)
	}
	if want["PersistentVolumeClaim/data"] != "delete pvc-removal" && want["PersistentVolumeClaim/data"] != "delete" {
		t.Errorf("the claim's removal: %q", want["PersistentVolumeClaim/data"])
	}
	if u := fromDump.Targets[0].Unread; len(u) != 1 || u[0].Kind != "Secret" {
		t.Errorf("not compared from the dump: %+v, want the Secret", u)
	}
}

// TestDiffSaysWhatTheClusterWillRefuse: `driftback diff --kubeconfig`
// checks the change against the cluster's admission rules as serve does: a
// privileged container in a namespace enforcing baseline has its pods
// refused. A namespace without labels takes the PodSecurity plugin's
// defaults, which --admission-config gives as kube-apiserver's own
// AdmissionConfiguration file: unknown to the cluster, privileged without it.
func TestDiffSaysWhatTheClusterWillRefuse(t *testing.T) {
	env := kubetest.New(t)
	dir := t.TempDir()
	ctx := context.Background()
	labelled := env.Namespace
	plain := kubetest.New(t).Namespace
	n, err := env.Client.CoreV1().Namespaces().Get(ctx, labelled, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	if _, err := env.Client.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deploy := func(ns string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: root, namespace: " + ns + "}\nspec:\n  selector: {matchLabels: {app: root}}\n  template:\n    metadata: {labels: {app: root}}\n    spec:\n      containers: [{name: app, image: \"nginx:1.28\", securityContext: {privileged: true}}]\n"
	}
	writeTree(t, filepath.Join(dir, "base"), map[string]string{"app/kustomization.yaml": "resources: []\n"})
	writeTree(t, filepath.Join(dir, "head"), map[string]string{"app/kustomization.yaml": "resources:\n- a.yaml\n- b.yaml\n", "app/a.yaml": deploy(labelled), "app/b.yaml": deploy(plain)})
	kubeconfig := writeKubeconfig(t, env, filepath.Join(dir, "kubeconfig"))
	config := filepath.Join(dir, "admission.yaml")
	if err := os.WriteFile(config, []byte(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults: {enforce: baseline, enforce-version: latest}
    exemptions: {usernames: [], runtimeClasses: [], namespaces: [kube-system]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	refused := func(extra ...string) map[string]string {
		t.Helper()
		args := append([]string{"diff", "--base", filepath.Join(dir, "base"), "--head", filepath.Join(dir, "head"), "--path", "app", "--kubeconfig", kubeconfig, "--format", "json"}, extra...)
		out, errOut, code := runCLI(t, args...)
		if code != exitChanges {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var rep drift.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, ch := range rep.Targets[0].Changes {
			for _, d := range ch.Danger {
				if d.Reason == drift.DangerPodsRefused {
					got[ch.Namespace] = d.Message
				}
			}
		}
		return got
	}
	if got := refused(); len(got) != 1 || !strings.Contains(got[labelled], `violates PodSecurity "baseline:latest"`) {
		t.Errorf("without --admission-config: %v; want the labelled namespace's Deployment only", got)
	}
	if got := refused("--admission-config", config); len(got) != 2 || !strings.Contains(got[plain], `violates PodSecurity "baseline:latest"`) {
		t.Errorf("with the cluster's AdmissionConfiguration: %v; want both", got)
	}
	if err := os.WriteFile(config, []byte("kind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration:\n    kind: PodSecurityConfiguration\n    defaults: {enforce: strict}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, "diff", "--base", filepath.Join(dir, "base"), "--head", filepath.Join(dir, "head"), "--kubeconfig", kubeconfig, "--admission-config", config); code != 2 || !strings.Contains(errOut, "--admission-config") || !strings.Contains(errOut, "strict") {
		t.Errorf("a bad level: exit %d, %s", code, errOut)
	}
}
