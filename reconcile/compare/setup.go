package compare

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"helm.sh/helm/v4/pkg/chart/common"

	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/reconcile"
	"github.com/driftback/driftback/reconcile/charts"
	"github.com/driftback/driftback/render"
)

// Setup is what a command's builds read besides the trees.
type Setup struct {
	// cfg reads the cluster: the reconciler objects that build a path,
	// their variables, the cluster's version for Helm, and chart
	// credentials; nil reads nothing.
	Config *rest.Config
	// plain builds every path plainly, even one a reconciler object on
	// the cluster builds (--plain).
	Plain         bool
	ArgoNamespace string
	// enableHelm inflates helmCharts in paths built plainly (--enable-helm).
	EnableHelm bool
	// base is the tree whose chart repositories are trusted, with
	// trusted (--chart-repository); privateHosts may resolve to private
	// addresses (--chart-private-host).
	Base                  *render.Tree
	Trusted, PrivateHosts []string
	Renderer              *render.Renderer
	// found are the reconciler objects on the cluster, by the path they
	// build (ReconcilersOnCluster).
	Found map[string][]*unstructured.Unstructured
}

// Builds are the builds of each overlay, in order: recon (a flag's
// reconciler object) for its path; a Flux Kustomization or an Argo CD
// Application on the cluster for a path one builds (said on the target,
// and on stderr: say is called); else plainly. Every build renders the
// Helm charts it holds, as serve does.
func Builds(ctx context.Context, overlays []string, recon *Build, s Setup, say func(string, ...any)) []*Build {
	caps, capsNote := capabilities(ctx, s.Config)
	access := &reconcile.ChartAccess{
		Fetcher: charts.New(charts.Options{PrivateHosts: s.PrivateHosts, Index: s.Renderer.ChartIndex}),
		Trust:   charts.NewTrust(s.Trusted).With(s.Base),
	}
	var kube client.Client
	if s.Config != nil {
		kube, _ = client.New(s.Config, client.Options{})
		access.Live = kube
	}
	found := s.Found
	argoHelm := s.EnableHelm
	if s.Config != nil {
		// Argo CD inflates helmCharts as its argocd-cm says.
		if cs, err := kubernetes.NewForConfig(s.Config); err == nil {
			if cm, err := cs.CoreV1().ConfigMaps(s.ArgoNamespace).Get(ctx, "argocd-cm", metav1.GetOptions{}); err == nil {
				argoHelm = strings.Contains(cm.Data["kustomize.buildOptions"], "--enable-helm")
			}
		}
	}
	// A plain path names no GitRepository of its own: a HelmRelease's
	// chart in Git is read from the repository compared.
	plainAccess := *access
	plainAccess.AnyGitRepository = true
	out := make([]*Build, len(overlays))
	for i, path := range overlays {
		b := Plain(path)
		switch objs := found[path]; {
		case recon != nil && path == recon.Path():
			b = recon
		case len(objs) == 1 && objs[0].GetKind() == "Kustomization":
			b = Flux(ctx, objs[0], kube)
			found := fmt.Sprintf("built as Flux Kustomization %s/%s builds it, found on the cluster (--plain builds it plainly)", objs[0].GetNamespace(), objs[0].GetName())
			b.Note(found)
			say("%s is %s", path, found)
		case len(objs) == 1:
			argo, err := ArgoCD(objs[0], s.ArgoNamespace)
			if err != nil {
				say("%s is built plainly: %v", path, err)
				break
			}
			b = argo
			found := fmt.Sprintf("built as Argo CD Application %s/%s builds it, found on the cluster (--plain builds it plainly)", objs[0].GetNamespace(), objs[0].GetName())
			b.Note(found)
			say("%s is %s", path, found)
		case len(objs) > 1:
			var names []string
			for _, o := range objs {
				names = append(names, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
			}
			slices.Sort(names)
			say("%s is built plainly: %s build it on the cluster; name one with --flux-kustomization or --argocd-app", path, strings.Join(names, ", "))
		}
		switch f := b.Found(); {
		case f == nil:
			b.HelmCharts(s.EnableHelm)
		case f.Reconciler == discover.ReconcilerArgoCD:
			b.HelmCharts(argoHelm)
		}
		if b.Found() == nil {
			out[i] = b.WithCharts(caps, capsNote, &plainAccess)
			continue
		}
		out[i] = b.WithCharts(caps, capsNote, access)
	}
	return out
}

// capabilities are what Helm charts are rendered for: the cluster's version
// and APIs when it is read, else Helm's defaults, said in the note.
func capabilities(ctx context.Context, cfg *rest.Config) (*reconcile.Capabilities, string) {
	if cfg != nil {
		r, err := livestate.NewClusterReader(cfg)
		if err == nil {
			var v string
			var apis []string
			if v, apis, err = r.Capabilities(ctx); err == nil {
				return &reconcile.Capabilities{KubeVersion: v, APIVersions: apis}, ""
			}
		}
		return nil, "the cluster's Kubernetes version could not be read: " + err.Error()
	}
	d := common.DefaultCapabilities
	v := strings.TrimPrefix(d.KubeVersion.Version, "v")
	return &reconcile.Capabilities{KubeVersion: v, APIVersions: d.APIVersions},
		fmt.Sprintf("Helm charts are rendered for Kubernetes %s and its built-in APIs (Helm's default, as helm template does); give --kubeconfig to render them for the cluster's version and APIs", v)
}

// ReconcilersOnCluster are the Flux Kustomizations (every namespace) and
// the Argo CD Applications (in argoNS) on the cluster, by the path they
// build. A kind the cluster does not serve has none.
// Of those, only the ones whose repository is one of remotes (the local
// repository's remotes' URLs) count, when remotes are known.
func ReconcilersOnCluster(ctx context.Context, cfg *rest.Config, argoNS string, remotes []string) (map[string][]*unstructured.Unstructured, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ours := func(url string) bool {
		return len(remotes) == 0 || url == "" || slices.Contains(remotes, RepoKey(url))
	}
	out := map[string][]*unstructured.Unstructured{}
	ks, err := dyn.Resource(discover.FluxKustomizations).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("list Flux Kustomizations: %w", err)
	default:
		for i := range ks.Items {
			k := &ks.Items[i]
			kind, _, _ := unstructured.NestedString(k.Object, "spec", "sourceRef", "kind")
			name, _, _ := unstructured.NestedString(k.Object, "spec", "sourceRef", "name")
			ns, _, _ := unstructured.NestedString(k.Object, "spec", "sourceRef", "namespace")
			if kind != "GitRepository" {
				continue // an OCI artifact or a bucket: not this repository
			}
			if len(remotes) > 0 {
				src, err := dyn.Resource(discover.FluxGitRepositories).Namespace(cmp.Or(ns, k.GetNamespace())).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					continue
				}
				if url, _, _ := unstructured.NestedString(src.Object, "spec", "url"); !ours(url) {
					continue
				}
			}
			p, _, _ := unstructured.NestedString(k.Object, "spec", "path")
			out[render.CleanPath(p)] = append(out[render.CleanPath(p)], k)
		}
	}
	apps, err := dyn.Resource(discover.ArgoCDApplications).Namespace(argoNS).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("list Argo CD Applications in %s: %w", argoNS, err)
	default:
		for i := range apps.Items {
			p, ok, _ := unstructured.NestedString(apps.Items[i].Object, "spec", "source", "path")
			url, _, _ := unstructured.NestedString(apps.Items[i].Object, "spec", "source", "repoURL")
			if ok && ours(url) {
				out[render.CleanPath(p)] = append(out[render.CleanPath(p)], &apps.Items[i])
			}
		}
	}
	return out, nil
}

// RepoKey names a repository by host and path, whatever the URL's form
// (https://host/owner/repo.git, git@host:owner/repo, ssh://git@host/…).
func RepoKey(url string) string {
	u := strings.ToLower(strings.TrimSpace(url))
	for _, p := range []string{"https://", "http://", "ssh://", "git://"} {
		u = strings.TrimPrefix(u, p)
	}
	// Userinfo (git@, user:token@) ends at the last @ before the path.
	if at := strings.LastIndex(u[:strings.IndexAny(u+"/", "/")], "@"); at >= 0 {
		u = u[at+1:]
	}
	if host, rest, ok := strings.Cut(u, ":"); ok && !strings.Contains(host, "/") && !strings.HasPrefix(rest, "//") {
		if _, err := strconv.Atoi(strings.SplitN(rest, "/", 2)[0]); err != nil {
			u = host + "/" + rest // scp-like git@host:owner/repo
		} else {
			u = host + "/" + strings.SplitN(rest, "/", 2)[1] // host:port/owner/repo
		}
	}
	return strings.TrimSuffix(strings.TrimSuffix(u, "/"), ".git")
}
