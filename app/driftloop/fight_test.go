package driftloop

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/drift/object"
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

// TestAFightIsReadFromTheObjectBetweenLooks: the loop looks only while the
// pipeline holds the field (each look slower than a round of the fight);
// the object's record of when the applier last wrote shows the rounds it
// missed, so the fight is seen all the same. A person's change the
// applier never touched since is no fight.
func TestAFightIsReadFromTheObjectBetweenLooks(t *testing.T) {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	held := func(min int) object.Field {
		at := start.Add(time.Duration(min) * time.Minute)
		return object.Field{Path: ".spec.replicas", Manager: "deploy-pipeline", Live: int64(5), Desired: int64(2), Time: &at}
	}
	live := func(applierMin int) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"}}}
		o.SetManagedFields([]metav1.ManagedFieldsEntry{
			{Manager: "kustomize-controller", Operation: metav1.ManagedFieldsOperationApply, Time: &metav1.Time{Time: start.Add(time.Duration(applierMin) * time.Minute)}},
			{Manager: "deploy-pipeline", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "scale"},
		})
		return o
	}
	fw := &fieldWatch{}
	// Looks at 0:30, 3:30 and 5:30; the pipeline wrote at 0, 3 and 5, the
	// applier at 2 and 4 (and before it all, at -10).
	fw.observeDrift(held(0), live(-10), start.Add(30*time.Second), time.Hour)
	fw.observeDrift(held(3), live(2), start.Add(3*time.Minute+30*time.Second), time.Hour)
	fw.observeDrift(held(5), live(4), start.Add(5*time.Minute+30*time.Second), time.Hour)
	if f, ok := fw.fight(time.Hour); !ok || f.Changes != 4 {
		t.Errorf("the fight between looks is not seen: %+v %+v", f, fw.hands)
	}
	// A client-side apply (an Update) patches only what Git changed: its
	// writes between looks say nothing of this field.
	csa := func(applierMin int) *unstructured.Unstructured {
		o := live(applierMin)
		m := o.GetManagedFields()
		m[0].Operation = metav1.ManagedFieldsOperationUpdate
		o.SetManagedFields(m)
		return o
	}
	fw = &fieldWatch{}
	fw.observeDrift(held(0), csa(-10), start.Add(30*time.Second), time.Hour)
	fw.observeDrift(held(3), csa(2), start.Add(3*time.Minute+30*time.Second), time.Hour)
	fw.observeDrift(held(5), csa(4), start.Add(5*time.Minute+30*time.Second), time.Hour)
	if _, ok := fw.fight(time.Hour); ok {
		t.Errorf("a client-side applier's writes read as rounds of a fight: %+v", fw.hands)
	}
	// A person scaled once; the applier last wrote before it: no fight,
	// however often the loop looks.
	fw = &fieldWatch{}
	for look := range 4 {
		fw.observeDrift(held(0), live(-10), start.Add(time.Duration(look+1)*time.Minute), time.Hour)
	}
	if _, ok := fw.fight(time.Hour); ok || len(fw.hands) != 1 {
		t.Errorf("a change that stays reads as a fight: %+v", fw.hands)
	}
}
