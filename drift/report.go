package drift

import "github.com/driftback/driftback/drift/object"

// Action is what a sync does to an object.
type Action string

// Actions, as they appear in the JSON report.
const (
	ActionCreate    Action = "create"
	ActionUpdate    Action = "update"
	ActionDelete    Action = "delete"
	ActionUnchanged Action = "unchanged"
	// ActionKeep is a prune that an annotation turns into "left in place":
	// the object leaves Git but the reconciler will not delete it.
	ActionKeep Action = "keep"
)

// DangerReason is a fixed identifier for a kind of danger.
type DangerReason string

// Danger reasons, stable identifiers of the JSON report.
const (
	DangerCRDRemoval       DangerReason = "crd-removal"
	DangerNamespaceRemoval DangerReason = "namespace-removal"
	DangerPVCRemoval       DangerReason = "pvc-removal"
	DangerPVRemoval        DangerReason = "pv-removal"
	DangerStatefulSetPVC   DangerReason = "statefulset-volume-removal"
	DangerImmutableField   DangerReason = "immutable-field"
	DangerRBACEscalation   DangerReason = "rbac-escalation"
	// DangerAutoscaledReplicas is Git setting replicas on a workload an
	// autoscaler scales: a warning, failing a check only when listed in failOn.
	DangerAutoscaledReplicas DangerReason = "autoscaled-replicas"
	// DangerRestoreNotRollback is a pull request recreating something whose
	// loss Git cannot undo: a claim whose data went with its volume, a CRD
	// whose custom resources were deleted with it, a namespace and its
	// objects. A warning, failing a check only when listed in failOn.
	DangerRestoreNotRollback DangerReason = "restore-not-rollback"
	// DangerRollbackAcrossJob is an image moved back to an earlier value
	// across Jobs that completed since the current one went live (a
	// database migration, say): what they did stays. A warning.
	DangerRollbackAcrossJob DangerReason = "rollback-across-job"
	// DangerSyncFails is a change the reconciler cannot apply at all
	// (drift/syncfail).
	DangerSyncFails DangerReason = "sync-fails"
	// DangerAdmissionRefused is an object the cluster's admission refuses
	// (a ValidatingAdmissionPolicy, a ResourceQuota, a LimitRange, Pod
	// Security for a Pod): the sync fails (drift/admission).
	DangerAdmissionRefused DangerReason = "admission-refused"
	// DangerPodsRefused is a workload whose pods admission refuses: it is
	// applied, and its pods never start.
	DangerPodsRefused DangerReason = "pods-refused"
	// DangerAdmissionWarning is what admission only warns of or audits: a
	// warning.
	DangerAdmissionWarning DangerReason = "admission-warning"
)

// Danger is something about a change that loses data or access, with its
// blast radius measured on the live cluster.
type Danger struct {
	Reason  DangerReason `json:"reason"`
	Message string       `json:"message"`
	// Count is how many things are lost or affected (custom resources of a
	// removed CRD, objects in a removed namespace, claims, …).
	Count int `json:"count"`
	// CountUnknown is true when the danger is known from Git but its blast
	// radius needs the cluster, which was not read, or reads outside the
	// target's scope: Count is then what Git alone shows.
	CountUnknown bool `json:"countUnknown,omitempty"`
	// Lost names the objects behind Count that a removal deletes with it (at
	// most MaxLost of them; Count says how many there are).
	Lost []Lost `json:"lost,omitempty"`
	// Before is true for a condition the base holds as much as the head (Git
	// set replicas on the autoscaled workload before this pull request too;
	// the immutable field differs live, not in the pull request): it is not
	// the pull request's doing, and fails no check.
	Before bool `json:"before,omitempty"`
}

// MaxLost bounds the objects a danger names; its Count says how many it
// loses in all.
const MaxLost = 20

// Lost is an object a removal deletes with it.
type Lost struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// CreatedBy is the field manager that wrote the object first, as its
	// managed fields say ("kubectl-client-side-apply", "helm").
	CreatedBy string `json:"createdBy,omitempty"`
	// InGit is true when Git renders the object at the base or the head:
	// the report shows it too. One not in Git was made on the cluster and
	// is found nowhere else.
	InGit bool `json:"inGit"`
	// Detail says what losing it costs, where that is more than the object
	// ("bound to pv-cache (5Gi, Delete): its data is deleted").
	Detail string `json:"detail,omitempty"`
}

// Severity orders dangers for a reader: data lost first, then a sync that
// fails, pods that never start, privilege, then advisories.
type Severity int

// Severities, most severe first.
const (
	SeverityDataLoss Severity = iota
	SeveritySyncFails
	SeverityPodsRefused
	SeverityPrivilege
	SeverityAdvisory
)

// Severity is how bad a danger of this reason is.
func (r DangerReason) Severity() Severity {
	switch r {
	case DangerCRDRemoval, DangerNamespaceRemoval, DangerPVCRemoval, DangerPVRemoval, DangerStatefulSetPVC:
		return SeverityDataLoss
	case DangerImmutableField, DangerSyncFails, DangerAdmissionRefused:
		return SeveritySyncFails
	case DangerPodsRefused:
		return SeverityPodsRefused
	case DangerRBACEscalation:
		return SeverityPrivilege
	}
	return SeverityAdvisory
}

// Change is what happens to one object.
type Change struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	Action     Action `json:"action"`
	// Fields lists the fields that change; empty for creates and deletes.
	Fields []object.Field `json:"fields,omitempty"`
	Danger []Danger       `json:"danger,omitempty"`
	// OverwritesDrift is true when one of the fields reverts a live change.
	OverwritesDrift bool `json:"overwritesDrift,omitempty"`
	// KeptBy names the annotation that keeps a pruned object in place.
	KeptBy string `json:"keptBy,omitempty"`
	// Why says, in one short line, why a deleted or kept object leaves
	// Git: no longer rendered, moved to another namespace, replaced by a
	// generated object's new name.
	Why string `json:"why,omitempty"`
	// Note explains an approximate or failed comparison.
	Note string `json:"note,omitempty"`
	// Secret is true for a Secret: its values are never shown.
	Secret bool `json:"secret,omitempty"`
	// Manifest is the rendered YAML of a created or deleted object (Secret
	// values hidden, cut at MaxManifest).
	Manifest string `json:"manifest,omitempty"`
}

// Ref returns the object's identity.
func (c *Change) Ref() object.Ref {
	gv := splitAPIVersion(c.APIVersion)
	return object.Ref{Group: gv[0], Version: gv[1], Kind: c.Kind, Namespace: c.Namespace, Name: c.Name}
}

func splitAPIVersion(av string) [2]string {
	for i := len(av) - 1; i >= 0; i-- {
		if av[i] == '/' {
			return [2]string{av[:i], av[i+1:]}
		}
	}
	return [2]string{"", av}
}

func newChange(r object.Ref, a Action) Change {
	return Change{APIVersion: r.APIVersion(), Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Action: a,
		Secret: r.Group == "" && r.Kind == "Secret"}
}

// Target is the report for one overlay.
type Target struct {
	// Name names the target (app.yml's name; empty on the command line).
	Name string `json:"name,omitempty"`
	// Path is the overlay directory.
	Path string `json:"path"`
	// Cluster names the cluster compared with; empty when none was.
	Cluster string `json:"cluster,omitempty"`
	// Changes is what a sync of the head would do to the live cluster: the
	// live impact, prunes included.
	Changes []Change `json:"changes"`
	// Drift is what already differs between the base and the live cluster.
	Drift []Change `json:"drift"`
	// PR is what the pull request changes in Git: the head render against the
	// base render, without the cluster.
	PR []Change `json:"pr"`
	// Errors are problems that made part of the comparison impossible.
	Errors []string `json:"errors"`
	// NotCompared says why nothing of the target was compared (its render
	// failed, or comparing it failed): Changes, Drift and PR are then empty
	// and say nothing about what merging does.
	NotCompared string `json:"notCompared,omitempty"`
	// LiveError says why the cluster could not be read; the Git comparison
	// (PR) is still there.
	LiveError string `json:"liveError,omitempty"`
	// LiveNotAsked says the cluster was not read by choice (none given, a
	// fork's pull request): the comparison is whole as the Git change it
	// is. Otherwise LiveError is a failure, and nothing live is known.
	LiveNotAsked bool `json:"liveNotAsked,omitempty"`
	// OutOfScope lists the objects of the renders outside the target's scope,
	// with what the pull request does to them in Git: no live value, owner
	// or count of theirs is read or shown.
	OutOfScope []Change `json:"outOfScope,omitempty"`
	// Unread lists the objects of the renders of kinds the live state does
	// not hold (a dump made without them), with what the pull request does
	// to them in Git and why: nothing live is known of them.
	Unread []Change `json:"unread,omitempty"`
	// Reverts are the pull request's revert commits ("Revert …"): the
	// comment then says what the revert does not restore.
	Reverts []string `json:"reverts,omitempty"`
	// Notes say what the reconciler does with the target that changes what
	// merging means: suspended reconciliation, variables not substituted, a
	// reconciler's ignore rule that is not applied.
	Notes []string `json:"notes,omitempty"`
}

// NotRendered is a reconciler's source that cannot be rendered, listed so it
// is never silently skipped.
type NotRendered struct {
	// Source names the reconciler object: "Application argocd/shop".
	Source  string `json:"source"`
	Cluster string `json:"cluster,omitempty"`
	Path    string `json:"path,omitempty"`
	Reason  string `json:"reason"`
}

// Report is the result of a diff over one or more overlays.
type Report struct {
	Targets []Target `json:"targets"`
	Errors  []string `json:"errors"`
	// NotRendered are sources of the repository a reconciler applies that
	// driftback cannot render.
	NotRendered []NotRendered `json:"notRendered,omitempty"`
	// Compared names the commits compared, when they are commits.
	Compared *Compared `json:"compared,omitempty"`
}

// How says how the commits a report compares were chosen.
type How string

const (
	// HowMerge compares the base branch's tip with what merging the pull
	// request into it gives (GitHub's test merge, or `diff --merged`).
	HowMerge How = "merge"
	// HowMergeBase compares the head with where it left its base (as `git
	// diff A...B`): what the branch changes, whatever the base did since.
	HowMergeBase How = "merge-base"
	// HowGiven compares the two trees as given.
	HowGiven How = "given"
)

// Compared names the commits a report compares, and how they were chosen:
// what merging does, not what two branch tips differ by.
type Compared struct {
	How How `json:"how"`
	// Base is compared as the state before, Head as the state after.
	Base string `json:"base"`
	Head string `json:"head"`
	// BaseRef is the branch merged into, when known.
	BaseRef string `json:"baseRef,omitempty"`
	// PullHead is the branch's own head when Head is a merge of it.
	PullHead string `json:"pullHead,omitempty"`
	// Note says what a reader must know of the choice (a conflict, a test
	// merge GitHub had not made yet); "" when there is nothing to say.
	Note string `json:"note,omitempty"`
}

// HasChanges reports whether anything would change or has drifted.
func (r *Report) HasChanges() bool {
	for _, t := range r.Targets {
		for _, c := range append(append(append([]Change{}, t.Changes...), t.PR...), t.Drift...) {
			if c.Action != ActionUnchanged {
				return true
			}
		}
	}
	return false
}

// Dangers returns the dangers of this change, by reason: those of the live
// impact when the cluster was read, those of the Git change when it was
// not. A condition as true before the change (Danger.Before) is not its.
func (t *Target) Dangers() map[DangerReason]int {
	out := map[DangerReason]int{}
	for _, c := range t.Told() {
		for _, d := range c.Danger {
			if !d.Before {
				out[d.Reason]++
			}
		}
	}
	return out
}

// Told is the list of changes that tells what merging does: the live impact
// when the cluster was read, the Git change when it was not.
func (t *Target) Told() []Change {
	if t.LiveError != "" {
		return t.PR
	}
	if len(t.Unread)+len(t.OutOfScope) > 0 {
		// Objects not compared with the cluster (a kind the live state
		// does not hold, outside the target's scope): what Git says.
		return append(append(append([]Change{}, t.Changes...), t.Unread...), t.OutOfScope...)
	}
	return t.Changes
}
