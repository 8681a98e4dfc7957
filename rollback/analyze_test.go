package rollback

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/scope"
)

// TestARecreatedClaimsVolumeIsLookedForWithinTheScope: finding the volume
// an earlier claim left means reading every PersistentVolume. With the
// target's scope holding the kind, the Released volume is named; without
// it, nothing outside the scope is read and the danger says the volume is
// unknown, never that the data is gone.
func TestARecreatedClaimsVolumeIsLookedForWithinTheScope(t *testing.T) {
	claim := "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n"
	repo, shas := repoWith(t, []map[string]string{
		{"app/claims.yaml": claim},
		{"app/claims.yaml": ""},
	}, []string{"first", "drop the claim"})
	dump := t.TempDir()
	pv := "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: pv-data\nspec:\n  persistentVolumeReclaimPolicy: Retain\n  claimRef: {namespace: shop, name: data}\nstatus:\n  phase: Released\n"
	if err := os.WriteFile(filepath.Join(dump, "pv.yaml"), []byte(pv), 0o644); err != nil {
		t.Fatal(err)
	}
	live, err := livestate.ReadDir(dump)
	if err != nil {
		t.Fatal(err)
	}
	pvKind := schema.GroupKind{Kind: "PersistentVolume"}
	for _, tc := range []struct {
		name          string
		scope         *scope.Scope
		want, wantNot string
		unknown       bool
	}{
		{"no scope (the command line)", nil, "PersistentVolume pv-data (Released, reclaim Retain)", "unknown", false},
		{"a scope with every volume", &scope.Scope{Namespaces: map[string]bool{"shop": true}, ClusterKinds: map[schema.GroupKind]bool{pvKind: true}},
			"PersistentVolume pv-data (Released, reclaim Retain)", "unknown", false},
		{"a scope of the namespace only", &scope.Scope{Namespaces: map[string]bool{"shop": true}},
			"whether a Released PersistentVolume still holds it is unknown, outside this target's scope", "pv-data", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := &drift.Target{Changes: []drift.Change{{APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: "shop", Name: "data", Action: drift.ActionCreate}}}
			err := Analyze(context.Background(), Input{Target: target, Live: live, History: NewHistory(repo, shas[1], DefaultLimits()), Scope: tc.scope})
			if err != nil {
				t.Fatal(err)
			}
			ds := target.Changes[0].Danger
			if len(ds) != 1 || ds[0].Reason != drift.DangerRestoreNotRollback || ds[0].CountUnknown != tc.unknown ||
				!strings.Contains(ds[0].Message, tc.want) || strings.Contains(ds[0].Message, tc.wantNot) {
				t.Errorf("dangers %+v; want one restore-not-rollback saying %q (count unknown: %v)", ds, tc.want, tc.unknown)
			}
		})
	}
}
