// Package helm renders a Helm chart as `helm template` does, with the Helm
// SDK (helm.sh/helm/v4, the major version helm-controller and Argo CD's
// repo-server use): client-only, no cluster, `lookup` finding nothing. It
// reads nothing but the files it is given and writes nothing; the render
// package runs it in its sandboxed child.
package helm

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	ci "helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	"sigs.k8s.io/yaml"
)

// Options are a release's settings, as the reconciler computes them.
type Options struct {
	ReleaseName string
	Namespace   string
	// KubeVersion is the target cluster's ("1.31.4"); "" is refused: Helm's
	// default depends on how the program was built.
	KubeVersion string
	// APIVersions are the target cluster's group/versions (and
	// group/version/Kind), as .Capabilities.APIVersions answers.
	APIVersions []string
	// SkipSchemaValidation does not check values against values.schema.json.
	SkipSchemaValidation bool
	// PostRenderers change what the chart renders, in order (a Flux
	// HelmRelease's postRenderers); PostRenderStrategy says whether hooks
	// go through them ("combined", the default, "separate" or "nohooks").
	PostRenderers      []PostRenderer
	PostRenderStrategy string
	// CommonLabels and CommonAnnotations are set on every object after the
	// post-renderers, then Labels, which win (helm-controller's
	// commonMetadata, then its own labels).
	CommonLabels, CommonAnnotations, Labels map[string]string
}

// Hook is a chart's hook: run by the reconciler at its events, never
// compared as an object.
type Hook struct {
	Kind, Name string
	Events     []string
	Path       string
	// Manifest is the hook's object, as `helm template` prints it; it
	// never leaves the render child.
	Manifest string `json:"-"`
}

// Rendered is a chart rendered for one release.
type Rendered struct {
	// Manifest is the objects the release applies, in Helm's install
	// order, as one YAML stream, without hooks or the chart's crds/.
	Manifest string
	// CRDs is the chart's crds/ files (subcharts' included), untemplated,
	// as one YAML stream.
	CRDs  string
	Hooks []Hook
}

// Template renders the chart whose files (paths relative to the chart's
// root: Chart.yaml, values.yaml, templates/…, charts/…) are given, with the
// user's values over the chart's defaults.
func Template(ctx context.Context, files map[string][]byte, values map[string]any, o Options) (*Rendered, error) {
	if o.KubeVersion == "" {
		return nil, fmt.Errorf("no Kubernetes version to render for")
	}
	kv, err := common.ParseKubeVersion(o.KubeVersion)
	if err != nil {
		return nil, fmt.Errorf("Kubernetes version %q: %w", o.KubeVersion, err)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	buffered := make([]*archive.BufferedFile, 0, len(files))
	for _, n := range names {
		buffered = append(buffered, &archive.BufferedFile{Name: n, Data: files[n]})
	}
	// A fresh chart and configuration each time: resolving dependencies
	// changes the chart, and a client-only install its configuration.
	chrt, err := loader.LoadFiles(buffered)
	if err != nil {
		return nil, fmt.Errorf("load chart: %w", err)
	}
	if deps := chrt.Metadata.Dependencies; len(deps) > 0 {
		reqs := make([]ci.Dependency, len(deps))
		for i, d := range deps {
			reqs[i] = d
		}
		if err := action.CheckDependencies(chrt, reqs); err != nil {
			return nil, fmt.Errorf("chart dependencies: %w", err)
		}
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.ReleaseName, install.Namespace = o.ReleaseName, o.Namespace
	install.KubeVersion = kv
	install.APIVersions = common.VersionSet(o.APIVersions)
	install.SkipSchemaValidation = o.SkipSchemaValidation
	if len(o.PostRenderers)+len(o.CommonLabels)+len(o.CommonAnnotations)+len(o.Labels) > 0 {
		install.PostRenderer = postRenderers{kustomize: o.PostRenderers, common: o.CommonLabels, annotations: o.CommonAnnotations, origin: o.Labels}
		install.PostRenderStrategy = strategy(o.PostRenderStrategy)
	}
	if values == nil {
		values = map[string]any{}
	}
	out, err := install.RunWithContext(ctx, chrt, values)
	if err != nil {
		return nil, err
	}
	rel, ok := out.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("helm returned a %T, not a release", out)
	}
	r := &Rendered{Manifest: rel.Manifest}
	var crds strings.Builder
	for _, c := range chrt.CRDObjects() {
		fmt.Fprintf(&crds, "---\n# Source: %s\n%s\n", c.Filename, c.File.Data)
	}
	r.CRDs = crds.String()
	for _, h := range rel.Hooks {
		hook := Hook{Kind: h.Kind, Name: h.Name, Path: h.Path, Manifest: h.Manifest}
		for _, e := range h.Events {
			hook.Events = append(hook.Events, string(e))
		}
		r.Hooks = append(r.Hooks, hook)
	}
	return r, nil
}

// Render is Template for a render child: values as YAML or JSON, file
// paths cleaned, and a crash of Helm an error.
func Render(files map[string][]byte, values []byte, o Options) (out *Rendered, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("Helm crashed on this chart (%v)", r)
		}
	}()
	vals := map[string]any{}
	if len(values) > 0 {
		if err := yaml.Unmarshal(values, &vals); err != nil {
			return nil, fmt.Errorf("values: %w", err)
		}
	}
	clean := make(map[string][]byte, len(files))
	for n, b := range files {
		clean[path.Clean(n)] = b
	}
	return Template(context.Background(), clean, vals, o)
}

// MergeValues merges b over a as Helm merges values files: maps deeply,
// everything else replaced.
func MergeValues(a, b map[string]any) map[string]any { return loader.MergeMaps(a, b) }
