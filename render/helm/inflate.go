package helm

import (
	"context"
	"fmt"
	"os"
	"path"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/kustomize/kyaml/yaml/merge2"
	"sigs.k8s.io/yaml"
)

// InflateOptions are what kustomize's Helm inflator is given besides the
// kustomization (`kustomize build --enable-helm --helm-kube-version …
// --helm-api-versions …`, as Argo CD passes them): "" renders for Helm's
// default version. A chart entry's own kubeVersion and apiVersions win,
// as they do in kustomize.
type InflateOptions struct {
	KubeVersion string
	APIVersions []string
}

// helmGenerated is the annotation kustomize puts on what its Helm inflator
// generates: its namespace transformer leaves such objects as Helm placed
// them, and the annotation is gone from the build's output.
const helmGenerated = "internal.config.kubernetes.io/helm-generated"

// kustomizationFiles are the names kustomize reads a kustomization from.
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// Inflate renders, in fs, the helmCharts of the kustomization at dir and of
// every kustomization it reaches (resources, components), as `kustomize
// build --enable-helm` does with `helm template`: each chart in the
// kustomization's chartHome (default charts/: `<name>`, or
// `<name>-<version>/<name>` for a chart with a repo and a version; one that
// is not there is an error, as nothing is fetched here), its valuesFile
// (default the chart's values.yaml) merged with valuesInline as valuesMerge
// says, then additionalValuesFiles; its namespace, or the kustomization's,
// or the one a kustomization above sets; includeCRDs, skipHooks and
// skipTests. Each chart's objects become a resource file of its
// kustomization, annotated as kustomize's own output is, and its helmCharts
// are removed. A chart without releaseName is released as its name (helm's
// --generate-name would name it anew on every build).
func Inflate(ctx context.Context, fs filesys.FileSystem, dir string, o InflateOptions) error {
	in := inflation{fs: fs, o: o, done: map[string]string{}}
	return in.visit(ctx, dir, "")
}

// InflateError is a kustomization whose helmCharts do not inflate: its
// repository path and why.
type InflateError struct{ File, Message string }

func (e *InflateError) Error() string { return e.File + ": " + e.Message }

type inflation struct {
	fs filesys.FileSystem
	o  InflateOptions
	// done are the kustomizations inflated, with the namespace they
	// inherited: one reached again with another cannot be both.
	done map[string]string
}

// visit inflates the kustomization at dir, which a kustomization above
// gives namespace (kustomize's helm root namespace).
func (in *inflation) visit(ctx context.Context, dir, namespace string) error {
	file := ""
	for _, n := range kustomizationFiles {
		if in.fs.Exists(path.Join(dir, n)) {
			file = path.Join(dir, n)
			break
		}
	}
	if file == "" {
		return nil // not a kustomization: kustomize says what is wrong
	}
	if ns, ok := in.done[dir]; ok {
		if ns != namespace {
			return &InflateError{strings.TrimPrefix(file, "/"), fmt.Sprintf("its helmCharts are inflated for namespace %q and %q by the kustomizations that use it", ns, namespace)}
		}
		return nil
	}
	in.done[dir] = namespace
	b, err := in.fs.ReadFile(file)
	if err != nil {
		return err
	}
	var k types.Kustomization
	if err := yaml.Unmarshal(b, &k); err != nil {
		return &InflateError{strings.TrimPrefix(file, "/"), err.Error()}
	}
	k.FixKustomization() // helmChartInflationGenerator becomes helmCharts
	if k.Namespace != "" {
		namespace = k.Namespace
	}
	for _, r := range append(append([]string{}, k.Resources...), k.Components...) {
		if p := path.Join(dir, r); in.fs.IsDir(p) {
			if err := in.visit(ctx, p, namespace); err != nil {
				return err
			}
		}
	}
	if len(k.HelmCharts) == 0 {
		return nil
	}
	var generated []string
	for i, c := range k.HelmCharts {
		out, err := in.chart(ctx, dir, k.HelmGlobals, c, namespace)
		if err != nil {
			return &InflateError{strings.TrimPrefix(file, "/"), fmt.Sprintf("helmCharts[%d] (%s): %v", i, c.Name, err)}
		}
		name := fmt.Sprintf(".helmchart-%d-%s.yaml", i, c.Name)
		if err := in.fs.WriteFile(path.Join(dir, name), out); err != nil {
			return err
		}
		generated = append(generated, name)
	}
	return in.rewrite(file, b, generated)
}

// chart renders one helmCharts entry of the kustomization at dir as a YAML
// stream of kustomize's generated objects.
func (in *inflation) chart(ctx context.Context, dir string, g *types.HelmGlobals, c types.HelmChart, namespace string) ([]byte, error) {
	if c.NameTemplate != "" {
		return nil, fmt.Errorf("nameTemplate is not rendered")
	}
	home := "charts"
	if g != nil && g.ChartHome != "" {
		home = g.ChartHome
	}
	if path.IsAbs(home) {
		return nil, fmt.Errorf("chartHome %s is outside the repository", home)
	}
	home = path.Join(dir, home)
	if c.Version != "" && c.Repo != "" {
		home = path.Join(home, c.Name+"-"+c.Version)
	}
	chartDir := path.Join(home, c.Name)
	files, err := in.files(chartDir)
	if err != nil || len(files) == 0 {
		where := "the repository"
		if c.Repo != "" {
			where = c.Repo
		}
		return nil, fmt.Errorf("the chart is not in %s (kustomize runs helm pull from %s into it; here it is fetched only from a trusted repository)", strings.TrimPrefix(chartDir, "/"), where)
	}
	values, err := in.values(dir, chartDir, c)
	if err != nil {
		return nil, err
	}
	opts := Options{ReleaseName: c.ReleaseName, Namespace: c.Namespace, KubeVersion: in.o.KubeVersion, APIVersions: in.o.APIVersions}
	if opts.ReleaseName == "" {
		opts.ReleaseName = c.Name
	}
	if opts.Namespace == "" {
		opts.Namespace = namespace
	}
	if c.KubeVersion != "" {
		opts.KubeVersion = c.KubeVersion
	}
	if len(c.ApiVersions) > 0 {
		opts.APIVersions = c.ApiVersions
	}
	if opts.KubeVersion == "" {
		opts.KubeVersion = strings.TrimPrefix(common.DefaultCapabilities.KubeVersion.Version, "v")
	}
	r, err := Template(ctx, files, values, opts)
	if err != nil {
		return nil, err
	}
	stream := r.Manifest
	if c.IncludeCRDs {
		stream = r.CRDs + "\n---\n" + stream
	}
	for _, h := range r.Hooks {
		test := false
		for _, e := range h.Events {
			test = test || e == "test"
		}
		if !c.SkipHooks && !(c.SkipTests && test) {
			stream += "\n---\n" + h.Manifest
		}
	}
	return annotate(stream)
}

// files reads a chart's directory.
func (in *inflation) files(dir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := in.fs.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := in.fs.ReadFile(p)
		if err != nil {
			return err
		}
		out[strings.TrimPrefix(p, dir+"/")] = b
		return nil
	})
	return out, err
}

// values are the values kustomize gives helm for an entry, as its Helm
// inflator writes them: its valuesFile (the chart's values.yaml by
// default) alone, or merged with valuesInline (kyaml's merge2, inline
// winning for valuesMerge override, the file for merge), or valuesInline
// alone (replace); then each additionalValuesFiles over them, as helm
// merges -f files.
func (in *inflation) values(dir, chartDir string, c types.HelmChart) (map[string]any, error) {
	read := func(p string) ([]byte, error) {
		b, err := in.fs.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("values file %s: %w", p, err)
		}
		return b, nil
	}
	file := path.Join(chartDir, "values.yaml")
	if c.ValuesFile != "" {
		file = path.Join(dir, c.ValuesFile)
	}
	var merged []byte
	switch c.ValuesMerge {
	case "", "override", "merge", "replace":
	default:
		return nil, fmt.Errorf("valuesMerge %q is none of override, merge, replace", c.ValuesMerge)
	}
	if len(c.ValuesInline) == 0 || c.ValuesMerge != "replace" {
		b, err := read(file)
		if err != nil {
			return nil, err
		}
		merged = b
	}
	if len(c.ValuesInline) > 0 {
		inline, err := kyaml.FromMap(c.ValuesInline)
		if err != nil {
			return nil, err
		}
		out := inline
		if c.ValuesMerge != "replace" {
			chart, err := kyaml.Parse(string(merged))
			if err != nil {
				return nil, fmt.Errorf("values file %s: %w", file, err)
			}
			if c.ValuesMerge == "merge" {
				out, err = merge2.Merge(chart, inline.Copy(), kyaml.MergeOptions{})
			} else {
				out, err = merge2.Merge(inline, chart.Copy(), kyaml.MergeOptions{})
			}
			if err != nil {
				return nil, fmt.Errorf("merge valuesInline: %w", err)
			}
		}
		m, err := out.Map()
		if err != nil {
			return nil, err
		}
		if merged, err = yaml.Marshal(m); err != nil {
			return nil, err
		}
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(merged, &values); err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	for _, f := range c.AdditionalValuesFiles {
		b, err := read(path.Join(dir, f))
		if err != nil {
			return nil, err
		}
		more := map[string]any{}
		if err := yaml.Unmarshal(b, &more); err != nil {
			return nil, fmt.Errorf("values file %s: %w", f, err)
		}
		values = MergeValues(values, more)
	}
	return values, nil
}

// annotate marks every object of a stream as kustomize's Helm inflator
// does.
func annotate(stream string) ([]byte, error) {
	docs, err := kio(stream)
	if err != nil {
		return nil, err
	}
	var out strings.Builder
	for _, d := range docs {
		if err := d.PipeE(kyaml.SetAnnotation(helmGenerated, "true")); err != nil {
			return nil, err
		}
		s, err := d.String()
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n" + s)
	}
	return []byte(out.String()), nil
}

// kio splits a YAML stream into its objects, leaving out empty documents.
func kio(stream string) ([]*kyaml.RNode, error) {
	var out []*kyaml.RNode
	for _, doc := range strings.Split("\n"+stream, "\n---") {
		if strings.TrimSpace(strings.TrimPrefix(doc, "\n")) == "" {
			continue
		}
		n, err := kyaml.Parse(doc)
		if err != nil {
			return nil, err
		}
		if n.IsNilOrEmpty() || n.YNode().Kind != kyaml.MappingNode {
			continue
		}
		out = append(out, n)
	}
	return out, nil
}

// rewrite replaces a kustomization's helmCharts with the files of their
// objects, appended to its resources.
func (in *inflation) rewrite(file string, b []byte, generated []string) error {
	k, err := kyaml.Parse(string(b))
	if err != nil {
		return err
	}
	for _, f := range []string{"helmCharts", "helmGlobals", "helmChartInflationGenerator"} {
		if err := k.PipeE(kyaml.Clear(f)); err != nil {
			return err
		}
	}
	res, err := k.Pipe(kyaml.LookupCreate(kyaml.SequenceNode, "resources"))
	if err != nil {
		return err
	}
	for _, g := range generated {
		if err := res.PipeE(kyaml.Append(kyaml.NewScalarRNode(g).YNode())); err != nil {
			return err
		}
	}
	s, err := k.String()
	if err != nil {
		return err
	}
	return in.fs.WriteFile(file, []byte(s))
}
