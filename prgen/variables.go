package prgen

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/prgen/yamledit"
)

// Variables are what a reconciler substitutes into a target's rendered
// objects after the build (a Flux Kustomization's postBuild): a live change
// to a field whose source is a variable is written where the variable is
// set in Git, never over the reference.
type Variables struct {
	// Values are the variables as substituted now.
	Values map[string]string
	// Secret names the variables whose values come from Secrets: a field
	// made from one is never written.
	Secret map[string]bool
	// Substitute does to rendered objects what the reconciler does after
	// the build, with values.
	Substitute func(objs []*unstructured.Unstructured, values map[string]string) ([]*unstructured.Unstructured, error)
	// Inline is the Kustomization that sets variables inline
	// (postBuild.substitute), as "namespace/name"; Inline names them.
	Kustomization string
	Inline        map[string]bool
	// ConfigMaps are its substituteFrom ConfigMaps, "namespace/name", in
	// its order: a later one overrides an earlier one.
	ConfigMaps []string
}

// StrategyVariable writes a value where its postBuild variable is set.
const StrategyVariable Strategy = "where its variable is set"

// variableRef matches a variable reference as envsubst reads it.
var variableRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// codifyVariable writes a live change to a field whose source holds a
// variable reference (raw): a field that is the variable alone changes the
// variable where Git sets it; a field of a variable and text keeps the
// variable and changes the text, when the text is what changed. Anything
// else is left for a person.
func (p *planner) codifyVariable(ch drift.Change, f object.Field, index int, obj *unstructured.Unstructured, raw string, file string) (*Codified, string) {
	vars := p.in.Variables
	refs := variableRef.FindAllStringSubmatchIndex(raw, -1)
	if len(refs) != 1 {
		return nil, "its source is made of several variables: " + raw
	}
	m := refs[0]
	name, modifier := "", ""
	if m[2] >= 0 {
		name, modifier = raw[m[2]:m[3]], raw[m[4]:m[5]]
	} else {
		name = raw[m[6]:m[7]]
	}
	if vars.Secret[name] {
		return nil, "it comes from the variable " + name + ", whose value is a Secret's: driftback never writes it"
	}
	if modifier != "" && !strings.HasPrefix(modifier, ":=") && !strings.HasPrefix(modifier, ":-") && !strings.HasPrefix(modifier, "=") && !strings.HasPrefix(modifier, "-") {
		return nil, "its source transforms the variable " + name + " (" + raw + ")"
	}
	live, ok := scalarText(f.Live)
	if !ok {
		return nil, "the live value is not a scalar a variable can hold"
	}
	prefix, suffix := raw[:m[0]], raw[m[1]:]
	if prefix == "" && suffix == "" {
		def, content, why := p.defineVariable(name, live)
		if def == "" {
			return nil, why
		}
		values := copyValues(p.values)
		values[name] = live
		edits := clone(p.edits)
		edits[def] = content
		if ok, why := p.verifyWith(edits, values, index, f.FieldPath(), f.Live); !ok {
			return nil, "the variable " + name + " did not verify: " + why
		}
		p.values, p.edits = values, edits
		if b := p.build; vars.Inline[name] && b != nil && b.GetKind() == "Kustomization" && b.GetNamespace()+"/"+b.GetName() == vars.Kustomization {
			// The reconciler's object as its manifest now says.
			p.build = b.DeepCopy()
			if err := unstructured.SetNestedField(p.build.Object, live, "spec", "postBuild", "substitute", name); err != nil {
				return nil, err.Error()
			}
		}
		if err := p.rerender(); err != nil {
			return nil, err.Error()
		}
		return &Codified{Object: refString(ch), Path: f.Path, Value: f.Live, Was: f.Desired, Manager: f.Manager, Time: f.Time, By: f.By, File: def, Strategy: StrategyVariable}, ""
	}
	// A variable and text: only the text is written, the reference kept
	// beside the text that did not change.
	cur, ref := p.values[name], raw[m[0]:m[1]]
	var template string
	switch {
	case strings.HasPrefix(live, prefix) && strings.HasSuffix(live, suffix) && len(live) >= len(prefix)+len(suffix):
		return nil, "the part of " + raw + " that the variable " + name + " sets changed: set the variable, or the text, yourself"
	case cur != "" && strings.HasPrefix(live, prefix+cur):
		template = prefix + ref + live[len(prefix)+len(cur):]
	case cur != "" && strings.HasSuffix(live, cur+suffix):
		template = live[:len(live)-len(cur)-len(suffix)] + ref + suffix
	default:
		return nil, "the live value " + live + " does not keep the variable " + name + "'s value where " + raw + " puts it"
	}
	if file == "" {
		return nil, "no source file sets it"
	}
	content, err := p.editResource(file, obj, f.FieldPath(), template)
	if err != nil || content == nil {
		return nil, fmt.Sprintf("%s: %v", StrategyResource, err)
	}
	edits := clone(p.edits)
	edits[file] = content
	if ok, why := p.verifyWith(edits, p.values, index, f.FieldPath(), f.Live); !ok {
		return nil, fmt.Sprintf("%s did not verify: %s", StrategyResource, why)
	}
	p.edits = edits
	if err := p.rerender(); err != nil {
		return nil, err.Error()
	}
	return &Codified{Object: refString(ch), Path: f.Path, Value: f.Live, Was: f.Desired, Manager: f.Manager, Time: f.Time, By: f.By, File: file, Strategy: StrategyResource}, ""
}

func copyValues(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// scalarText is a live scalar as a variable's value: Flux substitutes text
// into the YAML, which reads it back as the type it was.
func scalarText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int64:
		return strconv.FormatInt(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}

// defineVariable finds where Git sets a variable (the Kustomization's inline
// substitute, else the last substituteFrom ConfigMap that has it) and
// returns that file with the new value, or "" and why not.
func (p *planner) defineVariable(name, value string) (file string, content []byte, why string) {
	vars := p.in.Variables
	type source struct {
		apiVersion, kind, id string
		at                   []string
		// prefer chooses among documents of one name: the one that
		// sets the value in force.
		prefer func(*yaml.RNode) bool
	}
	var sources []source
	if vars.Inline[name] {
		sources = append(sources, source{"kustomize.toolkit.fluxcd.io/v1", "Kustomization", vars.Kustomization, []string{"spec", "postBuild", "substitute", name}, nil})
	} else {
		inForce := func(d *yaml.RNode) bool {
			n, err := d.Pipe(yaml.Lookup("data", name))
			return err == nil && n != nil && n.YNode().Value == p.values[name]
		}
		for i := len(vars.ConfigMaps) - 1; i >= 0; i-- {
			sources = append(sources, source{"v1", "ConfigMap", vars.ConfigMaps[i], []string{"data", name}, inForce})
		}
	}
	for _, s := range sources {
		all := p.allInGit(s.apiVersion, s.kind, s.id)
		if s.kind == "ConfigMap" {
			// Only the ConfigMaps that hold it: another of the list may set it.
			all = slices.DeleteFunc(all, func(f inGit) bool { n, _ := f.doc.Pipe(yaml.Lookup(s.at...)); return n == nil })
		}
		found, err := choose(all, s.prefer, s.kind+" "+s.id)
		if err != nil {
			return "", nil, err.Error()
		}
		if found == nil {
			continue
		}
		file, doc, docs, src := found.file, found.doc, found.docs, found.src
		n, _ := doc.Pipe(yaml.Lookup(s.at...))
		// The value in Git must be the one in force: else another source
		// overrides it, or Git's is substituted itself, and writing it here
		// would change nothing, or write over a reference.
		switch {
		case n == nil || n.YNode().Kind != yaml.ScalarNode:
			return "", nil, fmt.Sprintf("the variable %s is not a plain value in %s", name, file)
		case strings.Contains(n.YNode().Value, "$"):
			return "", nil, fmt.Sprintf("the variable %s is set in %s from another variable (%s)", name, file, n.YNode().Value)
		case n.YNode().Value != p.values[name]:
			return "", nil, fmt.Sprintf("the variable %s in %s is not the value in force: another source sets it", name, file)
		}
		fp := fieldpath.Path{}
		for _, k := range s.at {
			fp = append(fp, fieldpath.PathElement{FieldName: &[]string{k}[0]})
		}
		out, err := yamledit.EditAt(src, docs, doc, fp, value)
		if err != nil {
			return "", nil, err.Error()
		}
		return file, out, ""
	}
	if vars.Inline[name] {
		return "", nil, "the variable " + name + " is set by Kustomization " + vars.Kustomization + ", whose manifest is not in this repository" + p.unknownParent()
	}
	return "", nil, "the variable " + name + " is set in no ConfigMap of this repository that the Kustomization reads" + p.unknownParent()
}
