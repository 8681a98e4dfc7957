package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/reconcile/charts"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/render/helm"
)

// isChartApplication says o is an Argo CD Application that installs a
// chart from a chart repository (spec.source.chart).
func isChartApplication(o *unstructured.Unstructured) bool {
	if o.GetKind() != "Application" || !strings.HasPrefix(o.GetAPIVersion(), "argoproj.io/") {
		return false
	}
	chart, _, _ := unstructured.NestedString(o.Object, "spec", "source", "chart")
	return chart != ""
}

// chartApplications renders the charts of the Argo CD Applications among
// objs that install one from a chart repository (an app of apps, or
// Applications another reconciler applies), as Argo CD's repo-server
// renders them for a cluster it runs in, and returns objs with their
// objects added: what merging the Application's change does. One that
// cannot be rendered says why; its Application is still compared.
func chartApplications(ctx context.Context, r *render.Renderer, objs []*unstructured.Unstructured, vars Vars, secrets *secretUse) releasesBuilt {
	out := releasesBuilt{objects: objs}
	for _, app := range objs {
		if !isChartApplication(app) {
			continue
		}
		rel := Release{Object: "Application/" + app.GetNamespace() + "/" + secrets.name(app)}
		if secrets.uses(app) {
			// Its values would give the chart the value (or its
			// stand-in, which Argo CD does not render with).
			rel.NotRendered = "its source uses a variable from a Secret, and a chart is never given a Secret's value"
			out.releases = append(out.releases, rel)
			continue
		}
		chart, why := applicationChart(ctx, app, vars)
		if why != "" {
			rel.NotRendered = why
			out.releases = append(out.releases, rel)
			continue
		}
		rendered, err := r.RenderChart(ctx, chart)
		if err != nil {
			out.problems = append(out.problems, err.Error())
			continue
		}
		if rendered.Problem != nil {
			out.problems = append(out.problems, rel.Object+": "+rendered.Problem.Error())
			continue
		}
		rel.Chart = chart.Name
		for _, h := range rendered.Hooks {
			rel.Hooks = append(rel.Hooks, fmt.Sprintf("%s/%s (%s)", h.Kind, h.Name, strings.Join(h.Events, ", ")))
		}
		placed := rendered.Objects
		if skip, _, _ := unstructured.NestedBool(app.Object, "spec", "source", "helm", "skipCrds"); !skip {
			placed = append(rendered.CRDs, placed...)
		}
		if placed, err = object.Place(ctx, nil, placed, chart.Release.Namespace); err != nil {
			out.problems = append(out.problems, rel.Object+": "+err.Error())
			continue
		}
		out.objects = append(out.objects, placed...)
		out.releases = append(out.releases, rel)
	}
	return out
}

// applicationChart is the chart an Application installs, fetched from a
// trusted repository, with its values and release settings as Argo CD's
// repo-server passes them to helm template; or why it is not rendered.
func applicationChart(ctx context.Context, app *unstructured.Unstructured, vars Vars) (render.Chart, string) {
	src, _, _ := unstructured.NestedMap(app.Object, "spec", "source")
	server, _, _ := unstructured.NestedString(app.Object, "spec", "destination", "server")
	dest, _, _ := unstructured.NestedString(app.Object, "spec", "destination", "name")
	switch {
	case !(dest == "" && strings.TrimSuffix(server, "/") == discover.InClusterServer) && dest != "in-cluster":
		return render.Chart{}, "it deploys to another cluster than the one Argo CD runs in, which this target does not read"
	case vars.Helm == nil && vars.HelmNote != "":
		return render.Chart{}, vars.HelmNote
	case vars.Helm == nil:
		return render.Chart{}, "the cluster's Kubernetes version is not known"
	case vars.Charts == nil || vars.Charts.Fetcher == nil:
		return render.Chart{}, "its chart is in a chart repository, and charts are not fetched here"
	}
	repo, _ := src["repoURL"].(string)
	name, _ := src["chart"].(string)
	version, _ := src["targetRevision"].(string)
	if !strings.Contains(repo, "://") {
		// Argo CD writes an OCI registry's repoURL without its scheme.
		repo = "oci://" + repo
	}
	if !vars.Charts.Trust.Allows(repo) {
		return render.Chart{}, fmt.Sprintf("chart repository %s is not trusted yet: it is fetched from once the default branch names it, or app.yml's helm.repositories lists it", repo)
	}
	c, err := vars.Charts.Fetcher.Fetch(ctx, charts.Source{URL: repo, Chart: name, Version: version})
	if err != nil {
		return render.Chart{}, "its chart could not be fetched: " + err.Error()
	}
	h := &discover.ArgoHelm{}
	if raw, ok := src["helm"].(map[string]any); ok {
		b, err := json.Marshal(raw)
		if err == nil {
			err = json.Unmarshal(b, h)
		}
		if err != nil {
			return render.Chart{}, "its Helm options cannot be read: " + err.Error()
		}
	}
	values, why := argoValues(func(p string) ([]byte, error) {
		if b, ok := c.Files[render.CleanPath(path.Clean(p))]; ok {
			return b, nil
		}
		return nil, fmt.Errorf("%s is not in the chart", p)
	}, h)
	if why != "" {
		return render.Chart{}, why
	}
	vb, err := yaml.Marshal(values)
	if err != nil {
		return render.Chart{}, err.Error()
	}
	opts := helm.Options{ReleaseName: h.ReleaseName, Namespace: h.Namespace, KubeVersion: h.KubeVersion, APIVersions: h.APIVersions,
		SkipSchemaValidation: h.SkipSchemaValidation}
	if opts.ReleaseName == "" {
		opts.ReleaseName = app.GetName()
	}
	if opts.Namespace == "" {
		opts.Namespace, _, _ = unstructured.NestedString(app.Object, "spec", "destination", "namespace")
	}
	if opts.KubeVersion == "" {
		opts.KubeVersion = vars.Helm.KubeVersion
	}
	if len(opts.APIVersions) == 0 {
		opts.APIVersions = vars.Helm.APIVersions
	}
	return render.Chart{Name: strings.TrimSpace(c.Name + " " + c.Version), Files: c.Files, Values: vb, Release: opts}, ""
}
