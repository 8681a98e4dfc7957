package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

// Audit is where driftback reads the clusters' audit events, to say who made
// each drift and ask them on its pull request. Off unless listen or file is
// set.
type Audit struct {
	// Listen is the address of the audit webhook endpoint
	// (kube-apiserver's --audit-webhook-config-file points at it), served
	// apart from the GitHub webhook; empty: none.
	Listen string `yaml:"listen"`
	// Cluster names the cluster (a key of clusters) whose apiserver sends
	// to Listen, or whose log File is.
	Cluster string `yaml:"cluster"`
	// TokenFile holds the bearer token the apiserver's webhook
	// configuration sends (DRIFTBACK_AUDIT_TOKEN instead); a request
	// without it is refused unread.
	TokenFile string `yaml:"tokenFile"`
	// TLS serves Listen over TLS; with clientCAFile, only clients with a
	// certificate it signed are served (the token is then optional).
	TLS AuditTLS `yaml:"tls"`
	// File is a log backend's file of JSON lines (--audit-log-path, or
	// what a managed cluster's export writes), followed as it grows:
	// the alternative to Listen.
	File string `yaml:"file"`
	// Retention is how long events are kept, in memory only (default 24h).
	Retention time.Duration `yaml:"retention"`
	// MaxEvents bounds the events kept (default 100000).
	MaxEvents int `yaml:"maxEvents"`
	// MaxBatchBytes bounds one request's body (default 8388608, 8 MiB).
	MaxBatchBytes int64 `yaml:"maxBatchBytes"`
	// RequestsPerSecond bounds the requests Listen serves (default 20,
	// bursts of 40); above it, 429.
	RequestsPerSecond float64 `yaml:"requestsPerSecond"`
	// Identities map the cluster's user names to GitHub logins: the
	// person a drift pull request names is mentioned and asked to review
	// it, if they may read the repository.
	Identities Identities `yaml:"identities"`
}

// AuditTLS is the audit endpoint's TLS.
type AuditTLS struct {
	// CertFile is the endpoint's certificate (PEM).
	CertFile string `yaml:"certFile"`
	// KeyFile is its private key (PEM).
	KeyFile string `yaml:"keyFile"`
	// ClientCAFile, when set, requires a client certificate it signed.
	ClientCAFile string `yaml:"clientCAFile"`
	// ClientNames, when set, are the only client certificates served of
	// those the CA signed: by common name or DNS name
	// ("kube-apiserver-audit"). Set it when the CA signs others'
	// certificates too, as a cluster's CA does.
	ClientNames []string `yaml:"clientNames"`
}

// Identities map cluster user names to GitHub logins.
type Identities struct {
	// Users maps a cluster user name (as the apiserver authenticates
	// them: "alice@example.com", an OIDC claim) to a GitHub login.
	Users map[string]string `yaml:"users"`
	// Prefix is the apiserver's --oidc-username-prefix ("oidc:"), taken
	// off a user name before Users is read.
	Prefix string `yaml:"prefix"`
}

// githubLogin is a GitHub login: letters, digits and single hyphens, at
// most 39.
var githubLogin = regexp.MustCompile(`^[A-Za-z0-9](?:-?[A-Za-z0-9]){0,38}$`)

// Enabled says audit events are read at all.
func (a Audit) Enabled() bool { return a.Listen != "" || a.File != "" }

// validate checks the section; tokenInEnv says DRIFTBACK_AUDIT_TOKEN is set
// (the token then need not be in a file).
func (a Audit) validate(clusters map[string]Cluster, tokenInEnv bool) []string {
	var errs []string
	if !a.Enabled() {
		if a.Cluster != "" || a.TokenFile != "" || len(a.Identities.Users) > 0 {
			errs = append(errs, "audit: set listen or file to read audit events (the rest of audit is unused without them)")
		}
		return errs
	}
	if a.Listen != "" && a.File != "" {
		errs = append(errs, "audit: listen and file are two ways to read one cluster's events: set one")
	}
	if _, ok := clusters[a.Cluster]; !ok {
		errs = append(errs, fmt.Sprintf("audit.cluster: %q is not a key of clusters: name the cluster whose events these are", a.Cluster))
	}
	if a.Listen != "" && a.TLS.ClientCAFile == "" && a.TokenFile == "" && !tokenInEnv {
		errs = append(errs, "audit.listen: set tokenFile (DRIFTBACK_AUDIT_TOKEN) or tls.clientCAFile: nothing unauthenticated is read")
	}
	if (a.TLS.CertFile == "") != (a.TLS.KeyFile == "") || (a.TLS.ClientCAFile != "" && a.TLS.CertFile == "") {
		errs = append(errs, "audit.tls: certFile and keyFile go together, and clientCAFile needs them")
	}
	if a.Listen != "" && a.TLS.CertFile == "" {
		errs = append(errs, "audit.listen: set tls.certFile and tls.keyFile: the apiserver sends its token or certificate only over TLS, and the events hold who did what")
	}
	if len(a.TLS.ClientNames) > 0 && a.TLS.ClientCAFile == "" {
		errs = append(errs, "audit.tls.clientNames: names client certificates, which clientCAFile verifies: set it")
	}
	for user, login := range a.Identities.Users {
		if !githubLogin.MatchString(login) {
			errs = append(errs, fmt.Sprintf("audit.identities.users[%q]: %q is not a GitHub login", user, login))
		}
	}
	if a.Retention < 0 || a.MaxEvents < 0 || a.MaxBatchBytes < 0 || a.RequestsPerSecond < 0 {
		errs = append(errs, "audit: retention, maxEvents, maxBatchBytes and requestsPerSecond are not negative")
	}
	return errs
}

// AuditToken reads the audit endpoint's bearer token: DRIFTBACK_AUDIT_TOKEN,
// else tokenFile; nil when neither is set.
func (a Audit) AuditToken(env func(string) string) ([]byte, error) {
	if v := strings.TrimSpace(env("DRIFTBACK_AUDIT_TOKEN")); v != "" {
		if len(v) < 16 {
			return nil, fmt.Errorf("DRIFTBACK_AUDIT_TOKEN: a token of %d bytes is guessable: use at least 16", len(v))
		}
		return []byte(v), nil
	}
	if a.TokenFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(a.TokenFile)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("audit.tokenFile %s: %v", a.TokenFile, err)
	}
	if b = bytes.TrimSpace(b); len(b) < 16 {
		return nil, fmt.Errorf("audit.tokenFile %s: a token of %d bytes is guessable: use at least 16", a.TokenFile, len(b))
	}
	return b, nil
}
