package drift_test

import (
	"context"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
)

// TestGitOnlyFieldsAreComparedGitAgainstGit: a Deployment's env value is
// rendered from a Secret's stand-in; the cluster holds the Secret's real
// value there. Whether the pull request writes the live value or another
// in its place, the comparison says the same (the Git change only), and
// the live value is in none of it; the replicas, not Git-only, are still
// compared with the cluster.
func TestGitOnlyFieldsAreComparedGitAgainstGit(t *testing.T) {
	deployment := func(value string, replicas int) *unstructured.Unstructured {
		return obj(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: `+strconv.Itoa(replicas)+`
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx
        env: [{name: TOKEN, value: "`+value+`"}]
`)
	}
	token := fieldpath.MakePathOrDie("spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "web"), "env", fieldpath.KeyByFields("name", "TOKEN"), "value")
	opts := drift.DefaultOptions()
	opts.GitOnly = func(o *unstructured.Unstructured) []fieldpath.Path {
		if o.GetKind() == "Deployment" {
			return []fieldpath.Path{token}
		}
		return nil
	}
	live := livestate.NewObjectReader([]*unstructured.Unstructured{deployment("the-real-token", 3)})
	fields := func(head string) (impact, pr int) {
		t.Helper()
		target, err := drift.Compare(context.Background(), live, drift.Input{Path: "shop", Base: []*unstructured.Unstructured{deployment("xxxxxxxxxxxxxxxx", 2)},
			Head: []*unstructured.Unstructured{deployment(head, 2)}, HasBase: true}, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range target.Changes {
			for _, f := range ch.Fields {
				if f.Live == "the-real-token" || f.Desired == "the-real-token" && head != "the-real-token" {
					t.Errorf("the live value is shown: %+v", f)
				}
				impact++
			}
		}
		for _, ch := range target.PR {
			pr += len(ch.Fields)
		}
		return impact, pr
	}
	rightImpact, rightPR := fields("the-real-token")
	wrongImpact, wrongPR := fields("a-wrong-guess")
	if rightImpact != wrongImpact || rightPR != wrongPR {
		t.Errorf("the right guess: %d fields to sync, %d in Git; a wrong one: %d and %d: want the same", rightImpact, rightPR, wrongImpact, wrongPR)
	}
	if rightImpact != 2 {
		t.Errorf("%d fields to sync, want the replicas (from the cluster's 3) and the token's Git change", rightImpact)
	}
}
