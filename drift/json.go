package drift

import (
	"encoding/json"

	"github.com/driftback/driftback/drift/object"
)

// JSON renders the report with its documented, stable schema: every list is
// present, empty rather than null.
func JSON(r *Report) ([]byte, error) {
	out := *r
	out.Targets = make([]Target, len(r.Targets))
	for i, t := range r.Targets {
		t.Changes, t.Drift, t.PR = nonNil(t.Changes), nonNil(t.Drift), nonNil(t.PR)
		if t.Errors == nil {
			t.Errors = []string{}
		}
		out.Targets[i] = t
	}
	if out.Errors == nil {
		out.Errors = []string{}
	}
	return json.MarshalIndent(&out, "", "  ")
}

func nonNil(cs []Change) []Change {
	out := make([]Change, len(cs))
	for i, c := range cs {
		if c.Fields == nil {
			c.Fields = []object.Field{}
		}
		if c.Danger == nil {
			c.Danger = []Danger{}
		}
		out[i] = c
	}
	return out
}
