package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	kubetest.ArgoCDDefaultProject(t, env, env.Namespace)
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
    discover: {flux: true, argocd: true, namespaces: [`+env.Namespace+`], argocdNamespace: `+env.Namespace+`}
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
		"not rendered: Application " + env.Namespace + "/redis on prod: it installs the Helm chart redis from a chart repository: its objects are compared with the target that applies the Application",
	} {
		if !strings.Contains(stdout, s) {
			t.Errorf("the listing does not say %q:\n%s", s, stdout)
		}
	}
	stdout, _, code = runCLI(t, "targets", "--config", cfg, "--format", "json")
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

// TestTargetsReadThePathAtTheBranch: what a target's reconciler finds at its
// path is read from serve's repository cache, at the head of the branch the
// target follows, and named as the reconciler builds it: a kustomization,
// plain manifests (Flux generates the kustomization; Argo CD reads the
// directory, with no drift proposed for either), a Helm chart or jsonnet (not
// rendered, and why), nothing; without the repository in the cache, it is
// decided at the first pull request.
func TestTargetsReadThePathAtTheBranch(t *testing.T) {
	env := kubetest.New(t)
	kubetest.InstallCRDs(t, env, kubetest.ReconcilerCRDs(t)...)
	kubetest.ArgoCDDefaultProject(t, env, env.Namespace)
	work, cache := t.TempDir(), t.TempDir()
	for name, content := range map[string]string{
		"clusters/prod/apps.yaml":           "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: apps}\n",
		"apps/kustomize/kustomization.yaml": "resources: []\n",
		"apps/guestbook/ui.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ui}\n",
		"apps/jsonnet/guestbook.jsonnet":    "{}\n",
		"apps/chart/Chart.yaml":             "name: chart\nversion: 0.1.0\n",
	} {
		writeFile(t, filepath.Join(work, name), content)
	}
	gitCmd(t, work, "init", "-q", "-b", "main")
	gitCmd(t, work, "add", "-A")
	gitCmd(t, work, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "fleet")
	bare := filepath.Join(cache, "acme", "gitops.git")
	gitCmd(t, work, "clone", "-q", "--bare", work, bare)

	apps := map[string]string{"kustomize": "apps/kustomize", "guestbook": "apps/guestbook", "jsonnet": "apps/jsonnet", "chart": "apps/chart", "gone": "apps/gone"}
	objs := []string{
		"apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: fleet, namespace: NS}\nspec: {interval: 1m, url: 'https://github.com/acme/gitops', ref: {branch: main}}\n",
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: flux-system, namespace: NS}\nspec: {interval: 10m, path: ./clusters/prod, prune: true, sourceRef: {kind: GitRepository, name: fleet}}\n",
	}
	for name, p := range apps {
		objs = append(objs, "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: "+name+", namespace: NS}\n"+
			"spec: {project: default, source: {repoURL: 'https://github.com/acme/gitops', path: "+p+"}, destination: {server: 'https://kubernetes.default.svc', namespace: web}, syncPolicy: {automated: {}}}\n")
	}
	for _, y := range objs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(strings.ReplaceAll(y, "NS", env.Namespace)), &u.Object); err != nil {
			t.Fatal(err)
		}
		kubetest.Apply(t, env.Setup, "kubectl", u)
	}
	dir := t.TempDir()
	kubeconfig := writeKubeconfig(t, env, filepath.Join(dir, "kubeconfig"))
	config := func(cacheDir string) string {
		cfg := filepath.Join(dir, "app.yml")
		if err := os.WriteFile(cfg, []byte("server: {cacheDir: "+cacheDir+"}\nclusters:\n  prod:\n    kubeconfig: "+kubeconfig+
			"\n    discover: {flux: true, argocd: true, namespaces: ["+env.Namespace+"], argocdNamespace: "+env.Namespace+
			", repositories: {"+env.Namespace+": ['acme/*']}}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	stdout, stderr, code := runCLI(t, "targets", "--config", config(cache), "--format", "json")
	var list app.TargetList
	if err := json.Unmarshal([]byte(stdout), &list); err != nil || code != exitOK {
		t.Fatalf("exit %d, %v: %s\n%s", code, err, stderr, stdout)
	}
	byPath := map[string]app.TargetInfo{}
	for _, tg := range list.Targets {
		byPath[tg.Path] = tg
	}
	for p, want := range map[string]struct{ source, notRendered, codify string }{
		"clusters/prod":  {"plain manifests at main (Flux generates the kustomization)", "", "manual"},
		"apps/kustomize": {"a kustomization at main", "", "manual"},
		"apps/guestbook": {"plain manifests at main (Argo CD reads the directory)", "", "manual"},
		"apps/jsonnet":   {"jsonnet at main", "Argo CD evaluates jsonnet (apps/jsonnet/guestbook.jsonnet), which driftback does not render", "off (not rendered)"},
		"apps/chart":     {"a Helm chart at main", "", "off (Argo CD renders it from a Helm chart, whose values drift is not traced to yet)"},
		"apps/gone":      {"nothing at main", "", "manual"},
	} {
		got, ok := byPath[p]
		if !ok || got.Source != want.source || got.NotRendered != want.notRendered || got.Codify != want.codify {
			t.Errorf("%s: source %q, not rendered %q, codify %q; want %+v", p, got.Source, got.NotRendered, got.Codify, want)
		}
	}
	stdout, _, _ = runCLI(t, "targets", "--config", config(filepath.Join(dir, "empty-cache")), "--format", "json")
	if err := json.Unmarshal([]byte(stdout), &list); err != nil || len(list.Targets) == 0 {
		t.Fatalf("%v\n%s", err, stdout)
	}
	for _, tg := range list.Targets {
		if !strings.HasPrefix(tg.Source, "decided at the first pull request") {
			t.Errorf("%s without the repository in the cache: %q", tg.Path, tg.Source)
		}
	}
}

// TestTargetsSayWhatDiscoveryLeavesOut: reconciler objects in namespaces
// discover.namespaces leaves out are counted, by namespace, with the
// setting that brings them in; they are not silently missing.
func TestTargetsSayWhatDiscoveryLeavesOut(t *testing.T) {
	env := kubetest.New(t)
	kubetest.InstallCRDs(t, env, kubetest.ReconcilerCRDs(t)...)
	tenant := env.Namespace + "-tenant"
	if _, err := env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.CoreV1().Namespaces().Delete(context.Background(), tenant, metav1.DeleteOptions{})
	})
	for _, y := range []string{
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: NS}\nspec: {interval: 10m, path: ./apps, prune: true, sourceRef: {kind: GitRepository, name: fleet}}\n",
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: media, namespace: TENANT}\nspec: {interval: 10m, path: ./media, prune: true, sourceRef: {kind: GitRepository, name: fleet}}\n",
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: games, namespace: TENANT}\nspec: {interval: 10m, path: ./games, prune: true, sourceRef: {kind: GitRepository, name: fleet}}\n",
	} {
		u := &unstructured.Unstructured{}
		y = strings.ReplaceAll(strings.ReplaceAll(y, "TENANT", tenant), "NS", env.Namespace)
		if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
			t.Fatal(err)
		}
		kubetest.Apply(t, env.Setup, "kubectl", u)
	}
	dir := t.TempDir()
	kubeconfig := writeKubeconfig(t, env, filepath.Join(dir, "kubeconfig"))
	cfg := filepath.Join(dir, "app.yml")
	writeFile(t, cfg, "clusters:\n  prod:\n    kubeconfig: "+kubeconfig+"\n    discover: {flux: true, namespaces: ["+env.Namespace+"]}\n")
	stdout, stderr, code := runCLI(t, "targets", "--config", cfg)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"left out: discovery on prod: ", " Flux Kustomizations in namespaces clusters.prod.discover.namespaces leaves out (", tenant + ": 2", "list their namespaces there"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("targets does not say %q:\n%s", want, stdout)
		}
	}
	stdout, _, _ = runCLI(t, "targets", "--config", cfg, "--format", "json")
	if !strings.Contains(stdout, `"leftOut": [`) || !strings.Contains(stdout, tenant+": 2") {
		t.Errorf("the JSON does not count what is left out:\n%s", stdout)
	}
}
