package report

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
)

// widgetCRD is a CRD of the size operators ship (60 documented properties
// per version), v1 stored and v1beta1 served, changed by edit.
func widgetCRD(t *testing.T, edit func(v1, v1beta1 map[string]any)) *unstructured.Unstructured {
	t.Helper()
	props := func() map[string]any {
		p := map[string]any{
			"replicas":   map[string]any{"type": "integer", "description": "How many widgets run."},
			"legacyMode": map[string]any{"type": "string", "description": "The old mode."},
			"hosts":      map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}},
		}
		for i := range 60 {
			p[fmt.Sprintf("setting%02d", i)] = map[string]any{"type": "string", "description": strings.Repeat(fmt.Sprintf("Setting %d tunes the widget. ", i), 8)}
		}
		return p
	}
	version := func(name string, storage bool) map[string]any {
		return map[string]any{"name": name, "served": true, "storage": storage, "schema": map[string]any{"openAPIV3Schema": map[string]any{
			"type": "object", "properties": map[string]any{
				"apiVersion": map[string]any{"type": "string"}, "kind": map[string]any{"type": "string"}, "metadata": map[string]any{"type": "object"},
				"spec": map[string]any{"type": "object", "properties": props()},
			}}}}
	}
	v1, v1beta1 := version("v1", true), version("v1beta1", false)
	if edit != nil {
		edit(v1, v1beta1)
	}
	crd := map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{"group": "example.com", "scope": "Namespaced", "names": map[string]any{"kind": "Widget", "plural": "widgets"}, "versions": []any{v1, v1beta1}}}
	// Through YAML, as a render gives it.
	b, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func specProps(v map[string]any) map[string]any {
	return v["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
}

// TestACRDSchemaChangeListsItsProperties: a pull request that adds two
// properties to a CRD's stored version, removes one, changes a type in
// another version and rewords a description reads as those changes by
// path and version, the removal marked as dropping stored data, not as
// one field holding both versions' whole schemas.
func TestACRDSchemaChangeListsItsProperties(t *testing.T) {
	base := widgetCRD(t, nil)
	head := widgetCRD(t, func(v1, v1beta1 map[string]any) {
		p := specProps(v1)
		p["timeout"] = map[string]any{"type": "string", "description": "How long a widget waits."}
		p["retries"] = map[string]any{"type": "integer"}
		delete(p, "legacyMode")
		p["setting07"].(map[string]any)["description"] = "Reworded."
		specProps(v1beta1)["replicas"].(map[string]any)["type"] = "string"
		p["hosts"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)["port"] = map[string]any{"type": "integer"}
		spec := v1["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)
		spec["required"] = []any{"replicas"}
	})
	target, err := drift.Compare(context.Background(), livestate.NewObjectReader([]*unstructured.Unstructured{base}), drift.Input{Path: "crds", Base: []*unstructured.Unstructured{base}, Head: []*unstructured.Unstructured{head}, HasBase: true}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Join(Comment(&drift.Report{Targets: []drift.Target{*target}}, CommentOptions{}), "")
	for _, want := range []string{
		"`.spec.versions`: CRD schema in v1, v1beta1: 3 added, 1 removed, 2 changed (1 removal from the storage version drops stored data); 1 description reworded, as a diff below",
		"```diff\n@@ v1 (storage version) @@\n" +
			"± spec.replicas: now required\n" +
			"+ spec.hosts[].port: integer\n" +
			"- spec.legacyMode: string (drops its data from stored objects as they are written)\n" +
			"+ spec.retries: integer\n" +
			"+ spec.timeout: string\n" +
			"@@ v1beta1 @@\n" +
			"± spec.replicas: type \"integer\" → \"string\"\n```",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the comment does not say:\n%s\n\n%s", want, out)
		}
	}
	// A version removed, a CEL rule added: the rule reads as written.
	head = widgetCRD(t, func(v1, _ map[string]any) {
		spec := v1["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)
		spec["x-kubernetes-validations"] = []any{map[string]any{"rule": "self.replicas > 0 && self.replicas < 10"}}
	})
	versions, _, _ := unstructured.NestedSlice(head.Object, "spec", "versions")
	_ = unstructured.SetNestedSlice(head.Object, versions[:1], "spec", "versions")
	target, err = drift.Compare(context.Background(), livestate.NewObjectReader([]*unstructured.Unstructured{base}), drift.Input{Path: "crds", Base: []*unstructured.Unstructured{base}, Head: []*unstructured.Unstructured{head}, HasBase: true}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	second := strings.Join(Comment(&drift.Report{Targets: []drift.Target{*target}}, CommentOptions{}), "")
	want := "@@ v1 (storage version) @@\n± spec: x-kubernetes-validations (absent) → [{\"rule\":\"self.replicas > 0 && self.replicas < 10\"}]\n" +
		"@@ v1beta1 @@\n- version v1beta1 (removed: no longer served; the apiserver refuses it while the CRD's status.storedVersions lists it)\n"
	if !strings.Contains(second, want) {
		t.Errorf("the comment does not say:\n%s\n\n%s", want, second)
	}
	if strings.Contains(out, "Setting 12 tunes") {
		t.Errorf("the comment shows the schema:\n%s", out)
	}
	if n := longestLine(out); n > 400 {
		t.Errorf("a line of the comment is %d characters long", n)
	}
}
