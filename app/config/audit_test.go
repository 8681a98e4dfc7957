package config

import (
	"strings"
	"testing"
)

// TestTheAuditSectionIsChecked: what would read events unauthenticated, name
// no known cluster, or map a person to something that is not a GitHub login
// is refused before anything listens.
func TestTheAuditSectionIsChecked(t *testing.T) {
	clusters := map[string]Cluster{"prod": {}}
	for name, c := range map[string]struct {
		a    Audit
		want string
	}{
		"no credential":       {Audit{Listen: ":8444", Cluster: "prod"}, "set tokenFile"},
		"unknown cluster":     {Audit{File: "/var/log/audit.log", Cluster: "nope"}, `audit.cluster: "nope"`},
		"both ways":           {Audit{Listen: ":8444", File: "/x", Cluster: "prod", TokenFile: "/t"}, "set one"},
		"a login that is not": {Audit{File: "/x", Cluster: "prod", Identities: Identities{Users: map[string]string{"alice": "alice\nCo-authored-by: x"}}}, "is not a GitHub login"},
		"unused":              {Audit{Identities: Identities{Users: map[string]string{"a": "b"}}}, "set listen or file"},
		"no TLS":              {Audit{Listen: ":8444", Cluster: "prod", TokenFile: "/t"}, "set tls.certFile"},
		"names without a CA":  {Audit{Listen: ":8444", Cluster: "prod", TokenFile: "/t", TLS: AuditTLS{CertFile: "/c", KeyFile: "/k", ClientNames: []string{"kube-apiserver"}}}, "clientNames"},
	} {
		if errs := c.a.validate(clusters, false); !strings.Contains(strings.Join(errs, "\n"), c.want) {
			t.Errorf("%s: %v, want %q", name, errs, c.want)
		}
	}
	if errs := (Audit{Listen: ":8444", Cluster: "prod", TLS: AuditTLS{CertFile: "/c", KeyFile: "/k"}}).validate(clusters, true); len(errs) != 0 {
		t.Errorf("the token in DRIFTBACK_AUDIT_TOKEN: %v", errs)
	}
	if _, err := (Audit{}).AuditToken(func(string) string { return "short" }); err == nil || !strings.Contains(err.Error(), "guessable") {
		t.Errorf("a short DRIFTBACK_AUDIT_TOKEN: %v", err)
	}
	for _, good := range []Audit{
		{File: "/x", Cluster: "prod", Identities: Identities{Users: map[string]string{"alice@example.com": "alice-gh"}}},
		{Listen: ":8444", Cluster: "prod", TokenFile: "/t", TLS: AuditTLS{CertFile: "/c", KeyFile: "/k"}},
		{Listen: ":8444", Cluster: "prod", TLS: AuditTLS{CertFile: "/c", KeyFile: "/k", ClientCAFile: "/ca", ClientNames: []string{"kube-apiserver"}}},
	} {
		if errs := good.validate(clusters, false); len(errs) != 0 {
			t.Errorf("a good section %+v: %v", good, errs)
		}
	}
}
