package targets

import (
	"testing"

	"github.com/driftback/driftback/app/config"
)

// FuzzRepoConfig: any .github/driftback.yml on a default branch refines the
// operator's targets or is refused, never a panic, and never names a
// cluster the operator did not give.
func FuzzRepoConfig(f *testing.F) {
	for _, s := range []string{
		"targets:\n- path: deploy/prod\n  policy:\n    failOn: [pvc-removal]\n",
		"targets:\n- path: deploy/prod\n  cluster: elsewhere\n",
		"targets: [\n",
		"x: y\n",
	} {
		f.Add([]byte(s))
	}
	ts := []Target{{Target: config.Target{Name: "prod", Repo: "o/r", Path: "deploy/prod", Cluster: "prod"}}}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := Refine(ts, b)
		if err != nil {
			return
		}
		for _, tg := range out {
			if tg.Cluster != "prod" {
				t.Fatalf("the repository's file moved a target to cluster %q", tg.Cluster)
			}
		}
	})
}
