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
	} {
		if errs := c.a.validate(clusters); !strings.Contains(strings.Join(errs, "\n"), c.want) {
			t.Errorf("%s: %v, want %q", name, errs, c.want)
		}
	}
	if errs := (Audit{File: "/x", Cluster: "prod", Identities: Identities{Users: map[string]string{"alice@example.com": "alice-gh"}}}).validate(clusters); len(errs) != 0 {
		t.Errorf("a good section: %v", errs)
	}
}
