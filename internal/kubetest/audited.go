package kubetest

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// AuditPolicy is the policy NewAudited's apiserver logs by: writes at
// RequestResponse (their bodies sent, as a cluster with a thorough policy
// sends them, Secrets' included), nothing else.
const AuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: RequestResponse
  verbs: [create, update, patch, delete]
- level: None
`

// NewAudited starts an apiserver of its own for t, stopped when t ends,
// whose audit webhook backend sends its events in batches, a quarter second
// apart at most, to url with
// the bearer token: the apiserver's --audit-webhook-config-file pointing
// at driftback, over TLS (caPEM signed url's certificate: a bearer token
// is sent over TLS only). It returns t's slice of it, as New does.
func NewAudited(t testing.TB, url, token string, caPEM []byte) *Env {
	t.Helper()
	dir, err := assets()
	if err != nil {
		if InCI() {
			t.Fatalf("kubetest: %v", err)
		}
		t.Skipf("kubetest: %v (run `make testbin`; with CI set this fails)", err)
	}
	files := t.TempDir()
	policy, webhook := filepath.Join(files, "policy.yaml"), filepath.Join(files, "webhook.kubeconfig")
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: driftback
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: apiserver
  user: {token: %q}
contexts:
- name: audit
  context: {cluster: driftback, user: apiserver}
current-context: audit
`, url, base64.StdEncoding.EncodeToString(caPEM), token)
	for path, content := range map[string]string{policy: AuditPolicy, webhook: kubeconfig} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e := &envtest.Environment{BinaryAssetsDirectory: dir, ControlPlaneStartTimeout: 2 * time.Minute, ControlPlaneStopTimeout: time.Minute}
	args := e.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-webhook-config-file", webhook)
	// In batches, as a cluster sends them, sent within a quarter second.
	args.Set("audit-webhook-mode", "batch")
	args.Set("audit-webhook-batch-max-wait", "250ms")
	c, err := e.Start()
	if err != nil {
		t.Fatalf("kubetest: start an audited kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	c.QPS, c.Burst, c.RateLimiter = 0, 0, nil
	return slice(t, c)
}
