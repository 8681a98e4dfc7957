package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/driftback/driftback/drift/livestate"
)

// TestClusterClientLimitsReachTheClient proves a cluster's client limits reach the client
// config, and default to the product's when unset.
func TestClusterClientLimitsReachTheClient(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: https://127.0.0.1:6443}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cluster Cluster
		qps     float32
		burst   int
	}{
		{Cluster{Kubeconfig: kc}, livestate.DefaultQPS, livestate.DefaultBurst},
		{Cluster{Kubeconfig: kc, QPS: 20.5, Burst: 40}, 20.5, 40},
	} {
		rc, err := c.cluster.RESTConfig()
		if err != nil {
			t.Fatal(err)
		}
		if rc.QPS != c.qps || rc.Burst != c.burst {
			t.Errorf("%+v: client limits %v/%d, want %v/%d", c.cluster, rc.QPS, rc.Burst, c.qps, c.burst)
		}
	}
}
