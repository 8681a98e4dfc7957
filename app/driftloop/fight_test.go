package driftloop

import (
	"testing"
	"time"
)

func TestAFightIsThreeChangesOfHandsBetweenTwoWriters(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		managers []string
		gap      time.Duration
		fight    bool
	}{
		{"back and forth twice", []string{"pipeline", "kustomize-controller", "pipeline", "kustomize-controller"}, time.Minute, true},
		{"one change, then the reconciler", []string{"kubectl", "kustomize-controller"}, time.Minute, false},
		{"three writers", []string{"a", "kustomize-controller", "b", "kustomize-controller"}, time.Minute, false},
		{"spread over more than the window", []string{"pipeline", "kustomize-controller", "pipeline", "kustomize-controller"}, 40 * time.Minute, false},
	} {
		fw := &fieldWatch{}
		for i, m := range tc.managers {
			fw.observe(m, i%2, at.Add(time.Duration(i)*tc.gap), time.Hour)
		}
		f, ok := fw.fight(time.Hour)
		if ok != tc.fight {
			t.Errorf("%s: fight %v, want %v (%+v)", tc.name, ok, tc.fight, fw.hands)
		}
		if ok && f.Managers != [2]string{"kustomize-controller", "pipeline"} {
			t.Errorf("%s: managers %v, the reconciler first", tc.name, f.Managers)
		}
	}
}
