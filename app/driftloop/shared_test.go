package driftloop

import (
	"strings"
	"testing"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/internal/testfs"
	"github.com/driftback/driftback/prgen"
)

// TestAnEditAnotherTargetRendersIsNotProposed: the canary overlay builds
// the store overlay as its base. A write-back of the store's drift into
// the store's kustomization would change the canary too: nothing is
// written, and each field is listed for a person, naming the canary. An
// edit only the store renders is proposed as planned.
func TestAnEditAnotherTargetRendersIsNotProposed(t *testing.T) {
	tree := testfs.Tree(t, map[string]string{
		"fleet/store/kustomization.yaml":  "resources: [deploy.yaml]\n",
		"fleet/store/deploy.yaml":         "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: store}\n",
		"fleet/canary/kustomization.yaml": "resources: [../store]\nnameSuffix: -canary\n",
		"fleet/other/kustomization.yaml":  "resources: []\n",
	})
	target := func(name, path string) targets.Target {
		return targets.Target{Target: config.Target{Name: name, Repo: "acme/gitops", Path: path}}
	}
	store := target("store", "fleet/store")
	all := []targets.Target{store, target("canary", "fleet/canary"), target("other", "fleet/other")}
	plan := func() *prgen.Plan {
		return &prgen.Plan{
			Files:    map[string][]byte{"fleet/store/kustomization.yaml": []byte("replicas: [{name: store, count: 3}]\n")},
			Codified: []prgen.Codified{{Object: "Deployment/shop/store", Path: ".spec.replicas", Value: int64(3), File: "fleet/store/kustomization.yaml"}},
			Manual:   []prgen.Manual{},
		}
	}
	p := plan()
	refuseShared(p, targets.ReadByOthers(store, all, tree, p.Paths()))
	if len(p.Files) != 0 || len(p.Codified) != 0 || len(p.Manual) != 1 {
		t.Fatalf("files %v, codified %+v, manual %+v: want nothing written, the field listed", p.Paths(), p.Codified, p.Manual)
	}
	if why := p.Manual[0].Reason; !strings.Contains(why, "fleet/store/kustomization.yaml") || !strings.Contains(why, "target canary renders") {
		t.Errorf("the reason: %q", why)
	}
	// The reconciler's own manifest, which its parent applies, is where its
	// build options live: never checked.
	if got := overlayFiles(store, tree, []string{"fleet/store/kustomization.yaml", "clusters/prod/store.yaml"}); len(got) != 1 || got[0] != "fleet/store/kustomization.yaml" {
		t.Errorf("the overlay's files among the plan's: %v", got)
	}
	// Targets that read nothing of the store leave its plan as it is.
	p = plan()
	refuseShared(p, targets.ReadByOthers(store, []targets.Target{store, target("other", "fleet/other")}, tree, p.Paths()))
	if len(p.Files) != 1 || len(p.Codified) != 1 || len(p.Manual) != 0 {
		t.Errorf("no other target renders the file: files %v, codified %+v, manual %+v", p.Paths(), p.Codified, p.Manual)
	}
}
