// Package jsonreport writes a report as JSON for scripts, with the schema
// docs/schema/report-v1.json publishes: every list present, and a summary of
// the table's counts and the verdict.
package jsonreport

import (
	"encoding/json"

	"github.com/driftback/driftback/drift"

	"github.com/driftback/driftback/drift/object"
)

// jsonReport is the JSON report, whose schema docs/schema/report-v1.json
// publishes.
type jsonReport struct {
	*drift.Report
	Summary Summary `json:"summary"`
}

// Marshal renders the report with its documented, stable schema: every list is
// present, empty rather than null, and a summary of the table's counts and
// the verdict comes with it.
func Marshal(r *drift.Report) ([]byte, error) {
	out := *r
	out.Targets = make([]drift.Target, len(r.Targets))
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
	return json.MarshalIndent(jsonReport{&out, Summarize(r)}, "", "  ")
}

// Summary is what the report's table and verdict say, for a script: each
// target's counts, their sum, and the verdict.
type Summary struct {
	// Verdict is "dangerous" when the change brings a danger of its own,
	// else "nothing-dangerous".
	Verdict string `json:"verdict"`
	// Complete is false when a target, or part of one, was not compared:
	// not rendered, an error, or a cluster that could not be read (a
	// cluster not asked for, as without --kubeconfig, leaves it whole).
	Complete bool           `json:"complete"`
	Total    Counts         `json:"total"`
	Targets  []TargetCounts `json:"targets"`
}

// Counts are the table's columns: objects by what a sync does to them, the
// change's own dangers (by severity), the dangers true before it, and the
// live changes a sync reverts.
type Counts struct {
	Objects       int `json:"objects"`
	Create        int `json:"create"`
	Update        int `json:"update"`
	Delete        int `json:"delete"`
	Unchanged     int `json:"unchanged"`
	Dangers       int `json:"dangers"`
	DataLoss      int `json:"dataLoss"`
	SyncFails     int `json:"syncFails"`
	PodsRefused   int `json:"podsRefused"`
	Privilege     int `json:"privilege"`
	Advisory      int `json:"advisory"`
	DangersBefore int `json:"dangersBefore"`
	// LiveChangesReverted is null when the cluster was not read: unknown,
	// not none.
	LiveChangesReverted *int `json:"liveChangesReverted" jsonschema:"oneof_type=integer;null"`
}

// TargetCounts are one target's counts.
type TargetCounts struct {
	Name        string `json:"name,omitempty"`
	Path        string `json:"path"`
	NotCompared bool   `json:"notCompared,omitempty"`
	// LiveError says why the cluster was not read: the counts are then
	// the Git change's.
	LiveError string `json:"liveError,omitempty"`
	Counts
}

func (c *Counts) add(o Counts) {
	c.Objects += o.Objects
	c.Create += o.Create
	c.Update += o.Update
	c.Delete += o.Delete
	c.Unchanged += o.Unchanged
	c.Dangers += o.Dangers
	c.DataLoss += o.DataLoss
	c.SyncFails += o.SyncFails
	c.PodsRefused += o.PodsRefused
	c.Privilege += o.Privilege
	c.Advisory += o.Advisory
	c.DangersBefore += o.DangersBefore
	if c.LiveChangesReverted != nil && o.LiveChangesReverted != nil {
		*c.LiveChangesReverted += *o.LiveChangesReverted
	} else {
		c.LiveChangesReverted = nil
	}
}

// Summarize counts what the report tells.
func Summarize(r *drift.Report) Summary {
	s := Summary{Complete: len(r.Errors) == 0, Targets: []TargetCounts{}}
	s.Total.LiveChangesReverted = new(int)
	for _, t := range r.Targets {
		tc := TargetCounts{Name: t.Name, Path: t.Path, NotCompared: t.NotCompared != "", LiveError: t.LiveError}
		if tc.NotCompared || len(t.Errors) > 0 || (t.LiveError != "" && !t.LiveNotAsked) || len(t.Unread) > 0 {
			s.Complete = false
		}
		if t.LiveError == "" && t.NotCompared == "" {
			tc.LiveChangesReverted = new(int)
		}
		c := &tc.Counts
		for _, ch := range t.Told() {
			c.Objects++
			switch ch.Action {
			case drift.ActionCreate:
				c.Create++
			case drift.ActionUpdate:
				c.Update++
			case drift.ActionDelete, drift.ActionKeep:
				c.Delete++
			case drift.ActionUnchanged:
				c.Unchanged++
			}
			for _, d := range ch.Danger {
				if d.Before {
					c.DangersBefore++
					continue
				}
				c.Dangers++
				switch d.Reason.Severity() {
				case drift.SeverityDataLoss:
					c.DataLoss++
				case drift.SeveritySyncFails:
					c.SyncFails++
				case drift.SeverityPodsRefused:
					c.PodsRefused++
				case drift.SeverityPrivilege:
					c.Privilege++
				default:
					c.Advisory++
				}
			}
			for _, f := range ch.Fields {
				if (f.Kind == object.FieldOverwrites || f.Kind == object.FieldDrift) && c.LiveChangesReverted != nil {
					*c.LiveChangesReverted++
				}
			}
		}
		s.Total.add(tc.Counts)
		s.Targets = append(s.Targets, tc)
	}
	s.Verdict = "nothing-dangerous"
	if s.Total.Dangers > 0 {
		s.Verdict = "dangerous"
	}
	return s
}

func nonNil(cs []drift.Change) []drift.Change {
	out := make([]drift.Change, len(cs))
	for i, c := range cs {
		if c.Fields == nil {
			c.Fields = []object.Field{}
		}
		if c.Danger == nil {
			c.Danger = []drift.Danger{}
		}
		out[i] = c
	}
	return out
}
