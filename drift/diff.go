package drift

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/drift/scope"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Mode chooses how a sync's effect is computed.
type Mode string

// Modes.
const (
	// ModeReadOnly predicts server-side apply locally from the live object,
	// its managedFields and the cluster's schema. It needs get, list and watch.
	ModeReadOnly Mode = "read-only"
	// ModeDryRun asks the apiserver for a server-side apply with dry-run: exact,
	// defaulting and admission included, but it needs patch permission, which
	// is real write access.
	ModeDryRun Mode = "dry-run"
)

// KnownAppliers are the field managers GitOps reconcilers apply with; the
// applier of a live object is detected among them.
var KnownAppliers = []string{"kustomize-controller", "helm-controller", "argocd-controller", "argocd-application-controller"}

// Options configure a comparison. The zero value compares read-only, detects
// the applier and ignores nothing; DefaultOptions ignores well-known controllers.
type Options struct {
	// Mode is ModeReadOnly when empty.
	Mode Mode
	// Manager is the GitOps applier's field manager. A sync removes the live
	// fields it owns that Git no longer sets. Empty: the known applier found in
	// each live object's managedFields, else DefaultManager.
	Manager string
	// IgnoreManagers: fields whose live value these managers own never count.
	IgnoreManagers []string
	// Ignore rules select objects and fields to leave out.
	Ignore []object.IgnoreRule
	// NoPrune, when set, says why the reconciler deletes nothing that
	// leaves Git ("prune: false on Application argocd/shop"): prunes are
	// then kept, with this as the reason.
	NoPrune string
	// DefaultNamespace is the namespace of rendered namespaced objects that
	// name none (Argo CD's destination namespace); empty means "default".
	DefaultNamespace string
	// Tracking finds the live objects the reconciler owns, for prune; the zero
	// value prunes only what leaves the render.
	Tracking Tracking
	// DryRun performs dry-run applies in ModeDryRun; nil there is an error.
	DryRun DryRunner
	// Scope limits what is read from the cluster; objects outside it are
	// compared in Git only and listed in Target.OutOfScope. nil reads all.
	Scope *scope.Scope
	// SecretsFromGit compares the values of a Secret in Git only: its live
	// values stand for the base's (the head's, for a Secret new in Git), so
	// someone who may not read them (a fork's author) cannot learn from the
	// comparison whether a value they guess is the live one.
	SecretsFromGit bool
	// GitOnly, when set, gives the fields of a rendered object whose live
	// values stand for the base's (the head's, for an object new in Git):
	// fields rendered from stand-ins of a Secret's value, whose live value
	// is the Secret's. What is left to compare there is what Git changes,
	// and a guess written in Git reads the same whether it is the live
	// value or not.
	GitOnly func(*unstructured.Unstructured) []fieldpath.Path
}

// DefaultManager is the applier assumed when no live object names one.
const DefaultManager = "kustomize-controller"

// DefaultOptions ignore the fields of well-known controllers.
func DefaultOptions() Options {
	return Options{IgnoreManagers: append([]string(nil), object.DefaultIgnoreManagers...)}
}

// DryRunner applies an object with server-side apply and dry-run, returning
// what the server would store, or nil when nothing would change.
type DryRunner interface {
	DryRunApply(ctx context.Context, obj *unstructured.Unstructured, manager string) (*unstructured.Unstructured, error)
}

// Input is one overlay rendered at the base and head of a change.
type Input struct {
	// Path names the overlay.
	Path string
	// Base is the render at the base; nil when the overlay is new, or when only
	// the live impact and drift of one render are wanted (then Head is used
	// for both).
	Base []*unstructured.Unstructured
	// Head is the render at the head; nil when the overlay is removed.
	Head []*unstructured.Unstructured
	// HasBase says Base is meaningful even when empty.
	HasBase bool
	// Newer are objects the base branch's tip renders that Base (a merge
	// base: the head is compared with where it left its base) lacks: added
	// after the branch left it, merging keeps them, so they are never the
	// head's to prune.
	Newer []*unstructured.Unstructured
	// TipUnknown, when Base is a merge base, says why the base branch's
	// tip has no render (it does not render): a live object the reconciler
	// tracks that neither Base nor Head renders may be one the branch
	// gained since, so it is not compared (Unread), never pruned.
	TipUnknown string
}

// NewerThan are the objects of tip that base lacks (Input.Newer).
func NewerThan(tip, base []*unstructured.Unstructured) []*unstructured.Unstructured {
	in := map[string]bool{}
	for _, o := range base {
		in[object.RefOf(o).Key()] = true
	}
	var out []*unstructured.Unstructured
	for _, o := range tip {
		if !in[object.RefOf(o).Key()] {
			out = append(out, o)
		}
	}
	return out
}

// Compare works out, for one overlay, what the pull request changes in Git,
// what a sync of the head would do to the live cluster, and what has already
// drifted. A nil live compares Git only. Problems with single objects are
// recorded in the report; the error is for a failure to compare at all.
func Compare(ctx context.Context, live object.LiveReader, in Input, opts Options) (*Target, error) {
	var err error
	if in.Base, err = object.Typed(in.Base); err != nil {
		return nil, fmt.Errorf("the base's render: %w", err)
	}
	if in.Head, err = object.Typed(in.Head); err != nil {
		return nil, fmt.Errorf("the head's render: %w", err)
	}
	t := &Target{Path: in.Path, Changes: []Change{}, Drift: []Change{}, PR: []Change{}, Errors: []string{}}
	encrypted := map[string]bool{}
	for _, o := range append(append([]*unstructured.Unstructured{}, in.Base...), in.Head...) {
		if object.SOPSEncrypted(o) {
			encrypted[object.RefOf(o).Key()] = true
		}
	}
	base, head := maskAll(in.Base), maskAll(in.Head)
	if !in.HasBase && in.Base == nil {
		base = nil
	}

	scopes, err := object.NamespacedKinds(ctx, live, append(append([]*unstructured.Unstructured{}, base...), head...))
	if err != nil {
		return nil, err
	}
	defaultNamespaces(base, scopes, opts.DefaultNamespace, live != nil)
	defaultNamespaces(head, scopes, opts.DefaultNamespace, live != nil)

	tc, err := typeConverter(ctx, live, append(append([]*unstructured.Unstructured{}, base...), head...))
	if err != nil {
		return nil, fmt.Errorf("read the cluster's schema: %w", err)
	}
	c := &comparer{ctx: ctx, live: scope.NewReader(live, opts.Scope), unscoped: live, opts: opts, tc: tc, pred: object.PredictorFor(tc), crds: newCRDSchemas(head, base), t: t, encrypted: encrypted, inGit: map[string]bool{}, newer: map[string]bool{}, tipUnknown: in.TipUnknown}
	newer, err := object.Typed(in.Newer)
	if err != nil {
		return nil, fmt.Errorf("the base tip's render: %w", err)
	}
	defaultNamespaces(newer, scopes, opts.DefaultNamespace, live != nil) // placed as the head is
	for _, o := range newer {
		c.newer[object.RefOf(o).Key()] = true
	}
	for _, o := range append(append([]*unstructured.Unstructured{}, base...), head...) {
		c.inGit[object.RefOf(o).Key()] = true
	}

	if in.HasBase || in.Base != nil {
		t.PR = c.gitDiff(base, head)
	}
	gitDangers(t.PR, index(base), index(head))
	c.tellGit(base, head)
	for i := range t.PR {
		hideSecretFields(&t.PR[i])
	}
	if live == nil {
		t.LiveError = "the cluster was not read"
		c.autoscaled(base, head)
		markBefore(t.PR, index(base))
		return t, nil
	}
	if opts.Scope != nil {
		if base, head, err = c.outOfScope(base, head); err != nil {
			return nil, err
		}
	}
	base, head = c.unread(base, head)
	if err := c.liveDiff(base, head); err != nil {
		return nil, err
	}
	c.autoscaled(base, head)
	markBefore(t.Changes, index(base))
	markBefore(t.PR, index(base))
	for i := range t.Changes {
		hideSecretFields(&t.Changes[i])
	}
	for i := range t.Drift {
		hideSecretFields(&t.Drift[i])
	}
	return t, nil
}

type comparer struct {
	ctx context.Context
	// live reads what the scope covers; unscoped reads anything, for the
	// reads that belong to an object within it (a claim's volume).
	live, unscoped object.LiveReader
	opts           Options
	tc             managedfields.TypeConverter
	pred           *object.Predictor
	crds           *crdSchemas
	t              *Target
	// encrypted are the objects SOPS encrypts in Git, by Ref key: their live
	// values cannot be compared.
	encrypted map[string]bool
	// inGit are the objects of the base and head renders, by Ref key;
	// newer those the base branch gained since the merge base (Input.Newer).
	inGit, newer map[string]bool
	tipUnknown   string // Input.TipUnknown

	errMu sync.Mutex // predictions run at once and report errors here
}

// addError records a problem with one object; safe from several goroutines.
func (c *comparer) addError(msg string) {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	c.t.Errors = append(c.t.Errors, msg)
}

// outOfScope keeps, of the renders, the objects within the scope, and lists
// the others with what the pull request does to them in Git.
func (c *comparer) outOfScope(base, head []*unstructured.Unstructured) (inBase, inHead []*unstructured.Unstructured, err error) {
	namespaced, err := object.NamespacedKinds(c.ctx, c.live, append(append([]*unstructured.Unstructured{}, base...), head...))
	if err != nil {
		return nil, nil, err
	}
	inBase, inHead, c.t.OutOfScope = c.setAside(base, head, func(o *unstructured.Unstructured) string {
		if c.opts.Scope.Within(o, namespaced) {
			return ""
		}
		return OutOfScopeNote
	})
	return inBase, inHead, nil
}

// unread keeps, of the renders, the objects of kinds the live state holds,
// and lists the others (kinds a dump lacks) with what the pull request does
// to them in Git, and why.
func (c *comparer) unread(base, head []*unstructured.Unstructured) (inBase, inHead []*unstructured.Unstructured) {
	inBase, inHead, c.t.Unread = c.setAside(base, head, func(o *unstructured.Unstructured) string {
		if why := object.LacksIn(c.live, o.GroupVersionKind().GroupKind(), o.GetNamespace()); why != "" {
			return "not compared with the cluster: " + why
		}
		return ""
	})
	return inBase, inHead
}

// setAside keeps, of the renders, the objects aside says nothing of, and
// lists the others once, with what the pull request does to them in Git
// and aside's note.
func (c *comparer) setAside(base, head []*unstructured.Unstructured, aside func(*unstructured.Unstructured) string) (inBase, inHead []*unstructured.Unstructured, set []Change) {
	git := map[string]Change{}
	for _, ch := range c.t.PR {
		git[ch.Ref().Key()] = ch
	}
	seen := map[string]bool{}
	keep := func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
		out := []*unstructured.Unstructured{}
		for _, o := range objs {
			note := aside(o)
			if note == "" {
				out = append(out, o)
				continue
			}
			ref := object.RefOf(o)
			if seen[ref.Key()] {
				continue
			}
			seen[ref.Key()] = true
			ch := newChange(ref, ActionUnchanged)
			if g, ok := git[ref.Key()]; ok {
				// What Git alone says of it stands, its dangers too,
				// with how much they cost unknown.
				ch.Action = g.Action
				for _, d := range g.Danger {
					d.CountUnknown = true
					ch.Danger = append(ch.Danger, d)
				}
			}
			ch.Note = note
			set = append(set, ch)
		}
		return out
	}
	inBase = keep(base)
	if base == nil {
		inBase = nil // nil base: the drift of the head is wanted
	}
	inHead = keep(head)
	sortChanges(set)
	return inBase, inHead, set
}

// OutOfScopeNote explains an object the comparison did not read live.
const OutOfScopeNote = "outside this target's scope: not compared with the cluster"

// gitDiff compares two renders field by field, without the cluster.
func (c *comparer) gitDiff(base, head []*unstructured.Unstructured) []Change {
	out := []Change{}
	b := index(base)
	for _, h := range head {
		ref := object.RefOf(h)
		old, ok := b[ref.Key()]
		if !ok {
			out = append(out, newChange(ref, ActionCreate))
			continue
		}
		var fields []object.Field
		var err error
		if old.GetAPIVersion() == h.GetAPIVersion() {
			fields, err = object.FieldDiff(c.tc, old, h, nil)
		} else {
			// The same object written at another version of its group
			// (apps/v1beta2 to apps/v1): the schemas differ, so the
			// fields are compared as they are written.
			fields, err = object.FieldDiff(object.DeducedTypes, old, h, nil)
			fields = append([]object.Field{{Path: ".apiVersion", Live: old.GetAPIVersion(), Desired: h.GetAPIVersion()}}, fields...)
		}
		ch := newChange(ref, ActionUpdate)
		if err != nil {
			ch.Note = "could not compare: " + err.Error()
			c.t.Errors = append(c.t.Errors, ref.String()+": compare base and head: "+err.Error())
		}
		ch.Fields = fields
		if len(fields) == 0 && err == nil {
			ch.Action = ActionUnchanged
		}
		out = append(out, ch)
	}
	h := index(head)
	for _, o := range base {
		if _, ok := h[object.RefOf(o).Key()]; !ok {
			out = append(out, newChange(object.RefOf(o), ActionDelete))
		}
	}
	sortChanges(out)
	return out
}

// liveDiff fills the live impact (head vs live), prunes and drift (base vs live).
func (c *comparer) liveDiff(base, head []*unstructured.Unstructured) error {
	refs := map[string]object.Ref{}
	for _, o := range append(append([]*unstructured.Unstructured{}, base...), head...) {
		refs[object.RefOf(o).Key()] = object.RefOf(o)
	}
	list := make([]object.Ref, 0, len(refs))
	for _, r := range refs {
		list = append(list, r)
	}
	object.SortRefs(list)
	liveObjs, err := c.live.Get(c.ctx, list)
	if err != nil {
		return fmt.Errorf("read live objects: %w", err)
	}
	for _, o := range liveObjs {
		maskSecret(o)
	}
	if c.opts.SecretsFromGit {
		secretsFromGit(liveObjs, base, head)
	}
	if c.opts.GitOnly != nil {
		valuesFromGit(liveObjs, base, head, c.opts.GitOnly)
	}
	for _, o := range append(append([]*unstructured.Unstructured{}, base...), head...) {
		c.opts.Tracking.keepTracking(o, liveObjs[object.RefOf(o).Key()])
	}

	// Drift first: the live impact marks the drift it overwrites.
	driftBase := base
	if base == nil {
		driftBase = head
	}
	drifted := map[string]map[string]object.Field{}
	// An object the pull request leaves as it is predicts the same apply at
	// base and head: the drift's prediction is reused for the impact.
	predicted := map[string]predictedChange{}
	driftChanges := c.predictAll(driftBase, liveObjs, nil)
	for i, d := range driftBase {
		ref := object.RefOf(d)
		if _, ok := liveObjs[ref.Key()]; !ok {
			ch := newChange(ref, ActionCreate)
			ch.Note = "missing from the cluster"
			c.t.Drift = append(c.t.Drift, ch)
			continue
		}
		ch := driftChanges[i]
		predicted[ref.Key()] = predictedChange{desired: d, change: ch}
		c.t.Drift = append(c.t.Drift, ch)
		if len(ch.Fields) > 0 {
			drifted[ref.Key()] = map[string]object.Field{}
			for _, f := range ch.Fields {
				drifted[ref.Key()][f.Path] = f
			}
		}
	}

	inHead := map[string]bool{}
	reuse := func(h *unstructured.Unstructured) (Change, bool) {
		p, ok := predicted[object.RefOf(h).Key()]
		if !ok || !reflect.DeepEqual(p.desired.Object, h.Object) {
			return Change{}, false
		}
		ch := p.change
		ch.Fields = append([]object.Field(nil), p.change.Fields...)
		return ch, true
	}
	headChanges := c.predictAll(head, liveObjs, reuse)
	for i, h := range head {
		ref := object.RefOf(h)
		inHead[ref.Key()] = true
		if _, ok := liveObjs[ref.Key()]; !ok {
			c.t.Changes = append(c.t.Changes, newChange(ref, ActionCreate))
			continue
		}
		ch := headChanges[i]
		for i := range ch.Fields {
			if _, ok := drifted[ref.Key()][ch.Fields[i].Path]; ok {
				ch.Fields[i].OverwritesDrift = true
				ch.OverwritesDrift = true
			}
		}
		c.t.Changes = append(c.t.Changes, ch)
	}

	prunes, err := c.prunes(base, inHead, liveObjs)
	if err != nil {
		return err
	}
	c.t.Changes = append(c.t.Changes, prunes...)
	sortChanges(c.t.Unread)
	if err := c.classify(c.t.Changes, liveObjs); err != nil {
		return err
	}
	rbacDangers(c.t.Changes, index(head), liveObjs, "")
	mergeGitDangers(c.t.Changes, c.t.PR)
	c.tell(base, head, liveObjs)
	sortChanges(c.t.Changes)
	sortChanges(c.t.Drift)
	sort.Strings(c.t.Errors) // predictions ran at once: a stable order
	return nil
}

// predictAll predicts the apply of each desired object that is live, on
// every core (each prediction is independent, and most of a comparison's
// time), in the order of desired. known, when set, gives a change already
// predicted instead.
func (c *comparer) predictAll(desired []*unstructured.Unstructured, live map[string]*unstructured.Unstructured, known func(*unstructured.Unstructured) (Change, bool)) []Change {
	out := make([]Change, len(desired))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(1, len(desired))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(desired); i = int(next.Add(1)) - 1 {
				d := desired[i]
				l, ok := live[object.RefOf(d).Key()]
				if !ok {
					continue
				}
				if known != nil {
					if ch, ok := known(d); ok {
						out[i] = ch
						continue
					}
				}
				out[i] = c.predictChange(object.RefOf(d), l, d)
			}
		}()
	}
	wg.Wait()
	return out
}

// predictedChange is a prediction and the desired object it was made for.
type predictedChange struct {
	desired *unstructured.Unstructured
	change  Change
}

// predictChange says what applying desired onto live changes.
func (c *comparer) predictChange(ref object.Ref, live, desired *unstructured.Unstructured) Change {
	ch := newChange(ref, ActionUpdate)
	if c.encrypted[ref.Key()] {
		ch.Action, ch.Note = ActionUnchanged, object.SOPSNote
		return ch
	}
	manager := c.applierOf(live)
	var after *unstructured.Unstructured
	var err error
	// A Secret's values are masked before anything sees them, so the server
	// could only compare masks: Secrets are always predicted locally.
	switch mode := c.opts.Mode; {
	case mode == ModeDryRun && !isSecret(desired):
		if c.opts.DryRun == nil {
			err = errors.New("dry-run mode needs a cluster connection")
			break
		}
		after, err = c.opts.DryRun.DryRunApply(c.ctx, desired, manager)
		if err == nil && after == nil {
			ch.Action = ActionUnchanged
			return ch
		}
		if err == nil {
			maskSecret(after)
		}
	default:
		var crd *structuralschema.Structural
		if !object.BuiltinScheme().Recognizes(desired.GroupVersionKind()) {
			crd, err = c.crdSchema(desired.GroupVersionKind())
		}
		if err == nil {
			after, err = c.pred.Apply(live, desired, manager, crd)
		}
	}
	if err != nil {
		ch.Note = "could not predict the apply: " + err.Error()
		c.addError(ref.String() + ": predict apply: " + err.Error())
		return ch
	}
	only, err := object.FieldSet(c.tc, desired)
	if err != nil {
		only = nil // compare every field rather than none
	}
	fields, err := object.FieldDiff(c.tc, live, after, only)
	if err != nil {
		ch.Note = "could not compare: " + err.Error()
		c.addError(ref.String() + ": compare: " + err.Error())
		return ch
	}
	if c.opts.Mode == ModeDryRun && !isSecret(desired) {
		fields = withoutServerDefaults(fields, only)
	}
	object.AttributeFields(fields, live)
	ch.Fields = object.FilterIgnored(ref, fields, c.opts.Ignore, c.opts.IgnoreManagers)
	if len(ch.Fields) == 0 {
		ch.Action = ActionUnchanged
	}
	return ch
}

// withoutServerDefaults keeps, of a dry-run result, only fields the desired
// object sets and removals: defaults the server fills in are not changes.
func withoutServerDefaults(fields []object.Field, only *fieldpath.Set) []object.Field {
	if only == nil {
		return fields
	}
	out := fields[:0]
	for _, f := range fields {
		if f.Desired == nil || only.Has(f.FieldPath()) || object.OwnsUnder(only, f.FieldPath()) {
			out = append(out, f)
		}
	}
	return out
}

// applierOf names the field manager a sync applies with.
func (c *comparer) applierOf(live *unstructured.Unstructured) string {
	if c.opts.Manager != "" {
		return c.opts.Manager
	}
	for _, e := range live.GetManagedFields() {
		if e.Operation == "Apply" && object.ManagerMatches(KnownAppliers, e.Manager) {
			return e.Manager
		}
	}
	return DefaultManager
}

func index(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := make(map[string]*unstructured.Unstructured, len(objs))
	for _, o := range objs {
		out[object.RefOf(o).Key()] = o
	}
	return out
}

// kindOrder puts the objects a reviewer looks for first at the top, as
// kustomize's legacy order does.
var kindOrder = map[string]int{
	"Namespace": 0, "CustomResourceDefinition": 1, "ClusterRole": 2, "ClusterRoleBinding": 3,
	"ServiceAccount": 4, "Role": 5, "RoleBinding": 6, "ConfigMap": 7, "Secret": 8,
	"PersistentVolume": 9, "PersistentVolumeClaim": 10, "Service": 11,
}

func sortChanges(cs []Change) {
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		oa, ok := kindOrder[a.Kind]
		if !ok {
			oa = 50
		}
		ob, ok := kindOrder[b.Kind]
		if !ok {
			ob = 50
		}
		if oa != ob {
			return oa < ob
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}

func typeConverter(ctx context.Context, live object.LiveReader, objs []*unstructured.Unstructured) (managedfields.TypeConverter, error) {
	src, ok := live.(object.SchemaSource)
	if !ok {
		return object.BuiltinTypeConverter(), nil
	}
	seen := map[schema.GroupVersionKind]bool{}
	var gvks []schema.GroupVersionKind
	for _, o := range objs {
		if gvk := o.GroupVersionKind(); !seen[gvk] {
			seen[gvk] = true
			gvks = append(gvks, gvk)
		}
	}
	return src.TypeConverter(ctx, gvks)
}

// defaultNamespaces places objects as Place does, in place: objs are the
// comparison's own copies.
func defaultNamespaces(objs []*unstructured.Unstructured, namespaced map[schema.GroupKind]bool, def string, unknownNamespaced bool) {
	for _, o := range objs {
		if ns := object.PlacedNamespace(o, namespaced, def, unknownNamespaced); ns != o.GetNamespace() {
			o.SetNamespace(ns)
		}
	}
}
