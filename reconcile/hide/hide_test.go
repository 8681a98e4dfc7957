package hide

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

// TestHideSubstitutedNamesObjectsAsWritten: an object whose source uses a
// Secret's variable is shown by its identity as Git writes it, wherever the
// report names it: its change, and the list of what a removal deletes with
// it. A value derived from the Secret (here its first six characters) is in
// no part of the report.
func TestHideSubstitutedNamesObjectsAsWritten(t *testing.T) {
	const piece = "s3cr3t" // ${TOKEN:0:6}
	objects := map[string]AsWritten{Key("ConfigMap", "a-"+piece): {Name: "a-${TOKEN:0:6}"}}
	target := &drift.Target{Changes: []drift.Change{
		{Kind: "ConfigMap", Namespace: "team", Name: "a-" + piece, Action: drift.ActionDelete,
			Fields: []object.Field{{Path: ".data.k", Live: piece + "-value"}}},
		{Kind: "Namespace", Name: "team", Action: drift.ActionDelete, Danger: []drift.Danger{{
			Reason: drift.DangerNamespaceRemoval, Count: 2,
			Lost: []drift.Lost{{Kind: "ConfigMap", Namespace: "team", Name: "a-" + piece, InGit: true}, {Kind: "ConfigMap", Namespace: "team", Name: "plain"}},
		}}},
	}}
	Substituted(target, objects)
	b, err := json.Marshal(target)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), piece) {
		t.Errorf("the report still carries a piece of the Secret:\n%s", b)
	}
	if !strings.Contains(string(b), `"a-${TOKEN:0:6}"`) || !strings.Contains(string(b), `"plain"`) {
		t.Errorf("the objects are not named as written:\n%s", b)
	}
}
