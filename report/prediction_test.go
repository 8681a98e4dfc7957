package report

import (
	"slices"
	"strings"
	"testing"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/report/prediction"
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
				{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "shop:reader, all", Action: drift.ActionDelete},
				{APIVersion: "v1", Kind: "Secret", Namespace: "shop", Name: "kept", Action: drift.ActionKeep},
			}},
			{Name: "broken", Cluster: "test", Path: "deploy/broken", LiveError: "cannot read"},
		},
	}
	body := strings.Join(Comment(r, CommentOptions{}), "\n")
	got := prediction.Read(body)
	if len(got) != 1 {
		t.Fatalf("predictions %+v, want the compared target's only", got)
	}
	p := got["test/prod --> x"]
	want := []prediction.Change{
		{Action: drift.ActionUpdate, Ref: object.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "shop", Name: "web"}},
		{Action: drift.ActionCreate, Ref: object.Ref{Version: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "flags"}},
		{Action: drift.ActionDelete, Ref: object.Ref{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "shop:reader, all"}},
	}
	if p.Head != "abc" || !slices.Equal(p.Changes, want) {
		t.Errorf("read back %+v, want head abc and %+v", p, want)
	}
	// A comparison that is not a pull request's (a check run's summary,
	// the command line) records nothing.
	r.Compared = nil
	if got := prediction.Read(strings.Join(Comment(r, CommentOptions{}), "\n")); len(got) != 0 {
		t.Errorf("a comparison without a head recorded %+v", got)
	}
}
