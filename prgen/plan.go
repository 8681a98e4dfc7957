// Package prgen plans the Git change that codifies drift: for each field a
// person changed live, it finds where in the overlay's kustomize sources the
// value comes from, edits that file keeping its comments and layout, and
// verifies the edit by rendering again. The planner is pure: publishing the
// plan as a branch and pull request is separate.
package prgen

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/prgen/yamledit"
	"github.com/driftback/driftback/render"
)

// Strategy names where a codified value was written.
type Strategy string

// Strategies, in the order they are tried.
const (
	StrategyReplicas Strategy = "kustomization replicas"
	StrategyImages   Strategy = "kustomization images"
	StrategyResource Strategy = "the overlay's own resource file"
	// StrategyExistingPatch edits the overlay's patch that sets the field
	// today: a strategic-merge or JSON 6902 patch, in a file or inline.
	StrategyExistingPatch Strategy = "the overlay's patch that sets it"
	StrategyPatch         Strategy = "a strategic-merge patch in the overlay"
	// StrategyChartValue edits the one value of a Helm release that sets
	// the field.
	StrategyChartValue Strategy = "the Helm release's value that sets it"
)

// Input is what a plan is made from.
type Input struct {
	// Tree is the repository at the head of its default branch.
	Tree *render.Tree
	// Overlay is the overlay directory the drift belongs to.
	Overlay string
	// Renderer renders the overlay; it must record origins.
	Renderer *render.Renderer
	// Drift is the overlay's drift (drift.Target.Drift), with live values and
	// the managers that made them.
	Drift []drift.Change
	// Appliers are field managers whose writes are Git's, never a person's;
	// empty means drift.KnownAppliers.
	Appliers []string
	// Intents are the reasons people gave for their changes, by object
	// ("Kind/namespace/name"), from the driftback.io/intent annotation.
	Intents map[string]string
	// Unmanaged are objects a person created live in the overlay's
	// namespaces that Git does not declare, as read from the cluster.
	Unmanaged []*unstructured.Unstructured
	// Adopt writes Unmanaged objects into the overlay; otherwise they are
	// only listed.
	Adopt bool
	// Variables are the variables the reconciler substitutes after the
	// build (a Flux Kustomization's postBuild); nil when it substitutes none.
	Variables *Variables
	// Generated is the kustomization the reconciler generates for a plain
	// directory (Flux, Argo CD), present in Tree but not in Git: a change
	// is written only into the manifest file that holds the object, never
	// into it; "" when the overlay has its own.
	Generated string
	// Build is the reconciler object whose own fields take part in the
	// build (a Flux Kustomization, an Argo CD Application): every render
	// is the reconciler's, and a value one of its build options sets is
	// written into its manifest in Git. Nil for plain kustomize.
	Build *Build
	// Charts traces a field of an object a Helm chart renders to the one
	// release value that sets it; nil when the render holds no release.
	Charts ChartValues
	// NotWritable says why nothing of the drift can be written back (the
	// target is rendered from a chart whose values are not traced): every
	// field is listed with it, nothing is rendered or edited.
	NotWritable string
}

// ChartValues traces drift on the objects of the Helm releases a target
// renders.
type ChartValues interface {
	// Trace is the field of the release's HelmRelease whose value, set
	// to live, makes the release render live at fp of obj
	// ("Kind/namespace/name") and nothing else differently; or why there
	// is none. ok is false when obj is none of the releases'.
	Trace(ctx context.Context, obj string, fp fieldpath.Path, live any) (t ChartEdit, why string, ok bool)
}

// ChartEdit is the field of a HelmRelease of the overlay that sets a
// field of its chart's objects: written as any field of the overlay's
// objects is, within the overlay, and verified by rendering it again.
type ChartEdit struct {
	// Release is the HelmRelease as the overlay renders it: matched by
	// its namespace and name, never its name alone.
	Release object.Ref
	// Path is the value's field in the HelmRelease (.spec.values.…).
	Path fieldpath.Path
	// Was is the value Git renders there now.
	Was any
}

// Codified is one field written back to Git.
type Codified struct {
	Object string `json:"object"`
	Path   string `json:"path"`
	Value  any    `json:"value"`
	// Was is the value Git renders before the change.
	Was     any        `json:"was"`
	Manager string     `json:"manager,omitempty"`
	Time    *time.Time `json:"time,omitempty"`
	// By is the person who made the live value (drift/audit); nil when
	// unattributed.
	By       *object.Person `json:"by,omitempty"`
	File     string         `json:"file"`
	Strategy Strategy       `json:"strategy"`
}

// Manual is a field no strategy could codify: a person must edit it.
type Manual struct {
	Object string `json:"object"`
	Path   string `json:"path"`
	Value  any    `json:"value"`
	Reason string `json:"reason"`
}

// SecretDrift is a Secret changed live: only its keys are named, and nothing
// is written to Git.
type SecretDrift struct {
	Object string   `json:"object"`
	Keys   []string `json:"keys"`
}

// Plan is the change that codifies an overlay's drift.
type Plan struct {
	Overlay string `json:"overlay"`
	// Files maps repository paths to their new content.
	Files    map[string][]byte `json:"-"`
	Codified []Codified        `json:"codified"`
	Manual   []Manual          `json:"manual"`
	// Deleted are objects Git has that the cluster does not: listed, not removed.
	Deleted []string `json:"deleted"`
	// NotApplied are objects Git has that the reconciler has not applied
	// yet (a commit newer than what it applied): not drift, listed.
	NotApplied []string      `json:"notApplied"`
	Secrets    []SecretDrift `json:"secrets"`
	// Adopted are objects created live, now written into the overlay.
	Adopted []Adopted `json:"adopted"`
	// Unmanaged are objects created live that are only listed: adoption is
	// off, it did not verify, or they are Secrets.
	Unmanaged []Manual `json:"unmanaged"`
	// Intents quotes the driftback.io/intent annotation of changed objects.
	Intents map[string]string `json:"intents,omitempty"`
	// Autoscaled are replicas changed live on workloads an autoscaler owns:
	// reported with why, never written to Git, and alone no reason for a
	// pull request.
	Autoscaled []Manual `json:"autoscaled"`
	// Fights are fields two writers keep changing back and forth: not
	// drift to codify but a rule to choose. They are reported, never
	// written.
	Fights []Fight `json:"fights,omitempty"`
	// Fate says what the target's reconciler does with the live changes
	// if nobody acts (reverts them at its next apply, or leaves them);
	// empty when unknown. Not part of the fingerprint: it is not a change.
	Fate string `json:"fate,omitempty"`
	// Audited says the cluster's audit log was read for who made each
	// change (Codified.By); a change it names no one for is unattributed.
	// Not part of the fingerprint.
	Audited bool `json:"audited,omitempty"`
	// CoAuthors are the people who made the changes, as the commit's
	// Co-authored-by trailers name them ("login <ID+login@users.noreply.github.com>").
	CoAuthors []string `json:"coAuthors,omitempty"`
}

// Fight is a field that went back and forth between two field managers.
type Fight struct {
	Object string `json:"object"`
	Path   string `json:"path"`
	// Managers are the two writers, the reconciler's first when it is one.
	Managers [2]string `json:"managers"`
	// Changes is how many times the field changed hands within Window.
	Changes int           `json:"changes"`
	Window  time.Duration `json:"window"`
	// Last are the field's last values, by manager.
	Last map[string]any `json:"last"`
	// Since is when the field was first seen in drift.
	Since time.Time `json:"since"`
}

// Adopted is an object created live and written into the overlay.
type Adopted struct {
	Object  string     `json:"object"`
	File    string     `json:"file"`
	Manager string     `json:"manager,omitempty"`
	Time    *time.Time `json:"time,omitempty"`
}

// Empty reports whether there is nothing to propose.
func (p *Plan) Empty() bool {
	return len(p.Files) == 0 && len(p.Manual) == 0 && len(p.Deleted) == 0 && len(p.Secrets) == 0 && len(p.Unmanaged) == 0 && len(p.Fights) == 0
}

// OnlyFights says the plan reports fights and proposes nothing.
func (p *Plan) OnlyFights() bool {
	return len(p.Fights) > 0 && len(p.Files) == 0 && len(p.Manual) == 0 && len(p.Deleted) == 0 && len(p.Secrets) == 0 && len(p.Unmanaged) == 0
}

// Paths returns the changed files, sorted.
func (p *Plan) Paths() []string {
	out := make([]string, 0, len(p.Files))
	for f := range p.Files {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

type planner struct {
	ctx   context.Context
	in    Input
	edits map[string][]byte
	// current is the render with the accepted edits.
	current *render.Overlay
	objs    []*unstructured.Unstructured
	// raw are the objects before the reconciler substitutes variables
	// (the same as objs without Input.Variables), and values the
	// variables with the accepted changes.
	raw    []*unstructured.Unstructured
	values map[string]string
	// build is the reconciler object (Input.Build) with the accepted
	// edits of its manifest, and buildFile that manifest once found.
	build     *unstructured.Unstructured
	buildFile string
	// bare is the render without the build options driftback writes,
	// once made; bareErr why it could not be made.
	bare    []*unstructured.Unstructured
	bareErr error
}

// Make plans the codification of an overlay's drift. Fields set by the
// applier, controllers or nobody are not a person's change and are left out.
func Make(ctx context.Context, in Input) (*Plan, error) {
	if len(in.Appliers) == 0 {
		in.Appliers = drift.KnownAppliers
	}
	p := &planner{ctx: ctx, in: in, edits: map[string][]byte{}}
	if in.Variables != nil {
		p.values = copyValues(in.Variables.Values)
	}
	if in.Build != nil {
		p.build = in.Build.Object.DeepCopy()
	}
	if in.NotWritable == "" {
		if err := p.rerender(); err != nil {
			return nil, err
		}
	}
	plan := &Plan{Overlay: in.Overlay, Files: map[string][]byte{}, Codified: []Codified{}, Manual: []Manual{}, Deleted: []string{}, NotApplied: []string{}, Secrets: []SecretDrift{},
		Adopted: []Adopted{}, Unmanaged: []Manual{}, Autoscaled: []Manual{}}
	for _, ch := range in.Drift {
		obj := refString(ch)
		switch {
		case ch.Action == drift.ActionCreate:
			plan.Deleted = append(plan.Deleted, obj)
			continue
		case ch.Action != drift.ActionUpdate:
			continue
		case ch.Secret:
			var keys []string
			for _, f := range ch.Fields {
				keys = append(keys, strings.TrimPrefix(strings.TrimPrefix(f.Path, ".data."), ".stringData."))
			}
			plan.Secrets = append(plan.Secrets, SecretDrift{Object: obj, Keys: keys})
			continue
		}
		for _, f := range ch.Fields {
			if f.Manager == "" || f.Hidden || contains(in.Appliers, f.Manager) {
				continue
			}
			if f.Autoscaler != "" {
				name, _, _ := strings.Cut(f.Autoscaler, " ")
				plan.Autoscaled = append(plan.Autoscaled, Manual{Object: obj, Path: f.Path, Value: f.Live,
					Reason: "replicas belong to " + f.Autoscaler + "; to change them for good, change " + name + "'s bounds in Git"})
				continue
			}
			c, reason := (*Codified)(nil), in.NotWritable
			if reason == "" {
				c, reason = p.codify(ch, f)
			}
			if c != nil {
				plan.Codified = append(plan.Codified, *c)
			} else {
				plan.Manual = append(plan.Manual, Manual{Object: obj, Path: f.Path, Value: f.Live, Reason: reason})
			}
		}
	}
	for _, obj := range in.Unmanaged {
		ref := objectString(obj)
		switch {
		case obj.GetKind() == "Secret" && obj.GroupVersionKind().Group == "":
			plan.Unmanaged = append(plan.Unmanaged, Manual{Object: ref, Reason: "a Secret: driftback never writes Secret values to Git"})
		case in.NotWritable != "":
			plan.Unmanaged = append(plan.Unmanaged, Manual{Object: ref, Reason: "created live, not in Git; " + in.NotWritable})
		case !in.Adopt:
			plan.Unmanaged = append(plan.Unmanaged, Manual{Object: ref, Reason: "created live, not in Git (adoptUnmanaged is off)"})
		case in.Generated != "":
			plan.Unmanaged = append(plan.Unmanaged, Manual{Object: ref, Reason: "created live, not in Git; adopting into a plain directory is not written yet"})
		default:
			a, reason := p.adopt(obj)
			if a != nil {
				plan.Adopted = append(plan.Adopted, *a)
			} else {
				plan.Unmanaged = append(plan.Unmanaged, Manual{Object: ref, Reason: reason})
			}
		}
	}
	for f, b := range p.edits {
		plan.Files[f] = b
	}
	if _, ok := plan.Files[in.Generated]; ok && in.Generated != "" {
		// Never: the strategies that edit a kustomization are not tried.
		return nil, fmt.Errorf("the plan edits %s, which the reconciler generates", in.Generated)
	}
	for obj, reason := range in.Intents {
		if plan.Intents == nil {
			plan.Intents = map[string]string{}
		}
		plan.Intents[obj] = reason
	}
	return plan, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func objectString(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + "/" + o.GetName()
	}
	return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}

func refString(c drift.Change) string {
	if c.Namespace == "" {
		return c.Kind + "/" + c.Name
	}
	return c.Kind + "/" + c.Namespace + "/" + c.Name
}

func (p *planner) render(edits map[string][]byte) (*render.Overlay, []*unstructured.Unstructured, error) {
	o, objs, _, err := p.renderWith(edits, p.values)
	return o, objs, err
}

// renderWith renders the overlay with edits and, for a target whose
// reconciler substitutes variables, substitutes values: the objects as
// applied, and raw, before substitution.
func (p *planner) renderWith(edits map[string][]byte, values map[string]string) (o *render.Overlay, objs, raw []*unstructured.Unstructured, err error) {
	return p.renderAs(edits, values, p.build)
}

// renderAs renders as renderWith does, the reconciler's object being build.
func (p *planner) renderAs(edits map[string][]byte, values map[string]string, build *unstructured.Unstructured) (o *render.Overlay, objs, raw []*unstructured.Unstructured, err error) {
	tree := p.in.Tree
	if len(edits) > 0 {
		tree = tree.With(edits)
	}
	var opts render.BuildOptions
	if p.in.Build != nil {
		if tree, opts, err = p.in.Build.Tree(tree, build); err != nil {
			return nil, nil, nil, err
		}
	}
	res, err := p.in.Renderer.RenderWith(p.ctx, tree, []string{p.in.Overlay}, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	o = res.Overlays[0]
	if err := o.Err(); err != nil {
		return o, nil, nil, err
	}
	if raw, err = o.Objects(); err != nil {
		return o, raw, raw, err
	}
	finish := func(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
		return p.in.Variables.Substitute(objs, values)
	}
	switch {
	case p.in.Variables != nil:
	case p.in.Build != nil && p.in.Build.Finish != nil:
		finish = p.in.Build.Finish
	default:
		return o, raw, raw, nil
	}
	copies := make([]*unstructured.Unstructured, len(raw))
	for i, r := range raw {
		copies[i] = r.DeepCopy()
	}
	objs, err = finish(copies)
	if err == nil && len(objs) != len(raw) {
		err = fmt.Errorf("substitution returned %d objects of %d", len(objs), len(raw))
	}
	return o, objs, raw, err
}

func (p *planner) rerender() error {
	o, objs, raw, err := p.renderWith(p.edits, p.values)
	if err != nil {
		return fmt.Errorf("%s: render: %w", p.in.Overlay, err)
	}
	p.current, p.objs, p.raw = o, objs, raw
	return nil
}

// find returns the rendered object of a change and its origin.
func (p *planner) find(ch drift.Change) (int, *unstructured.Unstructured) {
	for i, o := range p.objs {
		if o.GetKind() == ch.Kind && o.GetName() == ch.Name && (o.GetNamespace() == ch.Namespace || o.GetNamespace() == "") &&
			o.GroupVersionKind().Group == groupOf(ch.APIVersion) {
			return i, o
		}
	}
	return -1, nil
}

func groupOf(apiVersion string) string {
	if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
		return apiVersion[:i]
	}
	return ""
}

// attempt is one way to write a field: a file and its new content.
type attempt struct {
	strategy Strategy
	file     string
	edit     func() ([]byte, error)
	// build reads the reconciler's object back from the edited content,
	// for an edit of its manifest; nil for an edit of the overlay.
	build func(content []byte) (*unstructured.Unstructured, error)
	// also are the other objects the edit sets the same field of, to the
	// same value (a kustomization's labels set every object's).
	also []int
}

// codify tries each strategy for one field and keeps the first whose render
// verifies.
func (p *planner) codify(ch drift.Change, f object.Field) (*Codified, string) {
	i, obj := p.find(ch)
	fp := f.FieldPath()
	if obj == nil && p.in.Charts != nil {
		edit, why, ok := p.in.Charts.Trace(p.ctx, refString(ch), fp, f.Live)
		switch {
		case ok && why != "":
			return nil, why
		case ok:
			return p.codifyChartValue(ch, f, edit)
		}
	}
	if obj == nil {
		return nil, "the object is not in the overlay's render"
	}
	var origin render.Origin
	if i < len(p.current.Origins) {
		origin = p.current.Origins[i]
	}
	if origin.ConfiguredIn != "" {
		return nil, "the object is generated (" + origin.ConfiguredBy + "); change the generator's inputs"
	}
	if p.in.Variables != nil && i < len(p.raw) {
		// A field the reconciler substitutes is written where its variable
		// is set, never over the reference.
		if raw, ok := object.ValueAt(p.raw[i].Object, fp).(string); ok && variableRef.MatchString(raw) {
			file := ""
			if origin.Path != "" && strings.HasPrefix(origin.Path, p.in.Overlay+"/") && origin.Path != p.in.Generated {
				file = origin.Path
			}
			return p.codifyVariable(ch, f, i, obj, raw, file)
		}
	}
	// A field the reconciler's own build options set is written there,
	// and only there: an edit of the overlay would be overridden, or
	// override them unseen.
	var attempts []attempt
	reason := ""
	switch set, known := p.setByOptions(i, fp); {
	case set:
		attempts, reason = p.buildAttempts(obj, sourceName(p, obj, origin), fp, f.Live)
		if len(attempts) == 0 && reason == "" {
			reason = "its " + p.build.GetKind() + "'s build options set it in a way driftback does not write"
		}
	case !known:
		attempts, reason = p.buildAttempts(obj, sourceName(p, obj, origin), fp, f.Live)
	}
	kust := p.kustomizationFile()
	generated := p.in.Generated != ""
	switch set, _ := p.setByOptions(i, fp); {
	case set:
	case generated:
		// A plain directory: only the file that holds the object is Git's.
		if origin.Path == "" || !strings.HasPrefix(origin.Path, p.in.Overlay+"/") || origin.Path == p.in.Generated {
			return nil, "a plain directory of manifests whose file for the object is not found"
		}
		attempts = append(attempts, attempt{strategy: StrategyResource, file: origin.Path, edit: func() ([]byte, error) { return p.editResource(origin.Path, obj, fp, f.Live) }})
	}
	patchFile := path.Join(p.in.Overlay, fmt.Sprintf("driftback-%s-%s.yaml", strings.ToLower(obj.GetKind()), sourceName(p, obj, origin)))
	// A label or annotation the overlay's kustomization sets on every
	// object is written there, or not at all: kustomize sets them after
	// patches, so nothing else can change them.
	entry, byTransformer := p.transformerSets(kust, fp)
	if set, _ := p.setByOptions(i, fp); byTransformer && !generated && !set {
		if why := p.transformerWhy(kust, entry, fp, f.Path, f.Live, f.Desired); why != "" {
			return nil, why
		}
		attempts = append(attempts, attempt{strategy: StrategyTransformer, file: kust, edit: func() ([]byte, error) { return p.editTransformer(kust, entry, f.Live) },
			also: p.setAlike(i, fp, f.Desired)})
	} else if set, _ := p.setByOptions(i, fp); !generated && !set {
		if isReplicas(fp) {
			attempts = append(attempts, attempt{strategy: StrategyReplicas, file: kust, edit: func() ([]byte, error) {
				return p.editReplicas(kust, sourceName(p, obj, origin), f.Live)
			}})
		}
		if isImage(fp) {
			if s, ok := f.Live.(string); ok {
				attempts = append(attempts, attempt{strategy: StrategyImages, file: kust, edit: func() ([]byte, error) { return p.editImages(kust, s) }})
			}
		}
		if sources, err := p.patchSources(kust); err == nil {
			for _, src := range sources {
				attempts = append(attempts, attempt{strategy: StrategyExistingPatch, file: src.file, edit: func() ([]byte, error) {
					return p.editExistingPatch(src, obj, sourceName(p, obj, origin), fp, f.Live)
				}})
			}
		}
		if origin.Path != "" && strings.HasPrefix(origin.Path, p.in.Overlay+"/") {
			attempts = append(attempts, attempt{strategy: StrategyResource, file: origin.Path, edit: func() ([]byte, error) { return p.editResource(origin.Path, obj, fp, f.Live) }})
		}
		// A new patch matches its object by namespace as the object enters the
		// overlay: none when the overlay sets it, else the render's or the
		// source file's. Each is tried; the render decides.
		for _, ns := range p.patchNamespaces(obj, origin) {
			attempts = append(attempts, attempt{strategy: StrategyPatch, file: patchFile, edit: func() ([]byte, error) {
				return p.editPatch(patchFile, obj, sourceName(p, obj, origin), ns, fp, f.Live)
			}})
		}
	}

	if reason == "" {
		reason = "no source file sets it"
	}
	for _, a := range attempts {
		content, err := a.edit()
		if err != nil || content == nil {
			if err != nil {
				reason = fmt.Sprintf("%s: %v", a.strategy, err)
			}
			continue
		}
		edits := clone(p.edits)
		edits[a.file] = content
		if a.strategy == StrategyPatch {
			k, err := p.addPatch(edits, kust, path.Base(patchFile))
			if err != nil {
				reason = err.Error()
				continue
			}
			edits[kust] = k
		}
		build := p.build
		if a.build != nil {
			if build, err = a.build(content); err != nil {
				reason = fmt.Sprintf("%s: %v", a.strategy, err)
				continue
			}
		}
		if ok, why := p.verifyAs(edits, p.values, build, i, fp, f.Live, a.also...); ok {
			p.edits, p.build = edits, build
			if err := p.rerender(); err != nil {
				return nil, err.Error()
			}
			return &Codified{Object: refString(ch), Path: f.Path, Value: f.Live, Was: f.Desired, Manager: f.Manager, Time: f.Time, By: f.By, File: a.file, Strategy: a.strategy}, ""
		} else if why != "" {
			reason = fmt.Sprintf("%s did not verify: %s", a.strategy, why)
		}
	}
	return nil, reason
}

// codifyChartValue writes the HelmRelease value that sets a field of its
// chart's object as any field of the overlay is written: into the
// overlay's own files or a patch in it, never a base other overlays
// share, composed with the plan's other edits, and kept only when the
// overlay renders the HelmRelease with that value and nothing else
// changed. The chart's own render with the value is the tracer's to
// verify.
func (p *planner) codifyChartValue(ch drift.Change, f object.Field, edit ChartEdit) (*Codified, string) {
	rel := drift.Change{Kind: edit.Release.Kind, Namespace: edit.Release.Namespace, Name: edit.Release.Name, APIVersion: edit.Release.APIVersion()}
	if _, obj := p.find(rel); obj == nil {
		return nil, "its " + refString(rel) + " is not in the overlay's render"
	}
	value := object.Field{Path: edit.Path.String(), Live: f.Live, Desired: edit.Was, Manager: f.Manager, Time: f.Time, By: f.By}.WithFieldPath(edit.Path)
	c, why := p.codify(rel, value)
	if c == nil {
		return nil, fmt.Sprintf("set by %s's %s, which could not be written: %s", refString(rel), edit.Path, why)
	}
	c.Object, c.Path, c.Was, c.Strategy = refString(ch), f.Path, f.Desired, StrategyChartValue
	return c, ""
}

func clone(m map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// verify renders with edits: the field must come out equal to the live value
// and nothing else may move.
func (p *planner) verify(edits map[string][]byte, index int, fp fieldpath.Path, want any) (bool, string) {
	return p.verifyWith(edits, p.values, index, fp, want)
}

// verifyWith verifies with variables' values as given.
func (p *planner) verifyWith(edits map[string][]byte, values map[string]string, index int, fp fieldpath.Path, want any) (bool, string) {
	return p.verifyAs(edits, values, p.build, index, fp, want)
}

// verifyAs verifies with the reconciler's object as given; the objects
// also take want at fp too.
func (p *planner) verifyAs(edits map[string][]byte, values map[string]string, build *unstructured.Unstructured, index int, fp fieldpath.Path, want any, also ...int) (bool, string) {
	_, after, _, err := p.renderAs(edits, values, build)
	if err != nil {
		return false, err.Error()
	}
	if len(after) != len(p.objs) {
		return false, "the edit adds or removes objects"
	}
	expected := make([]map[string]any, len(p.objs))
	for i, o := range p.objs {
		expected[i] = o.DeepCopy().Object
	}
	for _, j := range append([]int{index}, also...) {
		nv, err := object.SetValueAt(expected[j], fp, want)
		if err != nil {
			return false, err.Error()
		}
		expected[j] = nv.(map[string]any)
	}
	for i := range after {
		if !object.SameJSON(expected[i], after[i].Object) {
			if i == index {
				return false, fmt.Sprintf("%s renders as %v, not the live %v", fp, object.ValueAt(after[i].Object, fp), want)
			}
			// Named as Git writes it: a name substituted from a
			// variable may hold a Secret's piece.
			named := after[i]
			if i < len(p.raw) {
				named = p.raw[i]
			}
			return false, fmt.Sprintf("the edit also changes %s/%s", named.GetKind(), named.GetName())
		}
	}
	return true, ""
}

func (p *planner) kustomizationFile() string {
	for _, n := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		f := path.Join(p.in.Overlay, n)
		if p.in.Tree.Has(f) {
			return f
		}
	}
	return path.Join(p.in.Overlay, "kustomization.yaml")
}

// read returns a file's content with the accepted edits.
func (p *planner) read(file string) ([]byte, error) {
	if b, ok := p.edits[file]; ok {
		return b, nil
	}
	return p.in.Tree.ReadFile(file)
}

func isReplicas(fp fieldpath.Path) bool { return fp.String() == ".spec.replicas" }

func isImage(fp fieldpath.Path) bool {
	s := fp.String()
	return strings.HasSuffix(s, ".image") && (strings.Contains(s, ".containers[") || strings.Contains(s, ".initContainers["))
}

// kustomizationList reads the overlay kustomization (with accepted edits) and
// the entries of one of its top-level lists; no entries when it has none.
func (p *planner) kustomizationList(kust, field string) ([]byte, []*yaml.RNode, []*yaml.RNode, error) {
	b, err := p.read(kust)
	if err != nil {
		return nil, nil, nil, err
	}
	docs, err := yamledit.ReadDocs(b)
	if err != nil || len(docs) == 0 {
		return nil, nil, nil, err
	}
	list, err := docs[0].Pipe(yaml.Lookup(field))
	if err != nil || list == nil {
		return b, docs, nil, err
	}
	items, err := list.Elements()
	return b, docs, items, err
}

// editReplicas sets the count of the overlay's replicas entry for the object,
// named as its source writes it.
func (p *planner) editReplicas(kust, name string, live any) ([]byte, error) {
	b, docs, items, err := p.kustomizationList(kust, "replicas")
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if n, _ := it.GetString("name"); n == name {
			return yamledit.EditAt(b, docs, it, fieldpath.MakePathOrDie("count"), live)
		}
	}
	return nil, nil
}

// editImages points the overlay's images entry for the live image's
// repository at the live tag or digest (newTag and digest exclude each other).
func (p *planner) editImages(kust, live string) ([]byte, error) {
	b, docs, items, err := p.kustomizationList(kust, "images")
	if err != nil {
		return nil, err
	}
	return editImageEntries(b, docs, items, live)
}

// editImageEntries points the images entry (name, newName, newTag, digest)
// for the live image's repository at its tag or digest; nil when no entry
// is for that repository.
func editImageEntries(b []byte, docs, items []*yaml.RNode, live string) ([]byte, error) {
	repo, tag, digest := splitImage(live)
	for _, it := range items {
		name, _ := it.GetString("name")
		newName, _ := it.GetString("newName")
		if newName != repo && (newName != "" || name != repo) {
			continue
		}
		if digest == "" && it.Field("digest") == nil {
			return yamledit.EditAt(b, docs, it, fieldpath.MakePathOrDie("newTag"), tag)
		}
		if digest != "" {
			if err := yamledit.SetField(it, "digest", digest); err != nil {
				return nil, err
			}
			_ = it.PipeE(yaml.Clear("newTag")) // absent already is fine
		} else {
			if err := yamledit.SetField(it, "newTag", tag); err != nil {
				return nil, err
			}
			_ = it.PipeE(yaml.Clear("digest")) // absent already is fine
		}
		return yamledit.WriteDocs(docs)
	}
	return nil, nil
}

// splitImage splits "repo:tag" or "repo@sha256:…".
func splitImage(image string) (repo, tag, digest string) {
	if i := strings.Index(image, "@"); i >= 0 {
		return image[:i], "", image[i+1:]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i], image[i+1:], ""
	}
	return image, "latest", ""
}

// editResource sets the field in the overlay's own file that holds the object.
func (p *planner) editResource(file string, obj *unstructured.Unstructured, fp fieldpath.Path, live any) ([]byte, error) {
	b, err := p.read(file)
	if err != nil {
		return nil, err
	}
	docs, err := yamledit.ReadDocs(b)
	if err != nil {
		return nil, err
	}
	doc := matchDoc(docs, obj)
	if doc == nil {
		return nil, nil
	}
	return yamledit.EditAt(b, docs, doc, fp, live)
}

// matchDoc finds the document of obj in a file: same kind, and the name as
// rendered (in its namespace first: two teams' objects may share a name)
// or as the document says before prefixes and suffixes.
func matchDoc(docs []*yaml.RNode, obj *unstructured.Unstructured) *yaml.RNode {
	var byKind, byName []*yaml.RNode
	for _, d := range docs {
		if d.GetKind() != obj.GetKind() {
			continue
		}
		if d.GetName() == obj.GetName() {
			if d.GetNamespace() == obj.GetNamespace() {
				return d
			}
			byName = append(byName, d)
			continue
		}
		byKind = append(byKind, d)
	}
	if len(byName) > 0 {
		return byName[0]
	}
	for _, d := range byKind {
		if strings.Contains(obj.GetName(), d.GetName()) {
			return d
		}
	}
	return nil
}

// patchNamespaces are the namespaces a new patch for obj may need to name:
// none first (right when the overlay sets the namespace, or the object has
// none), then the rendered one, then the one its source file writes.
func (p *planner) patchNamespaces(obj *unstructured.Unstructured, origin render.Origin) []string {
	out := []string{""}
	add := func(ns string) {
		for _, x := range out {
			if x == ns {
				return
			}
		}
		out = append(out, ns)
	}
	if obj.GetNamespace() != "" {
		add(obj.GetNamespace())
	}
	if origin.Path != "" {
		if b, err := p.in.Tree.ReadFile(origin.Path); err == nil {
			if docs, err := yamledit.ReadDocs(b); err == nil {
				if d := matchDoc(docs, obj); d != nil && d.GetNamespace() != "" {
					add(d.GetNamespace())
				}
			}
		}
	}
	return out
}

// sourceName is the object's name as its source file writes it, which is what
// a patch in the overlay targets.
func sourceName(p *planner, obj *unstructured.Unstructured, origin render.Origin) string {
	if origin.Path != "" {
		if b, err := p.in.Tree.ReadFile(origin.Path); err == nil {
			if docs, err := yamledit.ReadDocs(b); err == nil {
				if d := matchDoc(docs, obj); d != nil {
					return d.GetName()
				}
			}
		}
	}
	return obj.GetName()
}

// editPatch writes the field into the overlay's strategic-merge patch for the
// object, creating the patch when there is none.
func (p *planner) editPatch(file string, obj *unstructured.Unstructured, name, namespace string, fp fieldpath.Path, live any) ([]byte, error) {
	var doc *yaml.RNode
	var docs []*yaml.RNode
	if b, err := p.read(file); err == nil {
		if docs, err = yamledit.ReadDocs(b); err != nil {
			return nil, err
		}
		if len(docs) > 0 {
			doc = docs[0]
		}
	}
	if doc == nil {
		doc = yaml.NewMapRNode(nil)
		if err := doc.PipeE(yaml.SetField("apiVersion", yaml.NewStringRNode(obj.GetAPIVersion()))); err != nil {
			return nil, err
		}
		if err := doc.PipeE(yaml.SetField("kind", yaml.NewStringRNode(obj.GetKind()))); err != nil {
			return nil, err
		}
		// Built in order: a Go map would write name and namespace in
		// either order.
		meta := yaml.NewMapRNode(nil)
		if err := meta.PipeE(yaml.SetField("name", yaml.NewStringRNode(name))); err != nil {
			return nil, err
		}
		if namespace != "" {
			if err := meta.PipeE(yaml.SetField("namespace", yaml.NewStringRNode(namespace))); err != nil {
				return nil, err
			}
		}
		if err := doc.PipeE(yaml.SetField("metadata", meta)); err != nil {
			return nil, err
		}
		doc.YNode().HeadComment = "Written by driftback: codifies a change made in the cluster outside Git."
		docs = []*yaml.RNode{doc}
	}
	if err := yamledit.SetAt(doc, fp, live); err != nil {
		return nil, err
	}
	return yamledit.WriteDocs(docs)
}

// addPatch lists the patch file in the overlay's kustomization, once.
func (p *planner) addPatch(edits map[string][]byte, kust, patch string) ([]byte, error) {
	b, ok := edits[kust]
	if !ok {
		var err error
		if b, err = p.in.Tree.ReadFile(kust); err != nil {
			return nil, err
		}
	}
	docs, err := yamledit.ReadDocs(b)
	if err != nil || len(docs) == 0 {
		return nil, fmt.Errorf("%s: %v", kust, err)
	}
	if f := docs[0].Field("patchesStrategicMerge"); f != nil && docs[0].Field("patches") == nil {
		// The kustomization's own (deprecated) field, rather than a mix.
		items, _ := f.Value.Elements()
		for _, it := range items {
			if it.YNode().Value == patch {
				return b, nil
			}
		}
		if out, ok := yamledit.AppendToList(b, f, "- "+patch); ok {
			return out, nil
		}
		if err := f.Value.PipeE(yaml.Append(yaml.NewStringRNode(patch).YNode())); err != nil {
			return nil, err
		}
		return yamledit.WriteDocs(docs)
	}
	if f := docs[0].Field("patches"); f != nil {
		items, _ := f.Value.Elements()
		for _, it := range items {
			if v, _ := it.GetString("path"); v == patch {
				return b, nil
			}
		}
		if out, ok := yamledit.AppendToList(b, f, "- path: "+patch); ok {
			return out, nil
		}
		entry := yaml.NewMapRNode(&map[string]string{"path": patch})
		if err := f.Value.PipeE(yaml.Append(entry.YNode())); err != nil {
			return nil, err
		}
		return yamledit.WriteDocs(docs)
	}
	// A new top-level list at the end, indented like the file's other lists.
	indent := ""
	if bytes.Contains(b, []byte("\n  - ")) {
		indent = "  "
	}
	out := append([]byte{}, b...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	out = append(out, []byte("patches:\n"+indent+"- path: "+patch+"\n")...)
	return out, nil
}
