package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/app"
	"github.com/driftback/driftback/internal/kubetest"
)

// TestTargetsCommand lists what a configuration with discovery serves: the
// discovered targets, the app.yml ones, and what cannot be rendered.
func TestTargetsCommand(t *testing.T) {
	env := kubetest.New(t)
	kubetest.InstallCRDs(t, env, kubetest.ReconcilerCRDs(t)...)
	for _, y := range []string{
		"apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: fleet, namespace: NS}\nspec: {interval: 1m, url: 'https://github.com/acme/gitops', ref: {branch: main}}\n",
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: NS}\nspec: {interval: 10m, path: ./apps/prod, prune: true, suspend: true, sourceRef: {kind: GitRepository, name: fleet}}\n",
		"apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: redis, namespace: NS}\nspec: {project: default, source: {repoURL: 'https://charts.example.com', chart: redis}, destination: {server: 'https://kubernetes.default.svc'}}\n",
	} {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(strings.ReplaceAll(y, "NS", env.Namespace)), &u.Object); err != nil {
			t.Fatal(err)
		}
		kubetest.Apply(t, env.Setup, "kubectl", u)
	}
	dir := t.TempDir()
	kubeconfig := writeKubeconfig(t, env, filepath.Join(dir, "kubeconfig"))
	cfg := filepath.Join(dir, "app.yml")
	if err := os.WriteFile(cfg, []byte(`clusters:
  prod:
    kubeconfig: `+kubeconfig+`
    discover: {flux: true, argocd: true, namespaces: [`+env.Namespace+`]}
targets:
- {repo: acme/gitops, path: 'tenants/*', cluster: prod}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "targets", "--config", cfg)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, s := range []string{
		"prod/" + env.Namespace + "/apps  acme/gitops  apps/prod",
		"flux", "Kustomization " + env.Namespace + "/apps on cluster prod",
		"tenants/* (glob)", "app.yml",
		"note: prod/" + env.Namespace + "/apps: the Kustomization is suspended",
		"not rendered: Application " + env.Namespace + "/redis on prod: it installs the Helm chart redis",
	} {
		if !strings.Contains(stdout, s) {
			t.Errorf("the listing does not say %q:\n%s", s, stdout)
		}
	}
	stdout, _, code = runCLI(t, "targets", "--config", cfg, "--output", "json")
	var list app.TargetList
	if err := json.Unmarshal([]byte(stdout), &list); err != nil || code != exitOK {
		t.Fatalf("json: %v (exit %d)\n%s", err, code, stdout)
	}
	if len(list.Targets) != 2 || len(list.NotRendered) != 1 {
		t.Errorf("json listing: %+v", list)
	}

	// A configuration error, and a cluster that cannot be read.
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("clusters:\n  prod:\n    discover: {flux: true}\ntargets:\n- {repo: acme/gitops, path: a, cluster: nowhere}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(t, "targets", "--config", bad); code != exitError || !strings.Contains(stderr, `"nowhere" is not one of clusters`) {
		t.Errorf("a config error: exit %d, %s", code, stderr)
	}
	unreachable := filepath.Join(dir, "unreachable.yml")
	if err := os.WriteFile(unreachable, []byte("clusters:\n  prod:\n    kubeconfig: "+filepath.Join(dir, "missing")+"\n    discover: {flux: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(t, "targets", "--config", unreachable); code != exitChanges || !strings.Contains(stderr, "cluster prod") {
		t.Errorf("an unreadable cluster: exit %d, %s", code, stderr)
	}
}
