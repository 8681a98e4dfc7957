package build

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/render/helm"
)

// Capabilities are what a chart's templates learn of the cluster it is
// rendered for (.Capabilities), as the reconciler reads them there.
type Capabilities struct {
	KubeVersion string
	// APIVersions are group/versions and group/version/Kinds.
	APIVersions []string
}

// Release is one Helm release a target's render holds, rendered.
type Release struct {
	// Object is the HelmRelease ("HelmRelease/flux-system/podinfo").
	Object string
	// Chart is the chart's name and version ("shop 1.2.0").
	Chart string
	// Hooks are the chart's hooks: run by the reconciler, not compared.
	Hooks []string
	// NotRendered says why the release's objects are not in the render;
	// its HelmRelease is still compared as an object.
	NotRendered string
}

// Helm-controller's labels on every object of a release.
const (
	fluxHelmNameLabel      = "helm.toolkit.fluxcd.io/name"
	fluxHelmNamespaceLabel = "helm.toolkit.fluxcd.io/namespace"
)

// isHelmRelease says o is a Flux HelmRelease.
func isHelmRelease(o *unstructured.Unstructured) bool {
	return o.GetKind() == "HelmRelease" && strings.HasPrefix(o.GetAPIVersion(), "helm.toolkit.fluxcd.io/")
}

// helmReleases renders the charts of the Flux HelmReleases among objs, as
// helm-controller installs them, and returns objs with their objects
// added. A release that cannot be rendered (its chart is not in the
// target's own repository, or the cluster's capabilities are unknown)
// says why; one whose chart fails to render is a problem of the target.
func helmReleases(ctx context.Context, r *render.Renderer, tree *render.Tree, ks *unstructured.Unstructured, objs []*unstructured.Unstructured, vars Vars, files map[string]string) (out []*unstructured.Unstructured, releases []Release, traced []*traceable, problems []string) {
	out = objs
	for _, hr := range objs {
		if !isHelmRelease(hr) {
			continue
		}
		rel := Release{Object: "HelmRelease/" + hr.GetNamespace() + "/" + hr.GetName()}
		caps := vars.Helm
		var chart render.Chart
		var why string
		switch {
		case caps == nil && vars.HelmNote != "":
			rel.NotRendered = vars.HelmNote
		case caps == nil:
			rel.NotRendered = "the cluster's Kubernetes version is not known"
		default:
			chart, why = releaseChart(ctx, tree, ks, hr, objs, vars.Charts)
			rel.NotRendered = why
		}
		if rel.NotRendered != "" {
			releases = append(releases, rel)
			continue
		}
		chart.Release.KubeVersion, chart.Release.APIVersions = caps.KubeVersion, caps.APIVersions
		rendered, err := r.RenderChart(ctx, chart)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if rendered.Problem != nil {
			problems = append(problems, rel.Object+": "+rendered.Problem.Error())
			continue
		}
		rel.Chart = chart.Name
		for _, h := range rendered.Hooks {
			rel.Hooks = append(rel.Hooks, fmt.Sprintf("%s/%s (%s)", h.Kind, h.Name, strings.Join(h.Events, ", ")))
		}
		placed, err := object.Place(ctx, nil, rendered.Objects, chart.Release.Namespace)
		if err != nil {
			problems = append(problems, rel.Object+": "+err.Error())
			continue
		}
		// The chart's crds/ are left out: helm-controller creates them
		// when missing and never deletes one a chart drops, so a render
		// without them would read as their deletion.
		for _, o := range placed {
			labels := o.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels[fluxHelmNameLabel], labels[fluxHelmNamespaceLabel] = hr.GetName(), hr.GetNamespace()
			o.SetLabels(labels)
		}
		out = append(out, placed...)
		releases = append(releases, rel)
		t := &traceable{release: hr, file: files["HelmRelease/"+hr.GetName()], chart: chart, objects: map[string]*unstructured.Unstructured{}}
		t.values, _, _ = unstructured.NestedMap(hr.Object, "spec", "values")
		for _, o := range placed {
			t.objects[object.RefOf(o).String()] = o
		}
		traced = append(traced, t)
	}
	return out, releases, traced, problems
}

// releaseChart is the chart a HelmRelease installs, read from the target's
// own repository or fetched from a trusted chart repository, with its
// values and release settings as helm-controller computes them; or why it
// is not rendered.
func releaseChart(ctx context.Context, tree *render.Tree, ks *unstructured.Unstructured, hr *unstructured.Unstructured, objs []*unstructured.Unstructured, access *ChartAccess) (render.Chart, string) {
	spec, _, _ := unstructured.NestedMap(hr.Object, "spec")
	if s, _, _ := unstructured.NestedBool(spec, "suspend"); s {
		return render.Chart{}, "it is suspended: helm-controller does not upgrade it"
	}
	if vf, _, _ := unstructured.NestedSlice(spec, "valuesFrom"); len(vf) > 0 {
		return render.Chart{}, "its values come from ConfigMaps or Secrets (valuesFrom), which are not read yet"
	}
	if pr, _, _ := unstructured.NestedSlice(spec, "postRenderers"); len(pr) > 0 {
		return render.Chart{}, "it has postRenderers, which are not applied yet"
	}
	kind, _, _ := unstructured.NestedString(spec, "chart", "spec", "sourceRef", "kind")
	var files map[string][]byte
	var name string
	var readValues func(string) ([]byte, error)
	if _, ref := spec["chartRef"]; !ref && kind == "GitRepository" {
		var why string
		if files, why = gitChart(tree, ks, hr, spec); why != "" {
			return render.Chart{}, why
		}
		chartPath, _, _ := unstructured.NestedString(spec, "chart", "spec", "chart")
		name = chartName(files, render.CleanPath(chartPath))
		// A Git chart's valuesFiles are paths from the source's root.
		readValues = func(p string) ([]byte, error) { return tree.ReadFile(render.CleanPath(p)) }
	} else {
		c, why := fetchedChart(ctx, access, objs, hr)
		if why != "" {
			return render.Chart{}, why
		}
		// The cached chart is shared: values files are merged into a copy.
		files = make(map[string][]byte, len(c.Files))
		for k, v := range c.Files {
			files[k] = v
		}
		name = strings.TrimSpace(c.Name + " " + c.Version)
		readValues = func(p string) ([]byte, error) {
			if b, ok := c.Files[render.CleanPath(p)]; ok {
				return b, nil
			}
			return nil, fmt.Errorf("%s is not in the chart", p)
		}
	}
	if why := mergeValuesFiles(readValues, spec, files); why != "" {
		return render.Chart{}, why
	}
	values, _, _ := unstructured.NestedMap(spec, "values")
	vb, err := json.Marshal(values)
	if err != nil {
		return render.Chart{}, "its values: " + err.Error()
	}
	c := render.Chart{Name: name, Files: files, Values: vb, Release: helm.Options{
		ReleaseName: releaseName(hr), Namespace: releaseNamespace(hr)}}
	if off, _, _ := unstructured.NestedBool(spec, "upgrade", "disableSchemaValidation"); off {
		c.Release.SkipSchemaValidation = true
	}
	return c, ""
}

// gitChart reads a chart from the target's own GitRepository.
func gitChart(tree *render.Tree, ks, hr *unstructured.Unstructured, spec map[string]any) (map[string][]byte, string) {
	chartPath, _, _ := unstructured.NestedString(spec, "chart", "spec", "chart")
	name, _, _ := unstructured.NestedString(spec, "chart", "spec", "sourceRef", "name")
	ns, _, _ := unstructured.NestedString(spec, "chart", "spec", "sourceRef", "namespace")
	if ns == "" {
		ns = hr.GetNamespace()
	}
	if ks == nil || !sameSource(ks, name, ns) {
		return nil, fmt.Sprintf("its chart comes from GitRepository %s/%s, not this target's repository", ns, name)
	}
	dir := render.CleanPath(chartPath)
	if dir == "" || dir == "." || !tree.HasDir(dir) {
		return nil, fmt.Sprintf("its chart %q is not a directory of the repository", chartPath)
	}
	files := map[string][]byte{}
	for _, f := range tree.Files() {
		if rel, ok := strings.CutPrefix(f, dir+"/"); ok {
			b, err := tree.ReadFile(f)
			if err != nil {
				return nil, fmt.Sprintf("its chart's %s cannot be read: %v", f, err)
			}
			files[rel] = b
		}
	}
	return files, ""
}

// sameSource says the Kustomization ks builds from GitRepository ns/name.
func sameSource(ks *unstructured.Unstructured, name, ns string) bool {
	kind, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "kind")
	n, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "name")
	s, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "namespace")
	if s == "" {
		s = ks.GetNamespace()
	}
	return kind == "GitRepository" && n == name && s == ns
}

// mergeValuesFiles applies a chart's valuesFiles as source-controller
// does: merged in order (read by read), they replace the chart's
// values.yaml (which counts only when listed).
func mergeValuesFiles(read func(string) ([]byte, error), spec map[string]any, files map[string][]byte) string {
	list, _, _ := unstructured.NestedStringSlice(spec, "chart", "spec", "valuesFiles")
	if len(list) == 0 || len(list) == 1 && path.Base(list[0]) == "values.yaml" {
		return ""
	}
	ignoreMissing, _, _ := unstructured.NestedBool(spec, "chart", "spec", "ignoreMissingValuesFiles")
	merged := map[string]any{}
	for _, f := range list {
		b, err := read(f)
		if err != nil {
			if ignoreMissing {
				continue
			}
			return fmt.Sprintf("its valuesFiles %q is not in the repository", f)
		}
		v := map[string]any{}
		if err := yaml.Unmarshal(b, &v); err != nil {
			return fmt.Sprintf("its valuesFiles %q: %v", f, err)
		}
		merged = helm.MergeValues(merged, v)
	}
	b, err := yaml.Marshal(merged)
	if err != nil {
		return err.Error()
	}
	files["values.yaml"] = b
	return ""
}

// chartName is "name version" from the chart's Chart.yaml, or its path.
func chartName(files map[string][]byte, dir string) string {
	var meta struct{ Name, Version string }
	if yaml.Unmarshal(files["Chart.yaml"], &meta) == nil && meta.Name != "" {
		return strings.TrimSpace(meta.Name + " " + meta.Version)
	}
	return dir
}

// releaseName is the Helm release's name as helm-controller computes it:
// spec.releaseName, else targetNamespace-name, else name; over 53
// characters, its first 40, a dash and 12 characters of its SHA-256.
func releaseName(hr *unstructured.Unstructured) string {
	name, _, _ := unstructured.NestedString(hr.Object, "spec", "releaseName")
	if name == "" {
		name = hr.GetName()
		if tn, _, _ := unstructured.NestedString(hr.Object, "spec", "targetNamespace"); tn != "" {
			name = tn + "-" + name
		}
	}
	if len(name) <= 53 {
		return name
	}
	return name[:40] + "-" + fmt.Sprintf("%x", sha256.Sum256([]byte(name)))[:12]
}

// releaseNamespace is where the release's objects go: spec.targetNamespace,
// else the HelmRelease's own.
func releaseNamespace(hr *unstructured.Unstructured) string {
	if tn, _, _ := unstructured.NestedString(hr.Object, "spec", "targetNamespace"); tn != "" {
		return tn
	}
	return hr.GetNamespace()
}

// CapabilitiesOf reads a cluster's capabilities.
type CapabilitiesOf func(ctx context.Context, cluster string) (*Capabilities, error)

// HelmCapabilities are the capabilities t's charts are rendered for, read
// from its cluster, or why there are none: a fork's pull request reads
// nothing of the cluster until a writer approves (live false).
func HelmCapabilities(ctx context.Context, t targets.Target, live bool, of CapabilitiesOf) (*Capabilities, string) {
	switch {
	case !live:
		return nil, "Helm charts are rendered for the cluster's version, which a fork's pull request does not read until someone with write access approves"
	case of == nil:
		return nil, ""
	}
	caps, err := of(ctx, t.Cluster)
	if err != nil {
		return nil, "the cluster's Kubernetes version could not be read: " + err.Error()
	}
	return caps, ""
}

// ReleaseNotes say, for the comment, what a pull request does to a
// target's Helm releases beyond their objects: the chart version it moves
// to, the hooks the reconciler runs (not compared), and why a release's
// chart is not rendered.
func ReleaseNotes(base, head []Release) []string {
	was := map[string]Release{}
	for _, r := range base {
		was[r.Object] = r
	}
	var notes []string
	for _, r := range head {
		switch {
		case r.NotRendered != "":
			notes = append(notes, r.Object+" is compared as an object; its chart is not rendered: "+r.NotRendered+".")
			continue
		case was[r.Object].Chart != "" && was[r.Object].Chart != r.Chart:
			notes = append(notes, fmt.Sprintf("%s: chart %s → %s.", r.Object, was[r.Object].Chart, r.Chart))
		}
		if len(r.Hooks) > 0 {
			notes = append(notes, r.Object+" runs hooks, not compared: "+strings.Join(r.Hooks, ", ")+".")
		}
	}
	return notes
}
