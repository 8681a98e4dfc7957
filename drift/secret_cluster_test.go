package drift_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/report"
	"github.com/driftback/driftback/report/jsonreport"
)

// TestSecretValuesNeverShow puts a canary value in a Secret at base, at head
// and live (including kubectl's last-applied annotation, which copies it) and
// proves no output of either mode shows it, in any encoding, while the changed
// keys are still named.
func TestSecretValuesNeverShow(t *testing.T) {
	const canary = "CANARY-secret-value-5d1e"
	c := newCluster(t)
	ns := c.env.Namespace
	secret := func(token, extra string) *unstructured.Unstructured {
		y := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: " + ns + "\ntype: Opaque\nstringData:\n  token: " + canary + token + "\n"
		if extra != "" {
			y += "  extra: " + canary + extra + "\n"
		}
		return obj(t, y)
	}
	base, head := secret("-base", ""), secret("-head", "-new")
	live := secret("-live", "")
	live.SetAnnotations(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"stringData":{"token":"` + canary + `-live"}}`})
	c.apply(live, "kustomize-controller")

	reader, err := livestate.NewClusterReader(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dry, err := livestate.NewServerDryRun(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	forms := []string{canary, base64.StdEncoding.EncodeToString([]byte(canary))[:20]}
	for _, mode := range []drift.Mode{drift.ModeReadOnly, drift.ModeDryRun} {
		opts := drift.DefaultOptions()
		opts.Mode, opts.DryRun = mode, dry
		target, err := drift.Compare(context.Background(), reader, drift.Input{Path: "app", Base: []*unstructured.Unstructured{base}, Head: []*unstructured.Unstructured{head}, HasBase: true}, opts)
		if err != nil {
			t.Fatal(err)
		}
		rep := &drift.Report{Targets: []drift.Target{*target}}
		js, err := jsonreport.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		outputs := map[string]string{"json": string(js), "markdown": strings.Join(report.Comment(rep, report.CommentOptions{}), "")}
		for name, out := range outputs {
			for _, f := range forms {
				if strings.Contains(out, f) {
					t.Errorf("%s: the %s output contains the secret value (%s)", mode, name, f)
				}
			}
		}
		if !strings.Contains(outputs["markdown"], "Secret keys changed: `extra` (added), `token` (values hidden)") {
			t.Errorf("%s: the changed keys are not named:\n%s", mode, outputs["markdown"])
		}
	}
}

// TestIgnoreRules proves fields owned by ignored managers (the HPA through the
// scale subresource by default) and fields selected by an ignore rule's JSON
// pointer leave the diff, and nothing else does.
func TestIgnoreRules(t *testing.T) {
	c := newCluster(t)
	desired := obj(t, inNS(webDeployment, c.env.Namespace))
	c.apply(desired, "kustomize-controller")
	c.scale(desired, "kube-controller-manager", 6) // the HPA
	c.edit(desired, "kubectl-edit", func(u *unstructured.Unstructured) {
		setContainer(u, 0, "image", "nginx:debug")
		l := u.GetLabels()
		l["app"] = "changed"
		u.SetLabels(l)
	})
	paths := func(opts drift.Options) []string {
		target := compareOn(t, c, []*unstructured.Unstructured{desired}, []*unstructured.Unstructured{desired}, opts)
		return changedFields(target.Changes)
	}
	all := drift.Options{}
	if got := paths(all); len(got) != 3 {
		t.Errorf("without ignores: %v, want replicas, image and label", got)
	}
	opts := drift.DefaultOptions()
	opts.Ignore = []object.IgnoreRule{{Kind: "Deployment", Name: "w*", JSONPointers: []string{"/spec/template/spec/containers/*/image"}}}
	got := paths(opts)
	if len(got) != 1 || got[0] != "Deployment .metadata.labels.app" {
		t.Errorf("with the HPA and the image ignored: %v", got)
	}
	opts.Ignore = []object.IgnoreRule{{Managers: []string{"kubectl-*"}}}
	if got := paths(opts); len(got) != 0 {
		t.Errorf("with kubectl-* ignored: %v", got)
	}
}

// TestASecretCannotBeGuessedFromTheComparison: a masked value still says
// whether two values are equal, so a pull request that sets a Secret's value
// to a guess would learn, from "changed" or "no change", whether the guess
// is the live value. With SecretsFromGit (a fork's pull request), the live
// values stand for the base's: the right guess and a wrong one read alike,
// and what Git changes still shows.
func TestASecretCannotBeGuessedFromTheComparison(t *testing.T) {
	c := newCluster(t)
	ns := c.env.Namespace
	secret := func(password string) *unstructured.Unstructured {
		return obj(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: "+ns+"\ntype: Opaque\nstringData:\n  password: "+password+"\n")
	}
	c.apply(secret("the-live-one"), "kustomize-controller")
	reader, err := livestate.NewClusterReader(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	changed := func(guess string, fromGit bool) int {
		t.Helper()
		opts := drift.DefaultOptions()
		opts.SecretsFromGit = fromGit
		in := drift.Input{Path: "db", Base: []*unstructured.Unstructured{secret("placeholder")}, Head: []*unstructured.Unstructured{secret(guess)}, HasBase: true}
		target, err := drift.Compare(context.Background(), reader, in, opts)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ch := range target.Changes {
			n += len(ch.Fields)
		}
		return n
	}
	// Without it, the guess is answered: that is what it prevents.
	if right, wrong := changed("the-live-one", false), changed("wrong-guess", false); right == wrong {
		t.Fatalf("compared with live values, the right guess (%d fields) and a wrong one (%d) read alike: the test proves nothing", right, wrong)
	}
	right, wrong := changed("the-live-one", true), changed("wrong-guess", true)
	if right != wrong || right == 0 {
		t.Errorf("compared in Git only: the right guess changes %d fields, a wrong one %d; want the same, and the Git change shown", right, wrong)
	}
	if same := changed("placeholder", true); same != 0 {
		t.Errorf("a head that keeps the base's value shows %d changed fields", same)
	}
}
