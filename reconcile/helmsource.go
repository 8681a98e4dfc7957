package reconcile

import (
	"context"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/reconcile/charts"
	"github.com/driftback/driftback/reconcile/hide"
	"github.com/driftback/driftback/render"
)

// ChartAccess is how a target's charts that are not in its own repository
// are fetched.
type ChartAccess struct {
	Fetcher *charts.Fetcher
	// Trust is the repositories charts may come from: the default
	// branch's and app.yml's. A repository object the cluster holds with
	// the same URL is trusted too.
	Trust *charts.Trust
	// Live reads the cluster's source objects and the Secrets their
	// secretRef names; nil (a fork's pull request) reads nothing, and
	// fetches nothing that needs credentials.
	Live client.Client
	// AnyGitRepository takes the tree for the GitRepository a plain
	// path's HelmRelease names (the command line reads one repository,
	// and no Kustomization says which GitRepository that is).
	AnyGitRepository bool
}

// fluxSourceGroup is source-controller's API group.
const fluxSourceGroup = "source.toolkit.fluxcd.io"

// fetchedChart is the chart a HelmRelease names in a HelmRepository or an
// OCIRepository, fetched; or why it is not.
func fetchedChart(ctx context.Context, access *ChartAccess, objs []*unstructured.Unstructured, hr *unstructured.Unstructured, secrets *secretUse) (*charts.Chart, string) {
	spec, _, _ := unstructured.NestedMap(hr.Object, "spec")
	var kind, name, ns string
	src := charts.Source{}
	if ref, ok := spec["chartRef"].(map[string]any); ok {
		kind, name, ns = str(ref["kind"]), str(ref["name"]), str(ref["namespace"])
		if kind != "OCIRepository" {
			return nil, fmt.Sprintf("its chart comes from %s %s (chartRef), which is not fetched", kind, name)
		}
	} else {
		kind, _, _ = unstructured.NestedString(spec, "chart", "spec", "sourceRef", "kind")
		name, _, _ = unstructured.NestedString(spec, "chart", "spec", "sourceRef", "name")
		ns, _, _ = unstructured.NestedString(spec, "chart", "spec", "sourceRef", "namespace")
		src.Chart, _, _ = unstructured.NestedString(spec, "chart", "spec", "chart")
		src.Version, _, _ = unstructured.NestedString(spec, "chart", "spec", "version")
		if kind != "HelmRepository" {
			return nil, fmt.Sprintf("its chart comes from %s %s, which is not fetched", kind, name)
		}
	}
	if ns == "" {
		ns = hr.GetNamespace()
	}
	what := fmt.Sprintf("%s %s/%s", kind, ns, name)
	if access == nil || access.Fetcher == nil {
		return nil, fmt.Sprintf("its chart comes from %s, and charts are not fetched here", what)
	}
	repo, inRender, why := sourceObject(ctx, access, objs, kind, ns, name)
	if why != "" {
		return nil, why
	}
	if secrets.uses(repo) {
		// Its address or version would carry the value into a request and
		// the message of its failure.
		return nil, what + " uses a variable from a Secret: charts are not fetched with a Secret's value"
	}
	rspec, _, _ := unstructured.NestedMap(repo.Object, "spec")
	src.URL = str(rspec["url"])
	if s, _, _ := unstructured.NestedBool(rspec, "suspend"); s {
		return nil, what + " is suspended: helm-controller keeps the chart it has"
	}
	if kind == "HelmRepository" && str(rspec["type"]) != "oci" && strings.HasPrefix(src.URL, "oci://") {
		return nil, what + " has an oci:// URL but no type: oci"
	}
	if kind == "OCIRepository" {
		src.Version, _, _ = unstructured.NestedString(rspec, "ref", "semver")
		if tag, _, _ := unstructured.NestedString(rspec, "ref", "tag"); src.Version == "" {
			src.Version = tag
			if tag == "" {
				src.Version = "latest"
			}
		}
		src.Digest, _, _ = unstructured.NestedString(rspec, "ref", "digest")
	}
	if inRender && !access.Trust.Allows(src.URL) && !liveHasURL(ctx, access, kind, ns, name, src.URL) {
		return nil, fmt.Sprintf("chart repository %s is not trusted yet: it is fetched from once the default branch or the cluster names it, or app.yml's helm.repositories lists it", src.URL)
	}
	if secret, _, _ := unstructured.NestedString(rspec, "secretRef", "name"); secret != "" {
		// Credentials go only where the cluster sends them: a source a
		// pull request writes could pair any Secret it may read with an
		// address of its choosing.
		if inRender && !livePairs(ctx, access, kind, ns, name, src.URL, secret) {
			return nil, what + ": its credentials are used only as the cluster's own " + kind + " pairs them with its address, and the cluster's does not"
		}
		auth, why := repositoryAuth(ctx, access, ns, secret)
		if why != "" {
			return nil, what + ": " + why
		}
		src.Auth = auth
	}
	c, err := access.Fetcher.Fetch(ctx, src)
	if err != nil {
		msg := err.Error()
		if src.Auth != nil {
			msg = hide.In(msg, []string{src.Auth.Password})
		}
		return nil, "its chart could not be fetched: " + msg
	}
	return c, ""
}

// sourceObject is the source object a HelmRelease names: as the target
// renders it, else as the cluster holds it (another Kustomization applies
// it). inRender says it came from the render: its URL is the pull
// request's to choose, and must be trusted.
func sourceObject(ctx context.Context, access *ChartAccess, objs []*unstructured.Unstructured, kind, ns, name string) (*unstructured.Unstructured, bool, string) {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name && o.GetNamespace() == ns && strings.HasPrefix(o.GetAPIVersion(), fluxSourceGroup+"/") {
			return o, true, ""
		}
	}
	if access.Live == nil {
		return nil, false, fmt.Sprintf("its %s %s/%s is not in this target, and a fork's pull request does not read the cluster", kind, ns, name)
	}
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(schema.GroupVersionKind{Group: fluxSourceGroup, Version: "v1", Kind: kind})
	if err := access.Live.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
		return nil, false, fmt.Sprintf("its %s %s/%s is neither in this target nor readable in the cluster: %v", kind, ns, name, err)
	}
	return o, false, ""
}

// liveHasURL says the cluster's own copy of the source object has url:
// what the cluster already fetches from is trusted.
func liveHasURL(ctx context.Context, access *ChartAccess, kind, ns, name, url string) bool {
	live, _ := liveSource(ctx, access, kind, ns, name)
	return live != "" && live == charts.Normalize(url)
}

// livePairs says the cluster's own copy of the source object sends the
// Secret secret to url.
func livePairs(ctx context.Context, access *ChartAccess, kind, ns, name, url, secret string) bool {
	live, ref := liveSource(ctx, access, kind, ns, name)
	return live != "" && live == charts.Normalize(url) && ref == secret
}

// liveSource is the address (normalized) and the credentials' Secret of
// the cluster's own copy of a source object; "" when there is none.
func liveSource(ctx context.Context, access *ChartAccess, kind, ns, name string) (url, secretRef string) {
	if access.Live == nil {
		return "", ""
	}
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(schema.GroupVersionKind{Group: fluxSourceGroup, Version: "v1", Kind: kind})
	if access.Live.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o) != nil {
		return "", ""
	}
	url, _, _ = unstructured.NestedString(o.Object, "spec", "url")
	secretRef, _, _ = unstructured.NestedString(o.Object, "spec", "secretRef", "name")
	return charts.Normalize(url), secretRef
}

// repositoryAuth is the basic credentials of a repository's secretRef, as
// source-controller reads them: username and password, or a
// dockerconfigjson Secret's (not yet: said).
func repositoryAuth(ctx context.Context, access *ChartAccess, ns, name string) (*charts.Auth, string) {
	if access.Live == nil {
		return nil, "its credentials are in the cluster, which a fork's pull request does not read"
	}
	s := &corev1.Secret{}
	if err := access.Live.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		return nil, fmt.Sprintf("its credentials, Secret %s/%s, could not be read: %v", ns, name, err)
	}
	user, pass := string(s.Data["username"]), string(s.Data["password"])
	if user == "" || pass == "" {
		return nil, fmt.Sprintf("its Secret %s/%s has no username and password (other kinds of credentials are not read yet)", ns, name)
	}
	return &charts.Auth{Username: user, Password: pass}, ""
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// Charts fetches charts for every target, from the repositories app.yml
// trusts and those each default branch names.
type Charts struct {
	Fetcher *charts.Fetcher
	// Listed are app.yml's trusted repositories.
	Listed *charts.Trust
}

// TrustIn is what charts may be fetched from when tree is the default
// branch; nil for no fetching.
func (c *Charts) TrustIn(tree *render.Tree) *charts.Trust {
	if c == nil {
		return nil
	}
	return c.Listed.With(tree)
}

// Access is how t's charts are fetched, with trust (TrustIn). live false
// (a fork's pull request) reads nothing of the cluster: charts whose
// source object or credentials are only there are not fetched.
func (c *Charts) Access(t Target, trust *charts.Trust, live bool, kube Kube) *ChartAccess {
	if c == nil || c.Fetcher == nil {
		return nil
	}
	a := &ChartAccess{Fetcher: c.Fetcher, Trust: trust}
	if live && kube != nil && t.Cluster != "" {
		a.Live, _ = kube(t.Cluster)
	}
	return a
}

// chartDependencies adds to a chart's files (from dir in tree) the
// dependencies its Chart.yaml lists and its charts/ lacks, as `helm
// dependency build` does for Argo CD and source-controller: at Chart.lock's
// version, from a file:// path in the repository or a trusted chart
// repository. It says why when one cannot be had.
func chartDependencies(ctx context.Context, access *ChartAccess, tree *render.Tree, dir string, files map[string][]byte) string {
	type dep struct{ Name, Version, Repository string }
	var meta, lock struct{ Dependencies []dep }
	if err := yaml.Unmarshal(files["Chart.yaml"], &meta); err != nil {
		return "its Chart.yaml: " + err.Error()
	}
	_ = yaml.Unmarshal(files["Chart.lock"], &lock)
	locked := map[string]string{}
	for _, d := range lock.Dependencies {
		locked[d.Name+"\x00"+d.Repository] = d.Version
	}
	for _, d := range meta.Dependencies {
		if vendored(files, d.Name) || d.Repository == "" {
			continue
		}
		var got map[string][]byte
		switch repo := d.Repository; {
		case strings.HasPrefix(repo, "file://"):
			src := render.CleanPath(path.Join(dir, strings.TrimPrefix(repo, "file://")))
			if src == "" || !tree.HasDir(src) {
				return fmt.Sprintf("its dependency %s (%s) is not a directory of the repository", d.Name, repo)
			}
			got = map[string][]byte{}
			for _, f := range tree.Files() {
				if rel, ok := strings.CutPrefix(f, src+"/"); ok {
					b, err := tree.ReadFile(f)
					if err != nil {
						return err.Error()
					}
					got[rel] = b
				}
			}
		case access == nil || access.Fetcher == nil:
			return fmt.Sprintf("its dependency %s is not in charts/, and charts are not fetched here", d.Name)
		case !access.Trust.Allows(repo):
			return fmt.Sprintf("its dependency %s comes from chart repository %s, which is not trusted yet: it is fetched from once the default branch names it, or app.yml's helm.repositories lists it", d.Name, repo)
		default:
			version := d.Version
			if v, ok := locked[d.Name+"\x00"+repo]; ok {
				version = v
			}
			c, err := access.Fetcher.Fetch(ctx, charts.Source{URL: repo, Chart: d.Name, Version: version})
			if err != nil {
				return fmt.Sprintf("its dependency %s could not be fetched: %v", d.Name, err)
			}
			got = c.Files
		}
		for rel, b := range got {
			files["charts/"+d.Name+"/"+rel] = b
		}
	}
	return ""
}

// vendored says a chart's charts/ holds the dependency name, as a
// directory or an archive.
func vendored(files map[string][]byte, name string) bool {
	if _, ok := files["charts/"+name+"/Chart.yaml"]; ok {
		return true
	}
	for f := range files {
		if rest, ok := strings.CutPrefix(f, "charts/"+name+"-"); ok && strings.HasSuffix(rest, ".tgz") && !strings.Contains(rest, "/") {
			return true
		}
	}
	return false
}
