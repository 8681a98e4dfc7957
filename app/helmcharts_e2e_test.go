package app

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"context"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/internal/kubetest"
)

// redisKustomization inflates a chart of the repository with helmCharts.
func redisKustomization(replicas int) map[string]any {
	return map[string]any{
		"fleet/redis/kustomization.yaml":       fmt.Sprintf("helmCharts:\n- name: redis\n  releaseName: cache\n  namespace: NS\n  valuesInline: {replicas: %d}\n", replicas),
		"fleet/redis/charts/redis/Chart.yaml":  "apiVersion: v2\nname: redis\nversion: 0.1.0\n",
		"fleet/redis/charts/redis/values.yaml": "replicas: 1\n",
		"fleet/redis/charts/redis/templates/s.yaml": "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: '{{ .Release.Name }}-redis', namespace: '{{ .Release.Namespace }}'}\n" +
			"spec:\n  replicas: {{ .Values.replicas }}\n  serviceName: redis\n  selector: {matchLabels: {app: redis}}\n  template:\n    metadata: {labels: {app: redis}}\n    spec: {containers: [{name: redis, image: redis}]}\n",
	}
}

// TestHelmChartsInflateAsArgoCDDoes: Argo CD with --enable-helm in
// argocd-cm's kustomize.buildOptions inflates a kustomization's helmCharts;
// so does the review of a pull request that changes its values: the
// chart's objects are compared, not the path said not rendered.
func TestHelmChartsInflateAsArgoCDDoes(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(c *config.Config) {
		c.Targets = nil
		cl := c.Clusters["test"]
		cl.Discover = &config.Discover{ArgoCD: true}
		c.Clusters["test"] = cl
	})
	ns := w.env.Namespace
	kubetest.InstallCRDs(t, w.env, kubetest.ReconcilerCRDs(t)...)
	w.cfg.Clusters["test"].Discover.Namespaces = []string{ns}
	w.cfg.Clusters["test"].Discover.ArgoCDNamespace = ns
	kubetest.ArgoCDDefaultProject(t, w.env, ns)
	host := string(discover.HostOf(w.gh.URL()))
	hostname, _, _ := strings.Cut(host, ":")
	w.apply(`apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm, namespace: NS}
data: {kustomize.buildOptions: --enable-helm --load-restrictor LoadRestrictionsNone}`)
	w.apply(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: cache, namespace: NS}
spec:
  project: default
  source: {repoURL: 'https://` + hostname + `/acme/gitops', path: fleet/redis}
  destination: {server: https://kubernetes.default.svc, namespace: NS}
  syncPolicy: {automated: {}}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.srv.App.targets.Run(ctx)
	eventually(t, func() bool {
		ts, _ := w.srv.App.targetsOf(fullName)
		return len(ts) == 1 && ts[0].Found != nil && ts[0].Found.EnableHelm
	}, "the Application to be discovered with argocd-cm's --enable-helm")

	base := w.commit(plumbing.ZeroHash, redisKustomization(1))
	head := w.commit(base, redisKustomization(3))
	w.openPR(1, base, head, nil)
	if code := w.deliver("pull_request", "d-open", prPayload("opened", 1, head.String())); code != http.StatusAccepted {
		t.Fatalf("opened: %d", code)
	}
	w.waitChecks(head.String(), 2)
	body := w.gh.Comments(fullName, 1)[0].Body
	for _, s := range []string{"➕ create <code>StatefulSet/" + ns + "/cache-redis</code>", "  replicas: 3\n"} {
		if !strings.Contains(body, s) {
			t.Errorf("the comment does not say %q:\n%s", s, body)
		}
	}
	if strings.Contains(body, "not rendered") {
		t.Errorf("the comment says something is not rendered:\n%s", body)
	}
}
