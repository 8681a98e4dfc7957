package reconcile

import (
	"context"
	"fmt"
	"path"
	"strings"

	"helm.sh/helm/v4/pkg/strvals"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/reconcile/prepare"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/render/helm"
)

// isArgoCDChart says t is an Argo CD Application whose path in tree is a
// Helm chart (a Chart.yaml and no kustomization).
func isArgoCDChart(t Target, tree *render.Tree) bool {
	f := t.Found
	return f != nil && f.Reconciler == discover.ReconcilerArgoCD && tree.HasDir(t.Path) &&
		prepare.ArgoCDSourceType(tree, t.Path) == "Helm"
}

// NotWritable says why t's drift cannot be written back to tree, or "":
// an Argo CD Application's chart renders it, and its values are not
// traced yet.
func NotWritable(t Target, tree *render.Tree) string {
	if isArgoCDChart(t, tree) {
		return "Argo CD renders it from a Helm chart, whose values drift is not traced to yet"
	}
	return ""
}

// argoCDChart renders an Application's chart as Argo CD's repo-server
// does with helm template: its release name (the Application's by
// default), the destination's namespace and the cluster's version and
// APIs, its valueFiles, then values or valuesObject, then parameters;
// crds/ included unless skipCrds; hooks listed, not compared. Without the
// cluster's capabilities it is not compared at all: rendered without
// them, every object would read as a deletion.
func argoCDChart(ctx context.Context, r *render.Renderer, tree *render.Tree, t Target, vars Vars) Built {
	f := t.Found
	h := f.Helm
	if h == nil {
		h = &discover.ArgoHelm{}
	}
	name := "Application " + f.Namespace + "/" + f.Name
	if vars.Helm == nil {
		why := vars.HelmNote
		if why == "" {
			why = "the cluster's Kubernetes version is not known"
		}
		return Built{Problems: []string{name + "'s chart is not rendered: " + why}}
	}
	files := map[string][]byte{}
	for _, p := range tree.Files() {
		if rel, ok := strings.CutPrefix(p, t.Path+"/"); ok || t.Path == "." {
			if t.Path == "." {
				rel = p
			}
			b, err := tree.ReadFile(p)
			if err != nil {
				return Built{Problems: []string{err.Error()}}
			}
			files[rel] = b
		}
	}
	if why := chartDependencies(ctx, vars.Charts, tree, t.Path, files); why != "" {
		return Built{Problems: []string{name + ": " + why}}
	}
	values, why := argoValues(func(p string) ([]byte, error) { return tree.ReadFile(render.CleanPath(path.Join(t.Path, p))) }, h)
	if why != "" {
		return Built{Problems: []string{name + ": " + why}}
	}
	vb, err := yaml.Marshal(values)
	if err != nil {
		return Built{Problems: []string{err.Error()}}
	}
	opts := helm.Options{ReleaseName: h.ReleaseName, Namespace: h.Namespace, KubeVersion: h.KubeVersion, APIVersions: h.APIVersions,
		SkipSchemaValidation: h.SkipSchemaValidation}
	if opts.ReleaseName == "" {
		opts.ReleaseName = f.Name
	}
	if opts.Namespace == "" {
		opts.Namespace = f.DestinationNamespace
	}
	if opts.KubeVersion == "" {
		opts.KubeVersion = vars.Helm.KubeVersion
	}
	if len(opts.APIVersions) == 0 {
		opts.APIVersions = vars.Helm.APIVersions
	}
	rendered, err := r.RenderChart(ctx, render.Chart{Name: chartName(files, t.Path), Files: files, Values: vb, Release: opts})
	if err != nil {
		return Built{Problems: []string{err.Error()}}
	}
	if rendered.Problem != nil {
		return Built{Problems: []string{rendered.Problem.Error()}}
	}
	var b Built
	objs := rendered.Objects
	if !h.SkipCrds {
		objs = append(rendered.CRDs, objs...)
	}
	for _, hk := range rendered.Hooks {
		b.Hooks = append(b.Hooks, fmt.Sprintf("%s %s", hk.Kind, hk.Name))
	}
	if objs, err = object.Place(ctx, nil, objs, opts.Namespace); err != nil {
		return Built{Problems: []string{err.Error()}}
	}
	b.Objects = objs
	return b
}

// argoValues merges an Application's values as Argo CD's repo-server
// passes them to helm template: valueFiles in order (read from the
// chart's directory; missing ones an error unless ignoreMissingValueFiles), then
// values, or valuesObject in its place, then parameters as --set or
// --set-string.
func argoValues(read func(string) ([]byte, error), h *discover.ArgoHelm) (map[string]any, string) {
	merged := map[string]any{}
	for _, vf := range h.ValueFiles {
		if strings.HasPrefix(vf, "$") || strings.Contains(vf, "://") {
			return nil, fmt.Sprintf("its value file %q is in another source or at an address, which is not read", vf)
		}
		b, err := read(vf)
		if err != nil {
			if h.IgnoreMissingValueFiles {
				continue
			}
			return nil, fmt.Sprintf("its value file %q is not in the repository", vf)
		}
		v := map[string]any{}
		if err := yaml.Unmarshal(b, &v); err != nil {
			return nil, fmt.Sprintf("its value file %q: %v", vf, err)
		}
		merged = helm.MergeValues(merged, v)
	}
	inline := h.ValuesObject
	if inline == nil && h.Values != "" {
		inline = map[string]any{}
		if err := yaml.Unmarshal([]byte(h.Values), &inline); err != nil {
			return nil, "its helm.values: " + err.Error()
		}
	}
	merged = helm.MergeValues(merged, inline)
	names := make([]string, len(h.Parameters))
	for i, p := range h.Parameters {
		names[i] = p.Name
	}
	if err := helm.BoundedSetNames(names); err != nil {
		return nil, "its parameters: " + err.Error()
	}
	// helm sets --set values, then --set-string ones; Argo CD escapes the
	// commas of a value that is not a {list}.
	for _, forced := range []bool{false, true} {
		set := strvals.ParseInto
		if forced {
			set = strvals.ParseIntoString
		}
		for _, p := range h.Parameters {
			if p.ForceString != forced {
				continue
			}
			if err := set(p.Name+"="+argoEscape(p.Value), merged); err != nil {
				return nil, fmt.Sprintf("its parameter %s: %v", p.Name, err)
			}
		}
	}
	if len(h.FileParameters) > 0 {
		return nil, "its fileParameters are not read yet"
	}
	return merged, ""
}

// argoEscape escapes a parameter's commas as Argo CD's repo-server does
// (cleanSetParameters): all but those already escaped, unless the value
// is a {list}.
func argoEscape(v string) string {
	if strings.HasPrefix(v, "{") && strings.HasSuffix(v, "}") {
		return v
	}
	var b strings.Builder
	var prev rune
	for _, r := range v {
		if r == ',' && prev != '\\' {
			b.WriteString(`\,`)
		} else {
			b.WriteRune(r)
		}
		prev = r
	}
	return b.String()
}
