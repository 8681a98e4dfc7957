package drift_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/drift/scope"
)

// goTyped is a Deployment as kyaml's Map() gives one after Flux's postBuild
// substitution, and as other producers might: Go ints, float32, typed maps
// and slices, json.Number.
func goTyped(ns string, replicas int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": ns, "labels": map[string]string{"app": "web"}},
		"spec": map[string]any{
			"replicas":             replicas,
			"revisionHistoryLimit": int32(4),
			"selector":             map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{
					"terminationGracePeriodSeconds": json.Number("30"),
					"containers": []map[string]any{{
						"name": "web", "image": "web:1", "args": []string{"--port", "8080"},
						"ports":     []any{map[string]any{"containerPort": uint16(8080)}},
						"resources": map[string]any{"limits": map[string]any{"cpu": float32(0.5)}},
					}},
				},
			},
		},
	}}
}

// assertJSONTyped fails unless v holds JSON types only.
func assertJSONTyped(t *testing.T, at string, v any) {
	t.Helper()
	switch v := v.(type) {
	case nil, string, bool, int64, float64:
	case map[string]any:
		for k, e := range v {
			assertJSONTyped(t, at+"."+k, e)
		}
	case []any:
		for i, e := range v {
			assertJSONTyped(t, fmt.Sprintf("%s[%d]", at, i), e)
		}
	default:
		t.Errorf("%s holds a %T", at, v)
	}
}

// TestTypedGivesJSONTypesOnly: whatever produced an object, what reaches the
// comparison holds the apiserver decoder's types, with the same values, and
// the producer's object is left as it was.
func TestTypedGivesJSONTypesOnly(t *testing.T) {
	in := goTyped("shop", 3)
	out, err := object.Typed([]*unstructured.Unstructured{in})
	if err != nil {
		t.Fatal(err)
	}
	assertJSONTyped(t, "", out[0].Object)
	for path, want := range map[string]any{
		"spec.replicas": int64(3), "spec.revisionHistoryLimit": int64(4),
		"spec.template.spec.terminationGracePeriodSeconds": int64(30),
	} {
		got, _, _ := unstructured.NestedFieldNoCopy(out[0].Object, strings.Split(path, ".")...)
		if got != want {
			t.Errorf("%s = %#v, want %#v", path, got, want)
		}
	}
	c := out[0].Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	if c["ports"].([]any)[0].(map[string]any)["containerPort"] != int64(8080) || c["resources"].(map[string]any)["limits"].(map[string]any)["cpu"] != float64(float32(0.5)) {
		t.Errorf("container: %#v", c)
	}
	if _, ok := in.Object["spec"].(map[string]any)["replicas"].(int); !ok {
		t.Error("the producer's object was changed")
	}
	typed := out[0]
	again, err := object.Typed([]*unstructured.Unstructured{typed})
	if err != nil || again[0] != typed {
		t.Errorf("an object of JSON types only is passed through as it is: %v", err)
	}
}

// TestTypedNamesWhatItCannotConvert: a value with no JSON form is an error
// naming the object and the field, not a panic.
func TestTypedNamesWhatItCannotConvert(t *testing.T) {
	for _, c := range []struct {
		name  string
		value any
		want  string
	}{
		{"a struct", struct{ A int }{1}, ".spec.extra holds a value of Go type struct"},
		{"a map with integer keys", map[any]any{1: "x"}, ".spec.extra: a key of type int"},
		{"an unsigned integer past int64", uint64(1 << 63), ".spec.extra: 9223372036854775808 is larger"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := goTyped("shop", 1)
			o.Object["spec"].(map[string]any)["extra"] = c.value
			_, err := object.Typed([]*unstructured.Unstructured{o})
			if err == nil || !strings.Contains(err.Error(), "Deployment/web in shop") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming Deployment/web in shop and %q", err, c.want)
			}
			_, err = drift.Compare(context.Background(), nil, drift.Input{Path: "app", Head: []*unstructured.Unstructured{o}}, drift.DefaultOptions())
			if err == nil || !strings.Contains(err.Error(), "Deployment/web in shop") {
				t.Errorf("Compare: %v, want the object named", err)
			}
		})
	}
}

// TestCompareTakesObjectsOfGoTypes: an object holding Go ints (Flux's
// substitution hands them over) is compared, in Git and against the live
// cluster, instead of panicking in a deep copy.
func TestCompareTakesObjectsOfGoTypes(t *testing.T) {
	c := newCluster(t)
	live := obj(t, inNS(webDeployment, c.env.Namespace))
	c.apply(live, "kustomize-controller")
	reader, err := livestate.NewClusterReader(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	base, head := goTyped(c.env.Namespace, 3), goTyped(c.env.Namespace, 4)
	snap, err := livestate.NewSnapshot(context.Background(), reader, []*unstructured.Unstructured{base, head})
	if err != nil {
		t.Fatal(err)
	}
	scope, err := scope.Of(context.Background(), snap, []*unstructured.Unstructured{base})
	if err != nil {
		t.Fatal(err)
	}
	opts := drift.DefaultOptions()
	opts.Scope = scope
	target, err := drift.Compare(context.Background(), snap, drift.Input{Path: "app", Base: []*unstructured.Unstructured{base}, Head: []*unstructured.Unstructured{head}, HasBase: true}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(target.PR) != 1 || !hasField(target.PR[0], ".spec.replicas", int64(3), int64(4)) {
		t.Errorf("PR: %+v", target.PR)
	}
	if len(target.Changes) != 1 || !hasField(target.Changes[0], ".spec.replicas", int64(3), int64(4)) {
		t.Errorf("changes: %+v", target.Changes)
	}
}

// hasField says whether a change has a field at path going from live to
// desired, the values compared as JSON shows them (a render's 3 may be a
// float64, the apiserver's an int64).
func hasField(ch drift.Change, path string, live, desired any) bool {
	for _, f := range ch.Fields {
		if f.Path == path && fmt.Sprint(f.Live) == fmt.Sprint(live) && fmt.Sprint(f.Desired) == fmt.Sprint(desired) {
			return true
		}
	}
	return false
}

// TestAnObjectMovingToAnotherVersionOfItsGroup: a Deployment Git moves from
// apps/v1beta2 to apps/v1 (argocd-example-apps did) is one object changed, its
// version and its fields said, not a comparison that fails.
func TestAnObjectMovingToAnotherVersionOfItsGroup(t *testing.T) {
	base := goTyped("shop", 1)
	base.SetAPIVersion("apps/v1beta2")
	head := goTyped("shop", 2)
	target, err := drift.Compare(context.Background(), nil, drift.Input{Path: "app", Base: []*unstructured.Unstructured{base}, Head: []*unstructured.Unstructured{head}, HasBase: true}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(target.Errors) > 0 || len(target.PR) != 1 || target.PR[0].Action != drift.ActionUpdate {
		t.Fatalf("errors %v, PR %+v", target.Errors, target.PR)
	}
	if !hasField(target.PR[0], ".apiVersion", "apps/v1beta2", "apps/v1") || !hasField(target.PR[0], ".spec.replicas", int64(1), int64(2)) {
		t.Errorf("fields: %+v", target.PR[0].Fields)
	}
}

// TestARemovedFieldOfAKeyedItemShowsItsValue: a field removed from a list
// item whose key takes a default Git does not write (a Service port's
// protocol) shows the value it had, not "(absent)" on both sides.
func TestARemovedFieldOfAKeyedItemShowsItsValue(t *testing.T) {
	svc := func(nodePort string) *unstructured.Unstructured {
		return obj(t, "apiVersion: v1\nkind: Service\nmetadata: {name: front-end, namespace: shop}\nspec:\n  type: NodePort\n  ports:\n  - port: 80\n    targetPort: 8079\n"+nodePort+"  selector: {app: front-end}\n")
	}
	target, err := drift.Compare(context.Background(), nil, drift.Input{Path: "app", Base: []*unstructured.Unstructured{svc("    nodePort: 30001\n")},
		Head: []*unstructured.Unstructured{svc("")}, HasBase: true}, drift.DefaultOptions())
	if err != nil || len(target.PR) != 1 {
		t.Fatalf("%v %+v", err, target)
	}
	if !hasField(target.PR[0], `.spec.ports[port=80,protocol="TCP"].nodePort`, int64(30001), nil) {
		t.Errorf("fields: %+v", target.PR[0].Fields)
	}
}

// TestAnObjectMovingOutOfTheExtensionsGroup: a Deployment Git moves from
// extensions/v1beta1 to apps/v1 is the same object (the apiserver stores
// one), changed, not deleted and created.
func TestAnObjectMovingOutOfTheExtensionsGroup(t *testing.T) {
	base := goTyped("shop", 1)
	base.SetAPIVersion("extensions/v1beta1")
	target, err := drift.Compare(context.Background(), nil, drift.Input{Path: "app", Base: []*unstructured.Unstructured{base}, Head: []*unstructured.Unstructured{goTyped("shop", 2)}, HasBase: true}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(target.PR) != 1 || target.PR[0].Action != drift.ActionUpdate || !hasField(target.PR[0], ".apiVersion", "extensions/v1beta1", "apps/v1") {
		t.Errorf("PR: %+v; errors %v", target.PR, target.Errors)
	}
}
