package discover_test

import (
	"strings"
	"testing"
	"time"

	"github.com/driftback/driftback/discover"
)

// TestEachReconcilerSaysWhatBecomesOfALiveChange: Flux reverts at its next
// interval, Argo CD at once with selfHeal and only at its next synced
// commit without; a suspended or unknown reconciler says nothing.
func TestEachReconcilerSaysWhatBecomesOfALiveChange(t *testing.T) {
	for _, c := range []struct {
		name string
		f    *discover.Found
		want string
	}{
		{"flux", &discover.Found{Reconciler: discover.ReconcilerFlux, Interval: 10 * time.Minute}, "its next apply, at most 10m after a change, reverts the fields Git sets"},
		{"argo self-heal", &discover.Found{Reconciler: discover.ReconcilerArgoCD, SelfHeal: true}, "self-heal syncs as soon as it sees a change"},
		{"argo without", &discover.Found{Reconciler: discover.ReconcilerArgoCD}, "a live change stays until the next commit it syncs"},
		{"suspended", &discover.Found{Reconciler: discover.ReconcilerFlux, Interval: time.Minute, Suspended: "suspended"}, ""},
		{"app.yml alone", nil, ""},
	} {
		got := c.f.Fate()
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
