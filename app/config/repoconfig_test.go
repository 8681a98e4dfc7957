package config

import (
	"strings"
	"testing"

	"github.com/driftback/driftback/drift"
)

func TestRepositoryConfigRefinesPolicyOnly(t *testing.T) {
	targets := []Target{{Name: "prod", Repo: "a/b", Path: "x", Cluster: "c", Policy: Policy{AckLabel: DefaultAckLabel}}}
	got, err := Refine(targets, []byte("targets:\n- name: prod\n  policy:\n    failOn: [crd-removal]\n    ackLabel: ok-to-prune\n    drafts: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := got[0].Policy; len(p.FailOn) != 1 || p.FailOn[0] != drift.DangerCRDRemoval || p.AckLabel != "ok-to-prune" || !p.Drafts || got[0].Cluster != "c" {
		t.Errorf("refined: %+v", got[0])
	}
	if targets[0].Policy.AckLabel != DefaultAckLabel {
		t.Errorf("refine changed app.yml's targets")
	}
	bad := map[string]string{
		"naming a cluster":  "targets:\n- name: prod\n  cluster: elsewhere\n",
		"fork access":       "targets:\n- name: prod\n  policy:\n    forkLive: true\n",
		"an unknown target": "targets:\n- name: other\n",
		"an unknown key":    "targets:\n- name: prod\n  polcy: {}\n",
		"an unknown danger": "targets:\n- name: prod\n  policy:\n    failOn: [nope]\n",
	}
	for name, y := range bad {
		t.Run(name, func(t *testing.T) {
			got, err := Refine(targets, []byte(y))
			if err == nil || !strings.Contains(err.Error(), RepoConfigPath) {
				t.Errorf("error %v, want one naming %s", err, RepoConfigPath)
			}
			if got[0].Cluster != "c" || got[0].Policy.AckLabel != DefaultAckLabel {
				t.Errorf("a rejected file still changed the targets: %+v", got[0])
			}
		})
	}
	_, err = Refine(targets, []byte("targets:\n- name: prod\n  cluster: elsewhere\n"))
	if !strings.Contains(err.Error(), ":3:") {
		t.Errorf("the error does not name the line: %v", err)
	}
}
