package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/driftback/driftback/internal/kubetest"
)

// BenchmarkStartup measures what a user waits for before any work: a
// process that prints its version, and one that renders one small overlay
// (three objects; driftback's render runs in a sandboxed child, itself a
// process), each against kustomize of the kustomize api driftback renders
// with and kubectl of the test control plane's release (make bench puts
// both on PATH): `kustomize version`, `kubectl version --client`,
// `kustomize build` and `kubectl kustomize` of the same overlay.
func BenchmarkStartup(b *testing.B) {
	bin := driftbackBinary(b)
	overlay := filepath.Join("..", "..", "fixtures", "render")
	kubectl, _ := exec.LookPath("kubectl")
	kustomize, _ := exec.LookPath("kustomize")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"driftback version", []string{bin, "version"}},
		{"driftback --help", []string{bin, "--help"}},
		{"kustomize version (baseline)", []string{kustomize, "version"}},
		{"kubectl version --client (baseline)", []string{kubectl, "version", "--client"}},
		{"driftback render one overlay", []string{bin, "render", "--repo", overlay, "overlays/dev"}},
		{"kustomize build one overlay (baseline)", []string{kustomize, "build", filepath.Join(overlay, "overlays", "dev")}},
		{"kubectl kustomize one overlay (baseline)", []string{kubectl, "kustomize", filepath.Join(overlay, "overlays", "dev")}},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.args[0] == "" {
				b.Skip("not on PATH (make bench builds kubectl and kustomize): the baseline is not measured")
			}
			for b.Loop() {
				cmd := exec.Command(c.args[0], c.args[1:]...)
				if out, err := cmd.CombinedOutput(); err != nil && c.args[1] != "--help" {
					b.Fatalf("%v: %v\n%s", c.args, err, out)
				}
			}
		})
	}
}

// BenchmarkLiveDiffOfOneOverlay measures a live comparison of one small
// overlay (a Deployment, a Service and a ConfigMap, one field changed) as a
// user runs it, a process against the test kube-apiserver: `driftback diff
// --kubeconfig` (read-only: get and list) against `kubectl diff
// --server-side -k` of the head (make bench puts kubectl on PATH).
func BenchmarkLiveDiffOfOneOverlay(b *testing.B) {
	bin := driftbackBinary(b)
	env := kubetest.New(b)
	ns := env.Namespace
	dir := b.TempDir()
	objects := func(image string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: web}}\n" +
			"  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: \"nginx:" + image + "\"}]\n" +
			"---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n  ports: [{port: 80}]\n" +
			"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {mode: fast}\n"
	}
	for tree, image := range map[string]string{"base": "1.27", "head": "1.28"} {
		writeTree(b, filepath.Join(dir, tree), map[string]string{
			"app/kustomization.yaml": "namespace: " + ns + "\nresources: [objects.yaml]\n",
			"app/objects.yaml":       objects(image),
		})
	}
	kubeconfig := writeKubeconfig(b, env, filepath.Join(dir, "kubeconfig"))
	kubectl, _ := exec.LookPath("kubectl")
	apply := exec.Command(kubectl, "--kubeconfig", kubeconfig, "apply", "--server-side", "--field-manager", "kustomize-controller", "-k", filepath.Join(dir, "base", "app"))
	if kubectl == "" {
		b.Skip("kubectl is not on PATH (make bench builds it)")
	}
	if out, err := apply.CombinedOutput(); err != nil {
		b.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"driftback diff", []string{bin, "diff", "--base", filepath.Join(dir, "base"), "--head", filepath.Join(dir, "head"), "--kubeconfig", kubeconfig, "--path", "app"}},
		{"kubectl diff --server-side (baseline)", []string{kubectl, "--kubeconfig", kubeconfig, "diff", "--server-side", "--field-manager", "kustomize-controller", "-k", filepath.Join(dir, "head", "app")}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				out, err := exec.Command(c.args[0], c.args[1:]...).CombinedOutput()
				if exit, ok := err.(*exec.ExitError); err != nil && (!ok || exit.ExitCode() != 1) {
					b.Fatalf("%v: %v\n%s", c.args, err, out) // 1 is "changes", for both
				}
			}
		})
	}
}
