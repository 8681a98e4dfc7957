package charts

import (
	"bytes"
	"net/url"
	"path"
	"strings"
	"sync"

	"github.com/driftback/driftback/render"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Trust is the chart repositories a pull request's charts may be fetched
// from: those its default branch already names, and those app.yml lists
// (each with everything under it). A repository a pull request adds is
// not fetched from until it is merged: the request itself could reach
// anything.
type Trust struct {
	exact    map[string]bool
	prefixes []string
	// tree, when set, is a default branch whose repositories are read the
	// first time they are asked about: most renders fetch nothing.
	tree *render.Tree
	once sync.Once
}

// NewTrust trusts the repositories app.yml lists, and what is under them.
func NewTrust(listed []string) *Trust {
	t := &Trust{exact: map[string]bool{}}
	for _, u := range listed {
		if n := Normalize(u); n != "" {
			t.prefixes = append(t.prefixes, n)
		}
	}
	return t
}

// Allows says charts may be fetched from u.
func (t *Trust) Allows(u string) bool {
	if t == nil {
		return false
	}
	n := Normalize(u)
	if n == "" {
		return false
	}
	t.once.Do(t.scan)
	if t.exact[n] {
		return true
	}
	for _, p := range t.prefixes {
		if n == p || strings.HasPrefix(n, p+"/") {
			return true
		}
	}
	return false
}

// With is t also trusting the repositories tree names (a default
// branch): the url of its Flux HelmRepositories and OCIRepositories, the
// repoURL of its Argo CD Applications and ApplicationSets, and the
// repository of its charts' dependencies.
func (t *Trust) With(tree *render.Tree) *Trust {
	t.once.Do(t.scan)
	out := &Trust{exact: map[string]bool{}, prefixes: t.prefixes, tree: tree}
	for k := range t.exact {
		out.exact[k] = true
	}
	return out
}

// scan reads the repositories t's tree names into exact.
func (t *Trust) scan() {
	if t.tree == nil {
		return
	}
	for _, f := range t.tree.Files() {
		ext := path.Ext(f)
		if ext != ".yaml" && ext != ".yml" {
			continue
		}
		if size, err := t.tree.Size(f); err != nil || size > maxScannedFile {
			continue
		}
		b, err := t.tree.ReadFile(f)
		if err != nil || !mayNameRepository(b) {
			continue
		}
		for _, u := range repositoriesIn(b, path.Base(f) == "Chart.yaml", render.IsKustomizationName(path.Base(f))) {
			if n := Normalize(u); n != "" {
				t.exact[n] = true
			}
		}
	}
}

// maxScannedFile is the largest file read for repositories.
const maxScannedFile = 4 << 20

// mayNameRepository is a cheap look before parsing.
func mayNameRepository(b []byte) bool {
	return bytes.Contains(b, []byte("Repository")) || bytes.Contains(b, []byte("repoURL")) || bytes.Contains(b, []byte("repository:")) ||
		bytes.Contains(b, []byte("helmCharts:"))
}

// repositoriesIn are the repository URLs the YAML documents of b name.
func repositoriesIn(b []byte, chartYAML, kustomization bool) []string {
	var out []string
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			// The end, or YAML no reconciler would read either.
			return out
		}
		if chartYAML {
			deps, _ := doc["dependencies"].([]any)
			for _, d := range deps {
				if m, ok := d.(map[string]any); ok {
					out = append(out, str(m["repository"]))
				}
			}
			continue
		}
		if kustomization {
			for _, c := range KustomizeCharts(doc) {
				out = append(out, c.Repo)
			}
			continue
		}
		kind := str(doc["kind"])
		api := str(doc["apiVersion"])
		spec, _ := doc["spec"].(map[string]any)
		switch {
		case (kind == "HelmRepository" || kind == "OCIRepository") && strings.HasPrefix(api, "source.toolkit.fluxcd.io/"):
			out = append(out, str(spec["url"]))
		case kind == "Application" && strings.HasPrefix(api, "argoproj.io/"):
			out = append(out, appRepoURLs(spec)...)
		case kind == "ApplicationSet" && strings.HasPrefix(api, "argoproj.io/"):
			tmpl, _ := spec["template"].(map[string]any)
			tspec, _ := tmpl["spec"].(map[string]any)
			out = append(out, appRepoURLs(tspec)...)
		}
	}
}

// appRepoURLs are an Application spec's source repoURLs.
func appRepoURLs(spec map[string]any) []string {
	var out []string
	if s, ok := spec["source"].(map[string]any); ok {
		out = append(out, str(s["repoURL"]))
	}
	list, _ := spec["sources"].([]any)
	for _, s := range list {
		if m, ok := s.(map[string]any); ok {
			out = append(out, str(m["repoURL"]))
		}
	}
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// Normalize is u as trust compares it: scheme and host in lower case, no
// credentials, query or trailing slash; "" for what is not an http(s) or
// oci URL (Argo CD's OCI repoURLs may leave out oci://), and for a path
// that could climb out of a trusted one on the server: a "." or ".."
// segment, plain or escaped, or an escaped slash or backslash.
func Normalize(u string) string {
	u = strings.TrimSpace(u)
	if u == "" {
		return ""
	}
	if !strings.Contains(u, "://") {
		u = "oci://" + u
	}
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return ""
	}
	switch strings.ToLower(p.Scheme) {
	case "http", "https", "oci":
	default:
		return ""
	}
	raw := strings.ToLower(p.EscapedPath())
	if strings.Contains(raw, "%2f") || strings.Contains(raw, "%5c") || strings.Contains(p.Path, "\\") {
		return ""
	}
	for _, seg := range strings.Split(p.Path, "/") {
		if seg == "." || seg == ".." {
			return ""
		}
	}
	return strings.ToLower(p.Scheme) + "://" + strings.ToLower(p.Host) + strings.TrimSuffix(p.EscapedPath(), "/")
}
