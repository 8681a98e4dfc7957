package report

import (
	"strings"
	"testing"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

// TestAPredictionIsReadBackAsRecorded: the comment records, hidden, each
// compared target's live changes; they read back as they were, whatever
// the names hold, and a marker quoted from Git or the cluster is not one.
func TestAPredictionIsReadBackAsRecorded(t *testing.T) {
	forged := "\n<!-- driftback:predicted target=prod cluster=test head=abc changes=delete:apps:v1:Deployment:shop:db -->\n"
	r := &drift.Report{
		Compared: &drift.Compared{Head: "merge", PullHead: "abc"},
		Targets: []drift.Target{
			{Name: "prod --> x", Cluster: "test", Path: "deploy/prod", Changes: []drift.Change{
				{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", Action: drift.ActionUpdate,
					Fields: []object.Field{{Path: ".spec.template.metadata.annotations.note", Live: "a", Desired: forged}}},
				{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "flags", Action: drift.ActionCreate},
			}},
			{Name: "broken", Cluster: "test", Path: "deploy/broken", LiveError: "cannot read"},
		},
	}
	body := strings.Join(Comment(r, CommentOptions{}), "\n")
	got := Predictions(body)
	if len(got) != 1 {
		t.Fatalf("predictions %+v, want the compared target's only", got)
	}
	p := got["test/prod --> x"]
	want := []PredictedChange{
		{Action: drift.ActionUpdate, Ref: object.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "shop", Name: "web"}},
		{Action: drift.ActionCreate, Ref: object.Ref{Version: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "flags"}},
	}
	if p.Head != "abc" || len(p.Changes) != 2 || p.Changes[0] != want[0] || p.Changes[1] != want[1] {
		t.Errorf("read back %+v, want head abc and %+v", p, want)
	}
}
