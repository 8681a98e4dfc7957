package github

import (
	"strings"
	"testing"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/discover"
)

// TestDriftBranchesAndIssuesAreNamedByTheTargetsSlug: two discovered targets
// whose names slug alike (dev/a-b/c and dev/a/b-c) get a drift branch and a
// drift issue each, named by their own slug, so that one never closes the
// other's (targets.TestDriftBranchesAreUniquePerTarget makes the slugs).
func TestDriftBranchesAndIssuesAreNamedByTheTargetsSlug(t *testing.T) {
	cfg, err := config.ParseConfig([]byte("clusters:\n  dev: {}\n"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	found := func(ns, name string) *discover.Found {
		return &discover.Found{Object: "Kustomization " + ns + "/" + name, Namespace: ns, Name: name, On: "dev", Repo: "acme/gitops",
			Path: "apps/" + ns + "/" + name, Cluster: "dev"}
	}
	ts, _ := targets.Merge(cfg, []*discover.Found{found("a-b", "c"), found("a", "b-c")})
	if len(ts) != 2 {
		t.Fatalf("%d targets", len(ts))
	}
	seen := map[string]bool{}
	for _, tg := range ts {
		p := &DriftPublisher{Target: tg}
		slug := tg.Slug()
		if p.branch() != config.DriftBranchPrefix+slug || !strings.Contains(p.reportMarker(), "target="+slug+" ") {
			t.Errorf("%s: branch %s, marker %s: want both named by %s", tg.Name, p.branch(), p.reportMarker(), slug)
		}
		if seen[p.branch()] {
			t.Errorf("%s: branch %s is another target's", tg.Name, p.branch())
		}
		seen[p.branch()] = true
	}
}
