package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/reconcile/hide"
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
	// Fails says helm-controller fails the release too (a valuesFrom
	// object that does not exist): a sync-fails danger on its HelmRelease.
	Fails string
	// Values are the HelmRelease's own values, as Git writes them (a
	// Secret's variable as its stand-in).
	Values map[string]any
	// Uncompared counts the release's objects that exist, or are named,
	// by a Secret's value: not compared.
	Uncompared int
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

// releasesBuilt is what rendering a target's Helm releases adds to it.
type releasesBuilt struct {
	objects  []*unstructured.Unstructured
	releases []Release
	traced   []*traceable
	problems []string
	// secretObjects are the objects a chart renders from a Secret's value
	// (valuesFrom, or a postBuild variable from a Secret in the
	// HelmRelease): none of their values is shown, and gitOnly are their
	// fields that take a Secret's value, compared Git against Git.
	// hidden are the Secrets' values, redacted from what the cluster shows.
	secretObjects map[string]hide.AsWritten
	gitOnly       map[string][]fieldpath.Path
	hidden        []string
}

// helmReleases renders the charts of the Flux HelmReleases among objs, as
// helm-controller installs them, and returns objs with their objects
// added. A release that cannot be rendered (its chart is not in the
// target's own repository, or the cluster's capabilities are unknown)
// says why; one whose chart fails to render is a problem of the target.
// A HelmRelease whose source uses a Secret's postBuild variable (secrets)
// has its chart given the variable's stand-ins, never its value;
// secretObjects are the target's objects built with one, whose values a
// chart is not given either (a ConfigMap read through valuesFrom).
func helmReleases(ctx context.Context, r *render.Renderer, tree *render.Tree, ks *unstructured.Unstructured, objs []*unstructured.Unstructured, vars Vars, secrets *secretUse, secretObjects map[string]hide.AsWritten) releasesBuilt {
	out := releasesBuilt{objects: objs}
	for _, hr := range objs {
		if !isHelmRelease(hr) {
			continue
		}
		given, probe := hr, (*unstructured.Unstructured)(nil)
		if secrets.uses(hr) {
			given, probe = secrets.standIns[hr][0], secrets.standIns[hr][1]
		}
		rel := Release{Object: "HelmRelease/" + hr.GetNamespace() + "/" + secrets.name(hr)}
		rel.Values, _, _ = unstructured.NestedMap(given.Object, "spec", "values")
		caps := vars.Helm
		var chart render.Chart
		var vals *releaseValues
		switch {
		case caps == nil && vars.HelmNote != "":
			rel.NotRendered = vars.HelmNote
		case caps == nil:
			rel.NotRendered = "the cluster's Kubernetes version is not known"
		default:
			in := chartInput{tree: tree, ks: ks, hr: given, probe: probe, objs: objs, access: vars.Charts, secrets: secrets, secretObjects: secretObjects, hidden: vars.Hidden}
			chart, vals, rel.NotRendered = releaseChart(ctx, in)
		}
		if rel.NotRendered != "" {
			if strings.HasPrefix(rel.NotRendered, failsPrefix) {
				rel.Fails = rel.NotRendered
			}
			out.releases = append(out.releases, rel)
			continue
		}
		out.hidden = append(out.hidden, vals.hidden...)
		chart.Release.KubeVersion, chart.Release.APIVersions = caps.KubeVersion, caps.APIVersions
		placed, err := renderRelease(ctx, r, chart, hr, &rel)
		secret := vals.probe != nil || vals.allSecret
		switch {
		case err != nil && secret:
			// Rendered with stand-ins: the message holds none of a
			// Secret's values, and the chart may refuse a stand-in.
			rel.NotRendered = "with stand-ins for the Secret's values it reads (a chart is never given a Secret's value), its chart does not render: " + hide.In(err.Error(), vals.hidden)
			out.releases = append(out.releases, rel)
			continue
		case err != nil:
			out.problems = append(out.problems, hide.In(err.Error(), vals.hidden))
			continue
		}
		if secret {
			used := secretUsing(ctx, r, chart, hr, placed, vals)
			if out.secretObjects == nil {
				out.secretObjects, out.gitOnly = map[string]hide.AsWritten{}, map[string][]fieldpath.Path{}
			}
			for k, v := range used.hidden {
				out.secretObjects[k] = v
			}
			for k, v := range used.gitOnly {
				out.gitOnly[k] = v
			}
			placed = used.compared
			if used.uncompared > 0 {
				rel.Uncompared = used.uncompared
			}
		}
		out.objects = append(out.objects, placed...)
		out.releases = append(out.releases, rel)
		if vals.fromRefs || probe != nil {
			// Values merged from the cluster are not the HelmRelease's to
			// edit, and values substituted from a Secret are stand-ins:
			// its drift is shown, not traced.
			continue
		}
		t := &traceable{release: hr, chart: chart, objects: map[string]*unstructured.Unstructured{}}
		t.values, _, _ = unstructured.NestedMap(hr.Object, "spec", "values")
		for _, o := range placed {
			t.objects[object.RefOf(o).String()] = o
		}
		out.traced = append(out.traced, t)
	}
	return out
}

// renderRelease renders chart as helm-controller installs it for hr: its
// objects placed in the release's namespace and labelled as hr's, rel's
// chart and hooks noted.
func renderRelease(ctx context.Context, r *render.Renderer, chart render.Chart, hr *unstructured.Unstructured, rel *Release) ([]*unstructured.Unstructured, error) {
	rendered, err := r.RenderChart(ctx, chart)
	if err != nil {
		return nil, err
	}
	if rendered.Problem != nil {
		return nil, fmt.Errorf("%s: %w", rel.Object, rendered.Problem)
	}
	rel.Chart = chart.Name
	rel.Hooks = nil
	for _, h := range rendered.Hooks {
		rel.Hooks = append(rel.Hooks, fmt.Sprintf("%s/%s (%s)", h.Kind, h.Name, strings.Join(h.Events, ", ")))
	}
	placed, err := object.Place(ctx, nil, rendered.Objects, chart.Release.Namespace)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel.Object, err)
	}
	// The chart's crds/ are left out: helm-controller creates them
	// when missing and never deletes one a chart drops, so a render
	// without them would read as their deletion.
	return placed, nil
}

// secretsUsed is what secretUsing found.
type secretsUsed struct {
	// hidden are the objects that use a Secret's value, by hide.KeyIn,
	// and gitOnly their fields that take it.
	hidden  map[string]hide.AsWritten
	gitOnly map[string][]fieldpath.Path
	// compared are the objects to compare: those rendered with both
	// stand-ins; uncompared counts those whose very being (or name) a
	// Secret's value decides, left out.
	compared   []*unstructured.Unstructured
	uncompared int
}

// secretUsing sorts the objects of a release that read a Secret's value:
// those the chart renders differently with the second stand-ins use it
// (their fields that differ take it in the cluster), and those rendered
// with one stand-in only exist, or are named, by the value: neither
// render says what the cluster has of them, so they are not compared.
// All of them use it when the second cannot be rendered.
func secretUsing(ctx context.Context, r *render.Renderer, chart render.Chart, hr *unstructured.Unstructured, placed []*unstructured.Unstructured, vals *releaseValues) secretsUsed {
	out := secretsUsed{hidden: map[string]hide.AsWritten{}, gitOnly: map[string][]fieldpath.Path{}}
	var probed []*unstructured.Unstructured
	all := vals.allSecret
	if !all {
		probe := chart
		b, err := json.Marshal(vals.probe)
		probe.Values = b
		var rel Release
		if err == nil {
			probed, err = renderRelease(ctx, r, probe, hr, &rel)
		}
		all = err != nil
	}
	same := map[string]*unstructured.Unstructured{}
	for _, o := range probed {
		same[object.RefOf(o).String()] = o
	}
	seen := map[string]bool{}
	for _, o := range placed {
		key := hide.KeyIn(o.GetKind(), o.GetNamespace(), o.GetName())
		p, ok := same[object.RefOf(o).String()]
		seen[object.RefOf(o).String()] = true
		switch {
		case !all && !ok:
			out.uncompared++
			continue
		case all:
			out.hidden[key] = hide.AsWritten{}
			out.gitOnly[key] = hide.WholeObject(o)
		case !object.SameJSON(o.Object, p.Object):
			out.hidden[key] = hide.AsWritten{}
			out.gitOnly[key] = hide.DifferingFields(o, p)
		}
		out.compared = append(out.compared, o)
	}
	for _, p := range probed {
		if !seen[object.RefOf(p).String()] {
			out.uncompared++
		}
	}
	return out
}

// chartInput is what a HelmRelease's chart is read with.
type chartInput struct {
	tree *render.Tree
	// ks is the Kustomization that applies the HelmRelease, or nil.
	ks *unstructured.Unstructured
	// hr is the HelmRelease as its chart is given it; probe is it with
	// the second stand-ins of its Secret variables, or nil.
	hr, probe *unstructured.Unstructured
	// objs are the target's objects.
	objs   []*unstructured.Unstructured
	access *ChartAccess
	// secrets are the objects whose source uses a Secret's variable, and
	// secretObjects their keys (hide.Key); hidden are the Secrets'
	// values.
	secrets       *secretUse
	secretObjects map[string]hide.AsWritten
	hidden        []string
}

// releaseChart is the chart a HelmRelease installs, read from the target's
// own repository or fetched from a trusted chart repository, with its
// values and release settings as helm-controller computes them; or why it
// is not rendered.
func releaseChart(ctx context.Context, in chartInput) (render.Chart, *releaseValues, string) {
	c, why := releaseChartOnly(ctx, in.tree, in.ks, in.hr, in.objs, in.access, in.secrets)
	if why != "" {
		return c, nil, why
	}
	vals, why := loadReleaseValues(ctx, in)
	if why != "" {
		return c, nil, why
	}
	vb, err := json.Marshal(vals.merged)
	if err != nil {
		return c, nil, "its values: " + err.Error()
	}
	c.Values = vb
	return c, vals, ""
}

// releaseChartOnly is releaseChart without its values.
func releaseChartOnly(ctx context.Context, tree *render.Tree, ks *unstructured.Unstructured, hr *unstructured.Unstructured, objs []*unstructured.Unstructured, access *ChartAccess, secrets *secretUse) (render.Chart, string) {
	spec, _, _ := unstructured.NestedMap(hr.Object, "spec")
	if s, _, _ := unstructured.NestedBool(spec, "suspend"); s {
		return render.Chart{}, "it is suspended: helm-controller does not upgrade it"
	}
	kind, _, _ := unstructured.NestedString(spec, "chart", "spec", "sourceRef", "kind")
	var files map[string][]byte
	var name string
	var readValues func(string) ([]byte, error)
	if _, ref := spec["chartRef"]; !ref && kind == "GitRepository" {
		var why string
		if files, why = gitChart(tree, ks, hr, spec, access != nil && access.AnyGitRepository); why != "" {
			return render.Chart{}, why
		}
		chartPath, _, _ := unstructured.NestedString(spec, "chart", "spec", "chart")
		if why := chartDependencies(ctx, access, tree, render.CleanPath(chartPath), files); why != "" {
			return render.Chart{}, why
		}
		name = chartName(files, render.CleanPath(chartPath))
		// A Git chart's valuesFiles are paths from the source's root.
		readValues = func(p string) ([]byte, error) { return tree.ReadFile(render.CleanPath(p)) }
	} else {
		c, why := fetchedChart(ctx, access, objs, hr, secrets)
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
	c := render.Chart{Name: name, Files: files, Release: helm.Options{
		ReleaseName: releaseName(hr), Namespace: releaseNamespace(hr),
		Labels: map[string]string{fluxHelmNameLabel: hr.GetName(), fluxHelmNamespaceLabel: hr.GetNamespace()}}}
	if why := postRendering(spec, &c.Release); why != "" {
		return render.Chart{}, why
	}
	if off, _, _ := unstructured.NestedBool(spec, "upgrade", "disableSchemaValidation"); off {
		c.Release.SkipSchemaValidation = true
	}
	return c, ""
}

// postRendering sets what helm-controller does to a chart's output: the
// HelmRelease's kustomize postRenderers (patches and images), its
// postRenderStrategy and its commonMetadata.
func postRendering(spec map[string]any, o *helm.Options) string {
	var s struct {
		PostRenderers []struct {
			Kustomize *helm.PostRenderer `json:"kustomize"`
		} `json:"postRenderers"`
		PostRenderStrategy string `json:"postRenderStrategy"`
		CommonMetadata     struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"commonMetadata"`
	}
	b, err := json.Marshal(spec)
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		return "its postRenderers or commonMetadata cannot be read: " + err.Error()
	}
	for _, p := range s.PostRenderers {
		if p.Kustomize == nil {
			continue
		}
		// Flux's patches are inline: a path or options would be dropped
		// by its API.
		for i := range p.Kustomize.Patches {
			p.Kustomize.Patches[i].Path, p.Kustomize.Patches[i].Options = "", nil
		}
		o.PostRenderers = append(o.PostRenderers, *p.Kustomize)
	}
	o.PostRenderStrategy = s.PostRenderStrategy
	o.CommonLabels, o.CommonAnnotations = s.CommonMetadata.Labels, s.CommonMetadata.Annotations
	return ""
}

// gitChart reads a chart from the target's own GitRepository.
func gitChart(tree *render.Tree, ks, hr *unstructured.Unstructured, spec map[string]any, anyGit bool) (map[string][]byte, string) {
	chartPath, _, _ := unstructured.NestedString(spec, "chart", "spec", "chart")
	name, _, _ := unstructured.NestedString(spec, "chart", "spec", "sourceRef", "name")
	ns, _, _ := unstructured.NestedString(spec, "chart", "spec", "sourceRef", "namespace")
	if ns == "" {
		ns = hr.GetNamespace()
	}
	if (ks == nil && !anyGit) || (ks != nil && !sameSource(ks, name, ns)) {
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

// ReleaseFailures are the HelmReleases of releases that helm-controller
// fails, with why (syncfail.Object).
func ReleaseFailures(releases []Release) map[string]string {
	out := map[string]string{}
	for _, r := range releases {
		if r.Fails != "" {
			out[r.Object] = r.Fails
		}
	}
	return out
}

// HelmCapabilities are the capabilities t's charts are rendered for, read
// from its cluster, or why there are none: a fork's pull request reads
// nothing of the cluster until a writer approves (live false).
func HelmCapabilities(ctx context.Context, t Target, live bool, of CapabilitiesOf) (*Capabilities, string) {
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
// to and the values it changes ("podinfo 6.5.4 → 6.6.0; values:
// replicaCount 2 → 3"), the hooks the reconciler runs (not compared),
// and why a release's chart is not rendered.
func ReleaseNotes(base, head []Release) []string {
	was := map[string]Release{}
	for _, r := range base {
		was[r.Object] = r
	}
	var notes []string
	for _, r := range head {
		old, existed := was[r.Object]
		var change []string
		if old.Chart != "" && r.Chart != "" && old.Chart != r.Chart {
			change = append(change, fmt.Sprintf("chart %s → %s", old.Chart, r.Chart))
		}
		if existed {
			if v := helm.ValueChanges(old.Values, r.Values); v != "" {
				change = append(change, "values: "+v)
			}
		}
		if len(change) > 0 {
			notes = append(notes, r.Object+": "+strings.Join(change, "; ")+".")
		}
		if r.NotRendered != "" {
			notes = append(notes, r.Object+" is compared as an object; its chart is not rendered: "+r.NotRendered+".")
			continue
		}
		if len(r.Hooks) > 0 {
			notes = append(notes, r.Object+" runs hooks, not compared: "+strings.Join(r.Hooks, ", ")+".")
		}
		if r.Uncompared > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d of its objects are not compared: whether they exist, or what they are named, depends on a value from a Secret, which a chart is never given.", r.Object, r.Uncompared))
		}
	}
	return notes
}
