package prepare

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	kustypes "sigs.k8s.io/kustomize/api/types"

	"github.com/driftback/driftback/render"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// ArgoCDSourceType is the type Argo CD's repo-server gives a path it was not
// told the type of (spec.source without helm, kustomize, directory or plugin):
// "Kustomize" when the directory holds a kustomization file, else "Helm" when
// it holds a file whose name ends in Chart.yaml, else "Directory". Only files
// directly in the directory count, and a kustomization wins over a chart, as
// in Argo CD's discovery.
func ArgoCDSourceType(t *render.Tree, dir string) string {
	if render.KustomizationFile(t, dir) != "" {
		return "Kustomize"
	}
	for _, f := range filesIn(t, dir, false) {
		if strings.HasSuffix(path.Base(f), "Chart.yaml") {
			return "Helm"
		}
	}
	return "Directory"
}

// ArgoCDDirectory are an Argo CD Application's directory options
// (spec.source.directory).
type ArgoCDDirectory struct {
	// Recurse reads subdirectories too.
	Recurse bool
	// Include and Exclude are glob patterns on paths relative to the
	// directory (in which * also matches "/", and {a,b} either); empty
	// includes everything and excludes nothing.
	Include, Exclude string
}

// argoSkipMarker in a file keeps Argo CD from reading it.
const argoSkipMarker = "+argocd:skip-file-rendering"

// ArgoCDDirectoryTree returns the tree in which dir renders as Argo CD renders
// a Directory source: every .yaml, .yml and .json file in it (and below it,
// with Recurse) that the include and exclude patterns let through and that
// does not carry +argocd:skip-file-rendering, as one kustomization lists them.
// Render it as any overlay. Jsonnet files are evaluated by Argo CD, which
// driftback does not do: their presence is an error naming them.
func ArgoCDDirectoryTree(t *render.Tree, dir string, o ArgoCDDirectory) (*render.Tree, error) {
	if !t.HasDir(dir) {
		return nil, fmt.Errorf("%s: no such directory", dir)
	}
	include, err := argoGlob(o.Include)
	if err != nil {
		return nil, fmt.Errorf("%s: directory.include %q: %w", dir, o.Include, err)
	}
	exclude, err := argoGlob(o.Exclude)
	if err != nil {
		return nil, fmt.Errorf("%s: directory.exclude %q: %w", dir, o.Exclude, err)
	}
	var resources, jsonnet []string
	for _, f := range filesIn(t, dir, o.Recurse) {
		rel := strings.TrimPrefix(f, dirPrefix(dir))
		switch path.Ext(f) {
		case ".yaml", ".yml", ".json", ".jsonnet":
		default:
			continue
		}
		if (exclude != nil && exclude.MatchString(rel)) || (include != nil && !include.MatchString(rel)) {
			continue
		}
		if path.Ext(f) == ".jsonnet" {
			jsonnet = append(jsonnet, f)
			continue
		}
		if render.IsKustomizationName(path.Base(f)) {
			continue // a nested kustomization's own file is not an object
		}
		// A file over the render's size limit is left for the render to
		// refuse: the parent reads none whole.
		if n, err := t.Size(f); err == nil && n <= render.DefaultLimits().MaxFile {
			b, err := t.ReadFile(f)
			if err != nil {
				return nil, err
			}
			if strings.Contains(string(b), argoSkipMarker) {
				continue
			}
		}
		resources = append(resources, rel)
	}
	if len(jsonnet) > 0 {
		return nil, &JsonnetError{Files: jsonnet}
	}
	sort.Strings(resources)
	var k strings.Builder
	k.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	for _, r := range resources {
		fmt.Fprintf(&k, "- %q\n", r)
	}
	if len(resources) == 0 {
		k.Reset()
		k.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n")
	}
	return t.With(map[string][]byte{path.Join(dir, "kustomization.yaml"): []byte(k.String())}), nil
}

// JsonnetError says a directory holds jsonnet, which Argo CD evaluates and
// driftback does not render.
type JsonnetError struct{ Files []string }

func (e *JsonnetError) Error() string {
	return fmt.Sprintf("Argo CD evaluates jsonnet (%s), which driftback does not render", strings.Join(e.Files, ", "))
}

// filesIn lists the files directly in dir, or anywhere below it.
func filesIn(t *render.Tree, dir string, recurse bool) []string {
	prefix := dirPrefix(dir)
	var out []string
	for _, f := range t.Files() {
		if !strings.HasPrefix(f, prefix) {
			continue
		}
		if !recurse && strings.Contains(f[len(prefix):], "/") {
			continue
		}
		out = append(out, f)
	}
	return out
}

func dirPrefix(dir string) string {
	if dir == "." || dir == "" {
		return ""
	}
	return dir + "/"
}

// argoGlob compiles a pattern as Argo CD matches directory.include and
// exclude (gobwas/glob without separators): * and ? match any characters,
// "/" included, [...] a class, {a,b} either. Empty is nil: no pattern.
func argoGlob(p string) (*regexp.Regexp, error) {
	if p == "" {
		return nil, nil
	}
	var b strings.Builder
	b.WriteString("^")
	depth := 0
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			j := strings.IndexByte(p[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unclosed [")
			}
			class := p[i+1 : i+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + class + "]")
			i += j
		case '{':
			depth++
			b.WriteString("(?:")
		case '}':
			if depth == 0 {
				return nil, fmt.Errorf("unmatched }")
			}
			depth--
			b.WriteString(")")
		case ',':
			if depth > 0 {
				b.WriteString("|")
			} else {
				b.WriteString(",")
			}
		case '\\':
			if i+1 < len(p) {
				i++
				b.WriteString(regexp.QuoteMeta(string(p[i])))
			}
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unclosed {")
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// ArgoCDKustomize are an Argo CD Application's kustomize options, which Argo
// CD applies to the path's kustomization with `kustomize edit` before it
// builds.
type ArgoCDKustomize struct {
	NamePrefix, NameSuffix, Namespace string
	// Images are `kustomize edit set image` arguments: name[=newName][:tag][@digest].
	Images                                    []string
	CommonLabels, CommonAnnotations           map[string]string
	ForceCommonLabels, ForceCommonAnnotations bool
	// Replicas sets replicas by workload name.
	Replicas map[string]int64
	// Patches are kustomize patches as JSON objects.
	Patches    []map[string]any
	Components []string
}

// ArgoCDTree returns the tree Argo CD builds for an Application of path dir
// with kustomize options o: the kustomization file edited as Argo CD's
// `kustomize edit` commands edit it.
func ArgoCDTree(t *render.Tree, dir string, o ArgoCDKustomize) (*render.Tree, error) {
	kf := render.KustomizationFile(t, dir)
	if kf == "" {
		return nil, fmt.Errorf("%s: no kustomization file: Argo CD applies it as a plain directory", dir)
	}
	b, err := readKustomization(t, kf)
	if err != nil {
		return nil, err
	}
	var k kustypes.Kustomization
	if err := yaml.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", kf, err)
	}
	if o.NamePrefix != "" {
		k.NamePrefix = o.NamePrefix
	}
	if o.NameSuffix != "" {
		k.NameSuffix = o.NameSuffix
	}
	for _, arg := range o.Images {
		setImage(&k, arg)
	}
	for _, name := range sortedKeysOf(o.Replicas) {
		set := false
		for i := range k.Replicas {
			if k.Replicas[i].Name == name {
				k.Replicas[i].Count, set = o.Replicas[name], true
			}
		}
		if !set {
			k.Replicas = append(k.Replicas, kustypes.Replica{Name: name, Count: o.Replicas[name]})
		}
	}
	if k.CommonLabels, err = addMeta(k.CommonLabels, o.CommonLabels, o.ForceCommonLabels, "label"); err != nil {
		return nil, fmt.Errorf("%s: %w", kf, err)
	}
	if k.CommonAnnotations, err = addMeta(k.CommonAnnotations, o.CommonAnnotations, o.ForceCommonAnnotations, "annotation"); err != nil {
		return nil, fmt.Errorf("%s: %w", kf, err)
	}
	if o.Namespace != "" {
		k.Namespace = o.Namespace
	}
	for _, p := range o.Patches {
		raw, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		var patch kustypes.Patch
		if err := json.Unmarshal(raw, &patch); err != nil {
			return nil, fmt.Errorf("an Application patch: %w", err)
		}
		k.Patches = append(k.Patches, patch)
	}
	for _, c := range o.Components {
		if !contains(k.Components, c) {
			k.Components = append(k.Components, c)
		}
	}
	out, err := yaml.Marshal(k)
	if err != nil {
		return nil, err
	}
	return t.With(map[string][]byte{kf: out}), nil
}

// setImage does what `kustomize edit set image ARG` does to one entry.
func setImage(k *kustypes.Kustomization, arg string) {
	var img kustypes.Image
	name, rest, renamed := strings.Cut(arg, "=")
	if !renamed {
		rest = arg
	}
	if at := strings.Index(rest, "@"); at >= 0 {
		img.Digest, rest = rest[at+1:], rest[:at]
	}
	if c := strings.LastIndex(rest, ":"); c >= 0 && !strings.Contains(rest[c:], "/") {
		img.NewTag, rest = rest[c+1:], rest[:c]
	}
	if renamed {
		img.Name, img.NewName = name, rest
	} else {
		img.Name = rest
	}
	for i := range k.Images {
		if k.Images[i].Name == img.Name {
			if img.NewName != "" {
				k.Images[i].NewName = img.NewName
			}
			if img.NewTag != "" || img.Digest != "" {
				k.Images[i].NewTag, k.Images[i].Digest = img.NewTag, img.Digest
			}
			return
		}
	}
	k.Images = append(k.Images, img)
}

func addMeta(have, add map[string]string, force bool, what string) (map[string]string, error) {
	if len(add) == 0 {
		return have, nil
	}
	if have == nil {
		have = map[string]string{}
	}
	for _, key := range sortedKeysOf(add) {
		if _, ok := have[key]; ok && !force && have[key] != add[key] {
			return nil, fmt.Errorf("%s %s is already in the kustomization; Argo CD's kustomize edit fails without force", what, key)
		}
		have[key] = add[key]
	}
	return have, nil
}

func sortedKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
