package charts

import (
	"testing"

	"github.com/driftback/driftback/internal/testfs"
)

func TestTrustIsWhatTheDefaultBranchAndAppYmlName(t *testing.T) {
	tree := testfs.Tree(t, map[string]string{
		"apps/podinfo/repository.yaml": `apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {name: podinfo}
spec:
  url: https://Stefanprodan.github.io/podinfo/
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: cert-manager}
spec:
  url: oci://quay.io/jetstack/charts/cert-manager
`,
		"argocd/app.yaml": `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: redis}
spec:
  sources:
  - repoURL: registry-1.docker.io/bitnamicharts
    chart: redis
`,
		"charts/shop/Chart.yaml": `apiVersion: v2
name: shop
version: 1.0.0
dependencies:
- name: cache
  repository: https://charts.example.com/stable
`,
		// Not a source: a ConfigMap's data names no trusted repository.
		"apps/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {url: 'https://evil.example.com'}\n",
	})
	trust := NewTrust([]string{"oci://ghcr.io/example-org"}).With(tree)
	for u, want := range map[string]bool{
		"https://stefanprodan.github.io/podinfo":     true,
		"HTTPS://stefanprodan.github.io/podinfo/":    true,
		"oci://quay.io/jetstack/charts/cert-manager": true,
		"oci://registry-1.docker.io/bitnamicharts":   true,
		"https://charts.example.com/stable":          true,
		"oci://ghcr.io/example-org/charts/app":       true,
		"oci://ghcr.io/example-org":                  true,
		"oci://ghcr.io/example-organisation":         false,
		// A path that climbs out of a trusted one is never trusted.
		"oci://ghcr.io/example-org/../other-org":           false,
		"oci://ghcr.io/example-org/%2e%2e/other-org":       false,
		"oci://ghcr.io/example-org/%2E%2E/other-org":       false,
		"oci://ghcr.io/example-org/.%2E/other-org":         false,
		"oci://ghcr.io/example-org%2f..%2fother-org":       false,
		"oci://ghcr.io/example-org/%2fother-org":           false,
		"https://charts.example.com/stable/./../incubator": false,
		"https://charts.example.com/stable/..%5cincubator": false,
		"https://stefanprodan.github.io/podinfo/sub":       false,
		"https://evil.example.com":                         false,
		"file:///etc":                                      false,
		"":                                                 false,
	} {
		if got := trust.Allows(u); got != want {
			t.Errorf("Allows(%q) = %v, want %v", u, got, want)
		}
	}
	if NewTrust(nil).Allows("https://stefanprodan.github.io/podinfo") {
		t.Error("the default branch's repositories are trusted without its tree")
	}
}
