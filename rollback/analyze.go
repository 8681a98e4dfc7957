package rollback

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/drift/scope"
)

// Earlier says what driftback reported when a commit was made: how many
// objects removing kind/name deleted then (from its comment on the pull
// request that carried the commit); ok is false when that is not known.
type Earlier func(ctx context.Context, commit, kind, name string) (count int, ok bool)

// Input is one target's comparison with the cluster and where to look for
// its past.
type Input struct {
	// Target is the comparison; dangers are added to its changes.
	Target *drift.Target
	// Live reads the cluster: volumes for a recreated claim, Jobs in the
	// namespace of a workload rolled back.
	Live object.LiveReader
	// History is the repository's past before the pull request's base.
	History *History
	// Earlier, when set, recovers the counts of an earlier removal.
	Earlier Earlier
	// Scope, when set, bounds what Live is asked: the target's scope. What
	// would need more (every PersistentVolume, to find the one an earlier
	// claim left) is said to be unknown.
	Scope *scope.Scope
}

var (
	pvcKind = schema.GroupKind{Kind: "PersistentVolumeClaim"}
	pvKind  = schema.GroupKind{Kind: "PersistentVolume"}
	crdKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	nsKind  = schema.GroupKind{Kind: "Namespace"}
	jobKind = schema.GroupKind{Group: "batch", Kind: "Job"}
)

// Analyze adds restore-not-rollback to the objects the pull request creates
// whose earlier loss Git cannot undo, and rollback-across-job to workloads
// whose image it moves back across completed Jobs. It only reads.
func Analyze(ctx context.Context, in Input) error {
	t := in.Target
	in.Live = scope.NewReader(in.Live, in.Scope)
	var volumes []*unstructured.Unstructured
	volumesRead := false
	volumesKnown := in.Live != nil && (in.Scope == nil || in.Scope.WholeKind(pvKind))
	why := scope.Unknown
	if in.Live == nil || t.LiveError != "" {
		// What Git alone says: the pull request's own change.
		in.Live, volumesKnown, why = nil, false, "without the cluster"
	}
	// In place: the dangers go on the report's own changes.
	var all []*drift.Change
	if t.LiveError != "" {
		for i := range t.PR {
			all = append(all, &t.PR[i])
		}
	}
	for _, list := range [][]drift.Change{t.Changes, t.Unread, t.OutOfScope} {
		for i := range list {
			if t.LiveError == "" {
				all = append(all, &list[i])
			}
		}
	}
	for _, ch := range all {
		switch {
		case ch.Action == drift.ActionCreate && ch.Ref().GroupKind() == pvcKind && !volumesKnown:
			if err := claimUnknown(in, ch, why); err != nil {
				return err
			}
		case ch.Action == drift.ActionCreate && ch.Ref().GroupKind() == pvcKind:
			if !volumesRead {
				var err error
				if volumes, err = in.Live.List(ctx, pvKind, "", nil); err != nil {
					return fmt.Errorf("list PersistentVolumes: %w", err)
				}
				volumesRead = true
			}
			if err := claim(ctx, in, ch, volumes); err != nil {
				return err
			}
		case ch.Action == drift.ActionCreate && (ch.Ref().GroupKind() == crdKind || ch.Ref().GroupKind() == nsKind):
			if err := restored(ctx, in, ch); err != nil {
				return err
			}
		case ch.Action == drift.ActionUpdate && in.Live != nil:
			if err := imageRollback(ctx, in, ch); err != nil {
				return err
			}
		}
	}
	return nil
}

// claim: a recreated claim binds to a new, empty volume. A Released volume
// kept by its Retain policy still holds the old data; without one, the data
// is gone.
func claim(ctx context.Context, in Input, ch *drift.Change, volumes []*unstructured.Unstructured) error {
	for _, pv := range volumes {
		ns, _, _ := unstructured.NestedString(pv.Object, "spec", "claimRef", "namespace")
		name, _, _ := unstructured.NestedString(pv.Object, "spec", "claimRef", "name")
		if ns != ch.Namespace || name != ch.Name {
			continue
		}
		phase, _, _ := unstructured.NestedString(pv.Object, "status", "phase")
		policy, _, _ := unstructured.NestedString(pv.Object, "spec", "persistentVolumeReclaimPolicy")
		if phase != "Released" {
			continue
		}
		ch.Danger = append(ch.Danger, drift.Danger{Reason: drift.DangerRestoreNotRollback, Count: 1, Message: fmt.Sprintf(
			"the earlier claim's data is on PersistentVolume %s (%s, reclaim %s), but a new claim does not bind to a Released volume by itself: it gets a new, empty one. "+
				"To get the data back, set the claim's spec.volumeName to %s and remove the volume's spec.claimRef.uid before this merges",
			pv.GetName(), phase, policy, pv.GetName())})
		return nil
	}
	c, err := in.History.Removed("PersistentVolumeClaim", ch.Name)
	if err != nil || c == nil {
		return err
	}
	ch.Danger = append(ch.Danger, drift.Danger{Reason: drift.DangerRestoreNotRollback, Count: 1, Message: fmt.Sprintf(
		"the claim was removed in %s; no volume holds its data any more: the new claim starts empty, the old data is gone", commitText(c))})
	return nil
}

// claimUnknown: a recreated claim whose old volume cannot be looked for
// (every PersistentVolume is outside the target's scope, or the cluster is
// not read: why): Git says the claim was removed before, and whether a
// volume still holds its data is unknown.
func claimUnknown(in Input, ch *drift.Change, why string) error {
	c, err := in.History.Removed("PersistentVolumeClaim", ch.Name)
	if err != nil || c == nil {
		return err
	}
	ch.Danger = append(ch.Danger, drift.Danger{Reason: drift.DangerRestoreNotRollback, Count: 1, CountUnknown: true, Message: fmt.Sprintf(
		"the claim was removed in %s, and a new claim does not bind to the volume that held its data by itself: whether a Released PersistentVolume still holds it is unknown, %s; "+
			"look for one whose spec.claimRef names %s/%s before this merges", commitText(c), why, ch.Namespace, ch.Name)})
	return nil
}

// restored: a CRD or a namespace that Git removed before comes back empty.
func restored(ctx context.Context, in Input, ch *drift.Change) error {
	c, err := in.History.Removed(ch.Kind, ch.Name)
	if err != nil || c == nil {
		return err
	}
	count, known := 0, false
	if in.Earlier != nil {
		count, known = in.Earlier(ctx, c.SHA, ch.Kind, ch.Name)
	}
	what := "the custom resources deleted with it then"
	if ch.Kind == "Namespace" {
		what = "the objects deleted with it then"
	}
	if known {
		what = fmt.Sprintf("the %d %s deleted with it then (as driftback counted on that pull request)", count,
			map[bool]string{true: "objects", false: "custom resources"}[ch.Kind == "Namespace"])
	}
	ch.Danger = append(ch.Danger, drift.Danger{Reason: drift.DangerRestoreNotRollback, Count: count, CountUnknown: !known, Message: fmt.Sprintf(
		"it was removed in %s: restoring it brings back an empty %s; %s do not come back", commitText(c), strings.ToLower(kindWord(ch.Kind)), what)})
	return nil
}

func kindWord(kind string) string {
	if kind == "CustomResourceDefinition" {
		return "CRD"
	}
	return kind
}

// imageRollback: an image the pull request moves back to a value Git had
// before, across Jobs that completed since the live image was set.
func imageRollback(ctx context.Context, in Input, ch *drift.Change) error {
	for _, f := range ch.Fields {
		if !strings.HasSuffix(f.Path, ".image") || f.Time == nil {
			continue
		}
		desired, ok1 := f.Desired.(string)
		live, ok2 := f.Live.(string)
		if !ok1 || !ok2 || desired == "" || desired == live {
			continue
		}
		c, err := in.History.Seen(desired)
		if err != nil {
			return err
		}
		if c == nil {
			continue // a new image, not a rollback
		}
		jobs, err := in.Live.List(ctx, jobKind, ch.Namespace, nil)
		if err != nil {
			return fmt.Errorf("list Jobs in %s: %w", ch.Namespace, err)
		}
		var across []string
		for _, j := range jobs {
			done, _, _ := unstructured.NestedString(j.Object, "status", "completionTime")
			at, err := time.Parse(time.RFC3339, done)
			if err != nil || !at.After(*f.Time) {
				continue
			}
			across = append(across, fmt.Sprintf("%s (completed %s)", j.GetName(), at.UTC().Format("2006-01-02 15:04 UTC")))
		}
		if len(across) == 0 {
			continue
		}
		sort.Strings(across)
		ch.Danger = append(ch.Danger, drift.Danger{Reason: drift.DangerRollbackAcrossJob, Count: len(across), Message: fmt.Sprintf(
			"%s goes back to %s, which Git had before (set in %s), across Jobs that completed since %s went live at %s: %s. Reverting the manifest does not revert what they did",
			f.Path, desired, commitText(c), live, f.Time.UTC().Format("2006-01-02 15:04 UTC"), strings.Join(across, ", "))})
	}
	return nil
}

func commitText(c *Commit) string {
	return fmt.Sprintf("%s (%q, %s)", c.SHA[:min(12, len(c.SHA))], c.Subject, c.When.Format("2006-01-02 15:04 UTC"))
}
