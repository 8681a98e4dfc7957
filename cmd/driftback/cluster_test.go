package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

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
