package prgen

import "testing"

func plan(value any) *Plan {
	return &Plan{Overlay: "apps/web", Files: map[string][]byte{"apps/web/kustomization.yaml": []byte("x")},
		Codified: []Codified{{Object: "Deployment/shop/web", Path: ".spec.replicas", Value: value}}}
}

func TestFingerprintIsStable(t *testing.T) {
	a := &Plan{Overlay: "o", Codified: []Codified{{Object: "A", Path: ".x", Value: 1}, {Object: "B", Path: ".y", Value: "v"}},
		Secrets: []SecretDrift{{Object: "S", Keys: []string{"b", "a"}}}}
	b := &Plan{Overlay: "o", Codified: []Codified{{Object: "B", Path: ".y", Value: "v"}, {Object: "A", Path: ".x", Value: 1}},
		Secrets: []SecretDrift{{Object: "S", Keys: []string{"a", "b"}}}}
	if a.Fingerprint() != b.Fingerprint() {
		t.Errorf("the same drift in another order has another fingerprint")
	}
	if plan(5).Fingerprint() == plan(6).Fingerprint() {
		t.Errorf("different live values share a fingerprint")
	}
	if got := FingerprintOf("text\n" + body(plan(5))); got != plan(5).Fingerprint() {
		t.Errorf("FingerprintOf(Body) = %q", got)
	}
}

// TestDecide covers the life of a drift pull request: opened once, updated
// when the drift changes, left alone when it does not, closed when the drift
// goes, never reopened after a person closed or merged it (closing a newer one
// that proposes values the cluster went back from), and not overwritten once
// a person pushed to it.
func TestDecide(t *testing.T) {
	five, six := plan(5), plan(6)
	openFive := PullRequest{Number: 3, Open: true, Body: body(five)}
	closedFive := PullRequest{Number: 2, Body: body(five)}
	mergedFive := PullRequest{Number: 1, Merged: true, Body: body(five)}
	cases := []struct {
		name   string
		plan   *Plan
		pulls  []PullRequest
		pushed bool
		want   Action
		number int
	}{
		{"new drift", five, nil, false, ActionOpen, 0},
		{"the same drift again", five, []PullRequest{openFive}, false, ActionNothing, 3},
		{"the drift changed", six, []PullRequest{openFive}, false, ActionUpdate, 3},
		{"the drift changed after a person pushed", six, []PullRequest{openFive}, true, ActionComment, 3},
		{"the drift is gone", &Plan{Overlay: "apps/web"}, []PullRequest{openFive}, false, ActionClose, 3},
		{"no drift, no pull request", &Plan{Overlay: "apps/web"}, nil, false, ActionNothing, 0},
		{"a person closed this drift's pull request", five, []PullRequest{closedFive}, false, ActionNothing, 2},
		{"a different drift after a person closed one", six, []PullRequest{closedFive}, false, ActionOpen, 0},
		{"the same drift after a merge (a Secret or a manual edit Git cannot hold)", five, []PullRequest{mergedFive}, false, ActionNothing, 1},
		{"the drift went back to what a person declined", five, []PullRequest{{Number: 4, Open: true, Body: body(six)}, closedFive}, false, ActionClose, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.plan, tc.pulls, tc.pushed)
			if d.Action != tc.want || d.Number != tc.number || d.Reason == "" {
				t.Errorf("Decide = %+v, want %s on #%d", d, tc.want, tc.number)
			}
		})
	}
}

// body stands for a drift pull request's description: some text and the
// fingerprint marker.
func body(p *Plan) string { return "## Drift\n\ntext\n" + FingerprintMarker(p) + "\n" }
