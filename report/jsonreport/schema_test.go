package jsonreport

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"
	validator "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

var updateSchema = flag.Bool("update-schema", false, "rewrite docs/schema/report-v1.json from the report's Go types")

// schemaPath is the published schema of `--format json`. A change that
// breaks it is a new version (report-v2.json), listed in CHANGELOG.md.
var schemaPath = filepath.Join("..", "..", "docs", "schema", "report-v1.json")

// TestTheJSONReportHasItsPublishedSchema: docs/schema/report-v1.json is the
// schema the report's Go types give (regenerate it with go test ./report/jsonreport
// -run TestTheJSONReportHasItsPublishedSchema -update-schema), and a report
// holding every part validates against it.
func TestTheJSONReportHasItsPublishedSchema(t *testing.T) {
	r := &jsonschema.Reflector{ExpandedStruct: true, RequiredFromJSONSchemaTags: false}
	s := r.Reflect(&jsonReport{})
	s.ID = "https://github.com/driftback/driftback/docs/schema/report-v1.json"
	s.Title = "driftback diff --format json, version 1"
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *updateSchema {
		if err := os.WriteFile(schemaPath, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	published, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(published, b) {
		t.Errorf("docs/schema/report-v1.json is not the schema the report's types give: a change to the JSON report is a change to its schema (a new version when it breaks it); regenerate with\n  go test ./report/jsonreport -run TestTheJSONReportHasItsPublishedSchema -update-schema")
	}

	doc, err := validator.UnmarshalJSON(bytes.NewReader(published))
	if err != nil {
		t.Fatal(err)
	}
	c := validator.NewCompiler()
	if err := c.AddResource("report-v1.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("report-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	live := 2
	rich := &drift.Report{
		Compared: &drift.Compared{How: "merge", Base: "a", Head: "b"},
		Errors:   []string{"one"},
		Targets: []drift.Target{{Name: "prod", Path: "apps/prod", Cluster: "prod", LiveError: "down", Notes: []string{"n"},
			Changes: []drift.Change{{APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: "shop", Name: "data", Action: drift.ActionDelete,
				Danger: []drift.Danger{{Reason: drift.DangerPVCRemoval, Count: 1, Message: "m", Lost: []drift.Lost{{Kind: "PersistentVolume", Name: "pv"}}}},
				Fields: []object.Field{{Path: ".spec.replicas", Kind: object.FieldPR, Base: int64(2), Desired: int64(3), Live: int64(live)}}}},
			Unread: []drift.Change{{Kind: "Secret", Name: "s", Action: drift.ActionCreate, Note: "no Secret"}}}},
	}
	for name, rep := range map[string]*drift.Report{"empty": {}, "rich": rich} {
		out, err := Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := validator.UnmarshalJSON(bytes.NewReader(out))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(inst); err != nil {
			t.Errorf("the %s report does not validate: %v\n%s", name, err, out)
		}
	}
	// The schema says something: a report of the wrong shape fails it.
	bad, _ := validator.UnmarshalJSON(strings.NewReader(`{"targets": "none", "summary": {"verdict": 3}}`))
	if err := schema.Validate(bad); err == nil {
		t.Error("a report of the wrong shape validates")
	}
}
