package render

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/driftback/driftback/internal/argocd"
)

// ArgoCDSourceType is the type Argo CD's repo-server gives a path it was not
// told the type of (spec.source without helm, kustomize, directory or plugin):
// "Kustomize" when the directory holds a kustomization file, else "Helm" when
// it holds a file whose name ends in Chart.yaml, else "Directory". Only files
// directly in the directory count, and a kustomization wins over a chart, as
// in Argo CD's discovery.
func (t *Tree) ArgoCDSourceType(dir string) string {
	if findKustomization(t, dir) != "" {
		return "Kustomize"
	}
	for _, f := range t.filesIn(dir, false) {
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
func ArgoCDDirectoryTree(t *Tree, dir string, o ArgoCDDirectory) (*Tree, error) {
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
	for _, f := range t.filesIn(dir, o.Recurse) {
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
		if isKustomizationName(path.Base(f)) {
			continue // a nested kustomization's own file is not an object
		}
		// A file over the render's size limit is left for the render to
		// refuse: the parent reads none whole.
		if n, err := t.Size(f); err == nil && n <= DefaultLimits().MaxFile {
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
func (t *Tree) filesIn(dir string, recurse bool) []string {
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

// dropArgoCDHooks removes Argo CD's hooks from the resource files the
// kustomization in dir lists (an ArgoCDDirectoryTree's), in the child's
// in-memory copy, and names what it removed.
func dropArgoCDHooks(fs filesys.FileSystem, dir string) ([]string, error) {
	file := path.Join(dir, "kustomization.yaml")
	b, err := fs.ReadFile(file)
	if err != nil {
		return nil, nil // krusty says what is missing
	}
	k, err := yaml.Parse(string(b))
	if err != nil {
		return nil, nil // krusty reports it in its own words
	}
	list, err := k.Pipe(yaml.Lookup("resources"))
	if err != nil || list == nil {
		return nil, nil
	}
	var hooks []string
	for _, n := range list.YNode().Content {
		f := path.Join(dir, n.Value)
		if fs.IsDir(f) {
			continue
		}
		b, err := fs.ReadFile(f)
		if err != nil {
			continue // krusty says what is missing
		}
		nodes, err := (&kio.ByteReader{Reader: bytes.NewReader(b), OmitReaderAnnotations: true}).Read()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", strings.TrimPrefix(f, "/"), err)
		}
		var keep []*yaml.RNode
		for _, o := range nodes {
			if !argocd.IsHook(o.GetAnnotations()) {
				keep = append(keep, o)
				continue
			}
			name := o.GetName()
			if name == "" {
				if g, _ := o.Pipe(yaml.Lookup("metadata", "generateName")); g != nil {
					name = yaml.GetValue(g) + "*"
				}
			}
			hooks = append(hooks, o.GetKind()+" "+name)
		}
		if len(keep) == len(nodes) {
			continue
		}
		var out bytes.Buffer
		if err := (kio.ByteWriter{Writer: &out}).Write(keep); err != nil {
			return nil, fmt.Errorf("%s: %w", strings.TrimPrefix(f, "/"), err)
		}
		if err := fs.WriteFile(f, out.Bytes()); err != nil {
			return nil, err
		}
	}
	return hooks, nil
}
