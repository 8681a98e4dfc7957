package app

import (
	"context"
	"strings"
	"testing"

	"github.com/driftback/driftback/app/config"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

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
