package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/drift"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestClusterClientLimits proves a cluster's client limits reach the client
// config, and default to the product's when unset.
func TestClusterClientLimits(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: https://127.0.0.1:6443}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cluster config.Cluster
		qps     float32
		burst   int
	}{
		{config.Cluster{Kubeconfig: kc}, drift.DefaultQPS, drift.DefaultBurst},
		{config.Cluster{Kubeconfig: kc, QPS: 20.5, Burst: 40}, 20.5, 40},
	} {
		rc, err := restConfig(c.cluster)
		if err != nil {
			t.Fatal(err)
		}
		if rc.QPS != c.qps || rc.Burst != c.burst {
			t.Errorf("%+v: client limits %v/%d, want %v/%d", c.cluster, rc.QPS, rc.Burst, c.qps, c.burst)
		}
	}
}

func TestServerRefusesABadPrivateKey(t *testing.T) {
	cfg, err := config.ParseConfig([]byte("github:\n  appID: 1\n"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewServer(context.Background(), cfg, &config.Secrets{PrivateKey: []byte("not a key"), WebhookSecret: []byte("s")}, discard)
	if err == nil || !strings.Contains(err.Error(), "github private key") {
		t.Errorf("error %v, want one about the private key", err)
	}
}
