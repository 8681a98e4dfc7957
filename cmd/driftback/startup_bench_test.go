package main

import (
	"os/exec"
	"path/filepath"
	"testing"
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
