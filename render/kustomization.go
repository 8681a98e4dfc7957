package render

import (
	"cmp"
	"fmt"
	"path"
	"regexp"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/driftback/driftback/render/child"
)

// kustomizationNames are the file names kustomize accepts, in its order.
var kustomizationNames = child.KustomizationNames

// MaxKustomizationBytes bounds a kustomization file the parent process parses
// itself; anything larger is hostile or a mistake.
const MaxKustomizationBytes = 1 << 20

// KustomizationFile returns the kustomization file in dir, or "".
func KustomizationFile(t *Tree, dir string) string {
	for _, n := range kustomizationNames {
		p := path.Join(dir, n)
		if t.Has(p) {
			return p
		}
	}
	return ""
}

// refKind says what a kustomization field may point at.
type refKind int

const (
	refFileOrDir refKind = iota // resources, generators, transformers, validators
	refDir                      // components, bases
	refFile                     // patches, generator inputs, crds, configurations, openapi
)

// ref is one path a kustomization file names, with where it names it.
type ref struct {
	field string // e.g. "resources", "patches.path"
	raw   string // as written
	value string // repo path it resolves to
	line  int
	kind  refKind
	// plugin marks generators, transformers and validators entries.
	plugin bool
}

// kustomization is what the dependency walk needs from a kustomization file.
type kustomization struct {
	file     string // repo path
	dir      string
	kind     string // Kustomization or Component
	refs     []ref
	problems []*Problem
}

// remotePattern matches the forms kustomize treats as remote: URLs of any scheme
// (http, https, ssh, file, git) and scp-style or host-first git addresses.
var remotePattern = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*://|[^/\s]+@[^/\s]+:|(github\.com|gitlab\.com|bitbucket\.org|dev\.azure\.com)[/:])`)

// parseKustomization reads the references of a kustomization file. Problems
// that make the file unsafe or unusable are returned with the file and line;
// krusty is left to judge everything else.
func parseKustomization(t *Tree, file string) (*kustomization, error) {
	k := &kustomization{file: file, dir: path.Dir(file)}
	size, err := t.Size(file)
	if err != nil {
		return nil, err
	}
	if size > MaxKustomizationBytes {
		k.problems = append(k.problems, &Problem{File: file, Reason: ReasonLimit,
			Message: fmt.Sprintf("kustomization file is %d bytes, over the limit of %d", size, MaxKustomizationBytes)})
		return k, nil
	}
	b, err := t.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		k.problems = append(k.problems, &Problem{File: file, Reason: ReasonInvalid, Line: yamlErrorLine(err),
			Message: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")})
		return k, nil
	}
	if len(doc.Content) == 0 {
		return k, nil // empty file: kustomize builds nothing from it
	}
	root := deref(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		k.problems = append(k.problems, &Problem{File: file, Line: root.Line, Reason: ReasonInvalid,
			Message: "a kustomization must be a YAML mapping"})
		return k, nil
	}
	var charts []*yaml.Node
	var home *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i], deref(root.Content[i+1])
		switch key.Value {
		case "kind":
			k.kind = val.Value
		case "resources":
			k.scalars(key.Value, val, refFileOrDir)
		case "generators", "transformers", "validators":
			for _, n := range seqItems(val) {
				if n.Kind == yaml.ScalarNode && !strings.Contains(n.Value, "\n") {
					if r := k.add(key.Value, n, refFileOrDir); r != nil {
						r.plugin = true
					}
				}
			}
		case "components", "bases":
			k.scalars(key.Value, val, refDir)
		case "crds", "configurations":
			k.scalars(key.Value, val, refFile)
		case "patches", "patchesJson6902", "replacements":
			for _, item := range seqItems(val) {
				if p := mapValue(item, "path"); p != nil {
					k.add(key.Value+".path", p, refFile)
				}
			}
		case "patchesStrategicMerge":
			for _, n := range seqItems(val) {
				// An entry is a file path or an inline patch; only paths are single lines.
				if n.Kind == yaml.ScalarNode && !strings.Contains(n.Value, "\n") && !strings.Contains(n.Value, ": ") {
					k.add(key.Value, n, refFile)
				}
			}
		case "configMapGenerator", "secretGenerator":
			for _, item := range seqItems(val) {
				for _, n := range seqItems(mapValue(item, "files")) {
					if n.Kind != yaml.ScalarNode {
						continue
					}
					// "key=path" names the key; the file is after the first '='.
					v := *n
					if i := strings.Index(v.Value, "="); i >= 0 {
						v.Value = v.Value[i+1:]
					}
					k.add(key.Value+".files", &v, refFile)
				}
				k.scalars(key.Value+".envs", mapValue(item, "envs"), refFile)
				if n := mapValue(item, "env"); n != nil && n.Kind == yaml.ScalarNode {
					k.add(key.Value+".env", n, refFile)
				}
			}
		case "openapi":
			if p := mapValue(val, "path"); p != nil {
				k.add("openapi.path", p, refFile)
			}
		case "helmCharts", "helmChartInflationGenerator":
			k.problems = append(k.problems, &Problem{File: file, Line: key.Line, Reason: ReasonHelm,
				Message: fmt.Sprintf("%s: Helm charts are not rendered without --enable-helm, as kustomize builds: Argo CD with it in argocd-cm's kustomize.buildOptions, or the command line's --enable-helm", key.Value)})
			charts = append(charts, seqItems(val)...)
		case "helmGlobals":
			if h := mapValue(val, "chartHome"); h != nil && h.Kind == yaml.ScalarNode {
				home = h
			}
		}
	}
	for _, c := range charts {
		k.chartRefs(t, c, home)
	}
	return k, nil
}

// chartRefs adds what a helmCharts entry reads: its chart's files (in
// chartHome), valuesFile and additionalValuesFiles.
func (k *kustomization) chartRefs(t *Tree, entry, home *yaml.Node) {
	str := func(key string) string {
		if n := mapValue(entry, key); n != nil && n.Kind == yaml.ScalarNode {
			return n.Value
		}
		return ""
	}
	dir := "charts"
	line := entry.Line
	if home != nil {
		dir, line = home.Value, home.Line
	}
	if h := str("chartHome"); h != "" { // the legacy helmChartInflationGenerator
		dir = h
	}
	name, version, repo := cmp.Or(str("name"), str("chartName")), cmp.Or(str("version"), str("chartVersion")), cmp.Or(str("repo"), str("chartRepoUrl"))
	if name != "" && !path.IsAbs(dir) {
		if version != "" && repo != "" {
			dir = path.Join(dir, name+"-"+version)
		}
		chart := path.Clean(path.Join(k.dir, dir, name))
		for _, f := range t.Files() {
			if strings.HasPrefix(f, chart+"/") && !strings.HasPrefix(f, "../") {
				k.refs = append(k.refs, ref{field: "helmCharts.chart", raw: f, value: f, line: line, kind: refFile})
			}
		}
	}
	if n := mapValue(entry, "valuesFile"); n != nil && n.Kind == yaml.ScalarNode {
		k.add("helmCharts.valuesFile", n, refFile)
	}
	k.scalars("helmCharts.additionalValuesFiles", mapValue(entry, "additionalValuesFiles"), refFile)
}

func (k *kustomization) scalars(field string, seq *yaml.Node, kind refKind) {
	for _, n := range seqItems(seq) {
		if n.Kind == yaml.ScalarNode {
			k.add(field, n, kind)
		}
	}
}

// add validates one reference and records it when it stays inside the
// repository, returning the recorded ref (nil when it was rejected).
func (k *kustomization) add(field string, n *yaml.Node, kind refKind) *ref {
	v := strings.TrimSpace(n.Value)
	if v == "" {
		return nil
	}
	fail := func(reason Reason, format string, args ...any) {
		k.problems = append(k.problems, &Problem{File: k.file, Line: n.Line, Reason: reason,
			Message: fmt.Sprintf("%s entry %q: ", field, v) + fmt.Sprintf(format, args...)})
	}
	switch {
	case remotePattern.MatchString(v) || strings.Contains(v, "?ref=") || strings.Contains(v, ".git//"):
		fail(ReasonRemote, "remote resources are not rendered: fetching them would reach the network; vendor the files into the repository")
		return nil
	case path.IsAbs(v) || (len(v) > 1 && v[1] == ':'):
		fail(ReasonOutsideRepo, "absolute paths are not allowed: every path must stay inside the repository")
		return nil
	}
	p := path.Join(k.dir, v)
	if p == ".." || strings.HasPrefix(p, "../") {
		fail(ReasonOutsideRepo, "the path leaves the repository")
		return nil
	}
	k.refs = append(k.refs, ref{field: field, raw: v, value: p, line: n.Line, kind: kind})
	return &k.refs[len(k.refs)-1]
}

func deref(n *yaml.Node) *yaml.Node {
	// Resolve one alias level only: following nested aliases is how alias bombs
	// expand, and a kustomization has no use for them.
	if n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

func seqItems(n *yaml.Node) []*yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	out := make([]*yaml.Node, 0, len(n.Content))
	for _, c := range n.Content {
		if c.Kind == yaml.AliasNode {
			continue
		}
		out = append(out, c)
	}
	return out
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := deref(n.Content[i+1])
			if v.Kind == yaml.AliasNode {
				return nil
			}
			return v
		}
	}
	return nil
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

func yamlErrorLine(err error) int {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	var n int
	fmt.Sscanf(m[1], "%d", &n)
	return n
}
