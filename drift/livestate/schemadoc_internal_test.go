package livestate

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Schemas of a small document: a kind, what it refers to, and one it does
// not reach.
const (
	webSchema   = `{"type":"object","x-kubernetes-group-version-kind":[{"group":"apps","version":"v1","kind":"Web"}],"properties":{"spec":{"$ref":"#/components/schemas/WebSpec"},"note":{"type":"string","description":"not a key: \"components\":{}"}}}`
	specSchema  = `{"type":"object","properties":{"port":{"allOf":[{"$ref":"#/components/schemas/Port"}]}}}`
	portSchema  = `{"type":"integer"}`
	otherSchema = `{"type":"object","x-kubernetes-group-version-kind":[{"group":"apps","version":"v1","kind":"Other"}],"properties":{"components":{"type":"string"}}}`
	schemasJSON = `{"schemas":{"Web":` + webSchema + `,"WebSpec":` + specSchema + `,"Port":` + portSchema + `,"Other":` + otherSchema + `}}`
)

var web = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Web"}

// TestADocumentIsSplitHoweverItIsLaidOut: the schemas and kinds are the
// same whether the components come last (as the apiserver writes them, and
// then read alone), first, or after paths that hold a key of that name.
func TestADocumentIsSplitHoweverItIsLaidOut(t *testing.T) {
	for name, doc := range map[string]string{
		"components last":            `{"openapi":"3.0.0","paths":{"/a":{"get":{}}},"components":` + schemasJSON + `}`,
		"components first":           `{"components":` + schemasJSON + `,"paths":{"/a":{"get":{}}}}`,
		"a key so named in paths":    `{"paths":{"/a":{"components":{"schemas":{"Fake":{}}}}},"components":` + schemasJSON + `}`,
		"spaces, a trailing newline": "{\"paths\": {}, \"components\" : " + schemasJSON + "}\n",
	} {
		t.Run(name, func(t *testing.T) {
			d, err := splitSchemas([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if got := d.all(); !slices.Equal(got, []string{"Other", "Port", "Web", "WebSpec"}) {
				t.Errorf("schemas %q, want Other, Port, Web, WebSpec", got)
			}
			if string(d.raw["Web"]) != webSchema {
				t.Errorf("Web's schema is %s, want it as served", d.raw["Web"])
			}
			if d.kinds[web] != "Web" {
				t.Errorf("kinds %v, want Web declared by its schema", d.kinds)
			}
		})
	}
	if _, err := splitSchemas([]byte(`{"components":{"schemas":{"A":{"type":`)); err == nil {
		t.Error("a cut document was read without an error")
	}
}

// TestOnlyWhatAKindReachesIsParsed: a kind's schema and those it refers
// to, through allOf too, and no other; a reference the reader cannot follow
// makes it take every schema rather than merge a field as unknown.
func TestOnlyWhatAKindReachesIsParsed(t *testing.T) {
	d, err := splitSchemas([]byte(`{"components":` + schemasJSON + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.reach([]schema.GroupVersionKind{web}); !slices.Equal(got, []string{"Port", "Web", "WebSpec"}) {
		t.Errorf("Web reaches %q, want Port, Web, WebSpec", got)
	}
	if got := d.reach([]schema.GroupVersionKind{{Kind: "Unknown"}}); len(got) != 0 {
		t.Errorf("a kind the document lacks reaches %q, want nothing", got)
	}
	into := map[string]*spec.Schema{}
	if err := d.schemas(d.reach([]schema.GroupVersionKind{web}), into); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.parsed["Other"]; ok || len(d.parsed) != 3 {
		t.Errorf("parsed %d schemas, want Web's 3 and not Other", len(d.parsed))
	}
	for name, raw := range map[string]string{
		"an escaped reference":        `{"components":{"schemas":{"Web":{"x-kubernetes-group-version-kind":[{"group":"apps","version":"v1","kind":"Web"}],"properties":{"spec":{"$ref":"#\/components\/schemas\/WebSpec"}}},"WebSpec":{},"Other":{}}}}`,
		"a unicode-escaped reference": `{"components":{"schemas":{"Web":{"x-kubernetes-group-version-kind":[{"group":"apps","version":"v1","kind":"Web"}],"properties":{"spec":{"$ref":"#\u002fcomponents\u002fschemas\u002fWebSpec"}}},"WebSpec":{},"Other":{}}}}`,
		"a missing schema":            `{"components":{"schemas":{"Web":{"x-kubernetes-group-version-kind":[{"group":"apps","version":"v1","kind":"Web"}],"properties":{"spec":{"$ref":"#/components/schemas/Gone"}}},"WebSpec":{},"Other":{}}}}`,
	} {
		d, err := splitSchemas([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if got := d.reach([]schema.GroupVersionKind{web}); len(got) != 3 {
			t.Errorf("%s: Web reaches %q, want every schema", name, got)
		}
	}
}
