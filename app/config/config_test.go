package config

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/driftback/driftback/drift"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestTheExampleConfigLoads proves the repository's own app.yml is valid.
func TestTheExampleConfigLoads(t *testing.T) {
	cfg, err := LoadConfig("../../app.yml", envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Targets) != 2 || cfg.Targets[0].Policy.FailOn[0] != drift.DangerCRDRemoval || cfg.Server.JobTimeout != 5*time.Minute {
		t.Errorf("example config: %+v", cfg)
	}
}

// TestClusterClientLimits proves a cluster's client limits come from
// app.yml or the environment (TestClusterClientLimitsReachTheClient: they reach the
// client config, and default to the product's when unset).
func TestClusterClientLimits(t *testing.T) {
	cfg, err := LoadConfig("../../app.yml", envOf(map[string]string{"DRIFTBACK_CLUSTERS_STAGING_QPS": "20.5"}))
	if err != nil {
		t.Fatal(err)
	}
	staging := cfg.Clusters["staging"]
	if staging.QPS != 20.5 || staging.Burst != 300 {
		t.Errorf("staging limits %v/%d, want 20.5 from the environment and 300 from app.yml", staging.QPS, staging.Burst)
	}
	if _, err := ParseConfig([]byte("clusters:\n  a:\n    burst: -1\n"), envOf(nil)); err == nil || !strings.Contains(err.Error(), "clusters.a.burst") {
		t.Errorf("a negative burst: err = %v", err)
	}
}

func TestConfigErrorsNameTheLine(t *testing.T) {
	cases := map[string]struct{ yaml, says string }{
		"an unknown key":                 {"server:\n  listen: \":1\"\n  wrokers: 3\n", "line 3: server.wrokers: unknown key (did you mean workers?)"},
		"a typo under a cluster":         {"clusters:\n  prod:\n    kubeconfg: /k\n", "line 3: clusters.prod.kubeconfg: unknown key (did you mean kubeconfig?)"},
		"a key far from any":             {"github:\n  zzzzzzzz: 1\n", "line 2: github.zzzzzzzz: unknown key"},
		"a wrong type":                   {"server:\n  workers: many\n", `line 2: server.workers: expected a whole number, got "many"`},
		"a word for the App's ID":        {"github:\n  appID: one-two-three\n", `line 2: github.appID: expected a whole number, got "one-two-three"`},
		"a duration that is not one":     {"server:\n  driftInterval: often\n", `line 2: server.driftInterval: expected a duration such as 30s or 5m, got "often"`},
		"a wrong type in a list":         {"targets:\n- repo: a/b\n  path: x\n  policy:\n    failOn: {a: b}\n", "line 5: targets[0].policy.failOn: expected a list, got a mapping"},
		"an inline secret":               {"github:\n  appID: 1\n  privateKey: |\n    -----BEGIN\n", "line 3: secrets are never written in app.yml"},
		"an unknown danger":              {"targets:\n- repo: a/b\n  path: x\n  policy:\n    failOn: [oops]\n", `line 5: targets[0].policy.failOn: unknown danger "oops"`},
		"a bad mode":                     {"clusters:\n  prod:\n    kubeconfig: /k\n    mode: write\n", `line 4: clusters.prod.mode: "write" is neither read-only nor dry-run`},
		"a missing cluster":              {"targets:\n- repo: a/b\n  path: x\n  cluster: nope\n", `"nope" is not one of clusters`},
		"a scope kind written as a path": {"targets:\n- repo: a/b\n  path: x\n  scope:\n    clusterKinds: [rbac.authorization.k8s.io/ClusterRole]\n", `line 5: targets[0].scope.clusterKinds: "rbac.authorization.k8s.io/ClusterRole" is not a kind`},
		"a bad repo":                     {"targets:\n- repo: ab\n  path: x\n", `"ab" is not owner/name`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml), envOf(nil))
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %v, want one saying %q", err, tc.says)
			}
			if err != nil && (strings.Contains(err.Error(), "not found in type") || strings.Contains(err.Error(), "cannot unmarshal")) {
				t.Errorf("the error speaks Go: %v", err)
			}
		})
	}
}

// TestAMissingKeyFileNamesItsKey: a private key file that is not there is
// named with its key and the variable that can stand in for it.
func TestAMissingKeyFileNamesItsKey(t *testing.T) {
	cfg, err := ParseConfig([]byte("github:\n  appID: 1\n  privateKeyFile: /does/not/exist.pem\n"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.LoadSecrets(envOf(nil))
	want := "github.privateKeyFile /does/not/exist.pem: no such file or directory (or set DRIFTBACK_GITHUB_PRIVATE_KEY)"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

func TestEnvironmentOverrides(t *testing.T) {
	y := "github:\n  appID: 1\nserver:\n  workers: 2\nclusters:\n  prod:\n    context: a\ntargets:\n- repo: a/b\n  path: x\n  cluster: prod\n"
	cfg, err := ParseConfig([]byte(y), envOf(map[string]string{
		"DRIFTBACK_GITHUB_APP_ID":            "42",
		"DRIFTBACK_SERVER_WORKERS":           "9",
		"DRIFTBACK_SERVER_JOB_TIMEOUT":       "90s",
		"DRIFTBACK_CLUSTERS_PROD_CONTEXT":    "b",
		"DRIFTBACK_TARGETS_0_PATH":           "y",
		"DRIFTBACK_TARGETS_0_POLICY_FAIL_ON": "crd-removal, pvc-removal",
		"DRIFTBACK_GITHUB_API_URL":           "https://ghe.example.com/api/v3",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GitHub.AppID != 42 || cfg.Server.Workers != 9 || cfg.Server.JobTimeout != 90*time.Second ||
		cfg.Clusters["prod"].Context != "b" || cfg.Targets[0].Path != "y" || len(cfg.Targets[0].Policy.FailOn) != 2 ||
		cfg.GitHub.APIURL != "https://ghe.example.com/api/v3/" {
		t.Errorf("overrides not applied: %+v", cfg)
	}
	if _, err := ParseConfig([]byte(y), envOf(map[string]string{"DRIFTBACK_SERVER_WORKERS": "lots"})); err == nil || !strings.Contains(err.Error(), "DRIFTBACK_SERVER_WORKERS") {
		t.Errorf("a bad override: %v", err)
	}
}

// TestSecretsNeverLogged proves secrets come from the environment or files and
// the effective configuration shows where from, never what.
func TestSecretsNeverLogged(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key.pem")
	pemKey := testKey(t)
	if err := os.WriteFile(key, pemKey, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte("github:\n  appID: 1\n  privateKeyFile: "+key+"\n"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.LoadSecrets(envOf(map[string]string{"DRIFTBACK_GITHUB_WEBHOOK_SECRET": "hook-secret-value"}))
	if err != nil {
		t.Fatal(err)
	}
	if string(s.PrivateKey) != strings.TrimSpace(string(pemKey)) || string(s.WebhookSecret) != "hook-secret-value" {
		t.Fatalf("secrets: %q %q", s.PrivateKey, s.WebhookSecret)
	}
	shown := fmt.Sprint(cfg.Redacted(s))
	if strings.Contains(shown, string(pemKey[40:80])) || strings.Contains(shown, "hook-secret-value") {
		t.Errorf("the effective configuration shows a secret: %s", shown)
	}
	if !strings.Contains(shown, "file "+key) || !strings.Contains(shown, "environment DRIFTBACK_GITHUB_WEBHOOK_SECRET") {
		t.Errorf("the effective configuration does not say where secrets came from: %s", shown)
	}
	if _, err := cfg.LoadSecrets(envOf(nil)); err == nil || !strings.Contains(err.Error(), "webhookSecret") {
		t.Errorf("a missing webhook secret: %v", err)
	}
}

func TestEmptyWebhookSecretIsRefused(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "secret")
	if err := os.WriteFile(empty, []byte("  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte("github:\n  appID: 1\n  webhookSecretFile: "+empty+"\n"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.LoadSecrets(envOf(map[string]string{"DRIFTBACK_GITHUB_PRIVATE_KEY": string(testKey(t))})); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("an empty webhook secret: %v", err)
	}
}

// TestDiscoverCountsTheReconcilersOwnNamespaces: by default only Flux's and
// Argo CD's own namespaces count; "*" is every namespace, and a list is that
// list. Repositories bound what a namespace's objects may name.
func TestDiscoverCountsTheReconcilersOwnNamespaces(t *testing.T) {
	for _, c := range []struct {
		d    Discover
		want []string
	}{
		{Discover{Flux: true, ArgoCD: true}, []string{"flux-system", "argocd"}},
		{Discover{ArgoCD: true, ArgoCDNamespace: "gitops"}, []string{"gitops"}},
		{Discover{Flux: true, Namespaces: []string{"*"}}, nil},
		{Discover{Flux: true, Namespaces: []string{"flux-system", "team-a"}}, []string{"flux-system", "team-a"}},
	} {
		if got := c.d.Where(); !slices.Equal(got, c.want) {
			t.Errorf("%+v: where %v, want %v", c.d, got, c.want)
		}
	}
	d := Discover{Repositories: map[string][]string{"team-a": {"Acme/team-a-*"}}}
	for _, c := range []struct {
		ns, repo string
		want     bool
	}{
		{"team-a", "acme/team-a-apps", true}, {"team-a", "ACME/Team-A-web", true}, {"team-a", "acme/payroll-secrets", false},
		{"team-a", "acme/team-a-apps/x", false}, {"flux-system", "acme/payroll-secrets", true},
	} {
		if got := d.Allows(c.ns, c.repo); got != c.want {
			t.Errorf("namespace %s naming %s: %v, want %v", c.ns, c.repo, got, c.want)
		}
	}
	for y, want := range map[string]string{
		"clusters:\n  a:\n    discover: {flux: true, namespaces: ['*', x]}\n":               `"*" is every namespace, alone`,
		"clusters:\n  a:\n    discover: {flux: true, repositories: {team-a: ['acme/[']}}\n": `clusters.a.discover.repositories["team-a"]`,
	} {
		if _, err := ParseConfig([]byte(y), envOf(nil)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", y, err, want)
		}
	}
}

// testKey is an App's private key as GitHub issues one (RSA, PKCS #1 PEM).
func testKey(t *testing.T) []byte {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}

// TestServingNeedsAnAppAndItsKey: serve refuses an App without its ID,
// and a private key that is not one, naming the key; a key's content is
// never in the message.
func TestServingNeedsAnAppAndItsKey(t *testing.T) {
	env := envOf(map[string]string{"DRIFTBACK_GITHUB_PRIVATE_KEY": string(testKey(t)), "DRIFTBACK_GITHUB_WEBHOOK_SECRET": "s"})
	cfg, err := ParseConfig([]byte("github: {}\n"), env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.LoadSecrets(env); err == nil || !strings.Contains(err.Error(), "github.appID: not set") {
		t.Errorf("no App ID: %v", err)
	}
	cfg.GitHub.AppID = 7
	if _, err := cfg.LoadSecrets(env); err != nil {
		t.Errorf("an App with its ID and key: %v", err)
	}
	bad := envOf(map[string]string{"DRIFTBACK_GITHUB_PRIVATE_KEY": "ghp_notakey-canary", "DRIFTBACK_GITHUB_WEBHOOK_SECRET": "s"})
	if _, err := cfg.LoadSecrets(bad); err == nil || !strings.Contains(err.Error(), "privateKey (environment DRIFTBACK_GITHUB_PRIVATE_KEY): not a PEM key") || strings.Contains(err.Error(), "canary") {
		t.Errorf("a key that is not one: %v", err)
	}
}

// TestAMisspelledOverrideIsNamed: a DRIFTBACK_ variable nothing reads is
// named, with the one it most likely meant; those read are not.
func TestAMisspelledOverrideIsNamed(t *testing.T) {
	environ := map[string]string{"DRIFTBACK_GITHUB_APPID": "3", "DRIFTBACK_SERVER_WORKERS": "2", "DRIFTBACK_GITHUB_PRIVATE_KEY": "k", "HOME": "/root"}
	cfg, err := ParseConfig([]byte("github: {appID: 1}\n"), envOf(environ))
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for k, v := range environ {
		list = append(list, k+"="+v)
	}
	got := cfg.UnknownEnv(list)
	if len(got) != 1 || !strings.Contains(got[0], "DRIFTBACK_GITHUB_APPID is not a setting driftback reads") || !strings.Contains(got[0], "did you mean DRIFTBACK_GITHUB_APP_ID?") {
		t.Errorf("unknown: %v", got)
	}
}
