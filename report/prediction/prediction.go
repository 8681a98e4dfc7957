// Package prediction records, hidden in a pull request's comment, what the
// comparison predicted merging changes live on each target, and reads it
// back after the merge to measure it against what the reconciler did.
package prediction

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

// Predicted is what a comment predicted merging changes live on one
// target, as recorded in it for after the merge.
type Predicted struct {
	Target, Cluster string
	// Head is the pull request's head commit the prediction is of.
	Head string
	// Changes are the objects, by what merging does to them.
	Changes []Change
}

// Change is one object the prediction names.
type Change struct {
	Action drift.Action
	Ref    object.Ref
}

// Bounds on what a comment records: a target with more changes, or the
// targets past the budget, are not measured after the merge.
const (
	maxChanges         = 100
	maxPredictionBytes = 16 << 10
)

// Markers records, hidden, each compared target's live
// changes: after the merge they are checked against what the reconciler did.
func Markers(r *drift.Report) string {
	if r.Compared == nil || r.Compared.Head == "" {
		return "" // not a pull request's comparison: nothing to measure later
	}
	head := r.Compared.Head
	if r.Compared.PullHead != "" {
		head = r.Compared.PullHead
	}
	var b strings.Builder
	for _, t := range r.Targets {
		// Only what was compared whole: not a target with objects left
		// unread or out of scope.
		if t.NotCompared != "" || t.LiveError != "" || len(t.Errors) > 0 || len(t.Unread) > 0 || len(t.OutOfScope) > 0 || t.Name == "" {
			continue
		}
		var changes []string
		for _, c := range t.Changes {
			if c.Action != drift.ActionCreate && c.Action != drift.ActionUpdate && c.Action != drift.ActionDelete {
				continue // kept, or unchanged: nothing the reconciler does
			}
			ref := c.Ref()
			var fields []string
			for _, f := range []string{string(c.Action), ref.Group, ref.Version, ref.Kind, ref.Namespace, ref.Name} {
				fields = append(fields, url.QueryEscape(f))
			}
			changes = append(changes, strings.Join(fields, ":"))
		}
		if len(changes) > maxChanges {
			continue
		}
		line := fmt.Sprintf("<!-- driftback:predicted target=%s cluster=%s head=%s changes=%s -->\n",
			url.QueryEscape(t.Name), url.QueryEscape(t.Cluster), url.QueryEscape(head), strings.Join(changes, ","))
		if b.Len()+len(line) > maxPredictionBytes {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

var predictedPattern = regexp.MustCompile(`(?m)^<!-- driftback:predicted target=(\S*) cluster=(\S*) head=(\S*) changes=(\S*) -->\r?$`)

// Read reads back what a comment of driftback's predicted, by
// "cluster/target". Text quoted from Git or the cluster cannot forge one: it
// never holds a marker.
func Read(body string) map[string]Predicted {
	out := map[string]Predicted{}
	for _, m := range predictedPattern.FindAllStringSubmatch(body, -1) {
		var p Predicted
		var err error
		if p.Target, err = url.QueryUnescape(m[1]); err != nil {
			continue
		}
		if p.Cluster, err = url.QueryUnescape(m[2]); err != nil {
			continue
		}
		if p.Head, err = url.QueryUnescape(m[3]); err != nil {
			continue
		}
	changes:
		for _, c := range strings.Split(m[4], ",") {
			f := strings.Split(c, ":")
			if len(f) != 6 {
				continue
			}
			for i := range f {
				if f[i], err = url.QueryUnescape(f[i]); err != nil {
					continue changes
				}
			}
			p.Changes = append(p.Changes, Change{Action: drift.Action(f[0]), Ref: object.Ref{Group: f[1], Version: f[2], Kind: f[3], Namespace: f[4], Name: f[5]}})
		}
		out[p.Cluster+"/"+p.Target] = p
	}
	return out
}
