package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// chartRepo writes a Flux layout whose HelmRelease installs a chart kept in
// the repository, with replicas and an image tag as the chart's values.
func chartRepo(t *testing.T, dir string, replicas, tag string) {
	t.Helper()
	writeTree(t, dir, map[string]string{
		"charts/shop/Chart.yaml":  "apiVersion: v2\nname: shop\nversion: 1.2.0\n",
		"charts/shop/values.yaml": "replicaCount: 1\ntag: \"" + tag + "\"\n",
		"charts/shop/templates/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-web\nspec:\n  replicas: {{ .Values.replicaCount }}\n" +
			"  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: \"nginx:{{ .Values.tag }}\"}]\n",
		"apps/shop/kustomization.yaml": "resources: [release.yaml]\n",
		"apps/shop/release.yaml": "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: shop, namespace: shop}\nspec:\n  interval: 10m\n" +
			"  chart:\n    spec:\n      chart: ./charts/shop\n      sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}\n  values:\n    replicaCount: " + replicas + "\n",
	})
}

// TestDiffRendersHelmReleases: the command line renders a HelmRelease's
// chart as serve does (here a chart in the repository, for Helm's default
// Kubernetes version without a cluster, said in a note): a change to the
// release's values and one to the chart's own files are both shown on the
// chart's objects, and a change to the chart alone affects the path whose
// release installs it. Nothing is left out silently.
func TestDiffRendersHelmReleases(t *testing.T) {
	dir := t.TempDir()
	base, head := filepath.Join(dir, "base"), filepath.Join(dir, "head")
	chartRepo(t, base, "2", "1.27")
	chartRepo(t, head, "3", "1.28")
	out, errOut, code := runCLI(t, "diff", "--base", base, "--head", head, "--format", "json")
	if code != exitChanges {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Targets []struct {
			Path  string
			Notes []string
			PR    []struct {
				Kind, Name, Action string
				Fields             []struct {
					Path          string
					Base, Desired any
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Targets) != 1 || rep.Targets[0].Path != "apps/shop" {
		t.Fatalf("targets: %+v\n%s", rep.Targets, out)
	}
	changed := map[string]bool{}
	for _, c := range rep.Targets[0].PR {
		if c.Kind == "Deployment" && c.Name == "shop-web" {
			for _, f := range c.Fields {
				changed[f.Path] = true
			}
		}
	}
	if !changed[".spec.replicas"] || !changed[`.spec.template.spec.containers[name="web"].image`] {
		t.Errorf("the chart's Deployment does not show the release's and the chart's changes: %v\n%s", changed, out)
	}
	notes := strings.Join(rep.Targets[0].Notes, "\n")
	for _, want := range []string{"Helm's default", "HelmRelease/shop/shop: values: replicaCount 2 → 3"} {
		if !strings.Contains(notes, want) {
			t.Errorf("the notes do not say %q:\n%s", want, notes)
		}
	}

	// The chart alone changes: the path whose release installs it is
	// affected, and compared.
	head2 := filepath.Join(dir, "head2")
	chartRepo(t, head2, "2", "1.28")
	out, errOut, code = runCLI(t, "diff", "--base", base, "--head", head2, "--format", "json")
	if code != exitChanges || !strings.Contains(out, `"path": "apps/shop"`) || !strings.Contains(out, `"nginx:1.28"`) {
		t.Errorf("a change to the chart alone: exit %d, %s\n%s", code, errOut, out)
	}
}

// TestDiffInflatesHelmChartsWithEnableHelm: a kustomization's helmCharts
// (a chart in its charts/) is compared as kustomize build --enable-helm
// builds it; without the flag it is not compared, and says why.
func TestDiffInflatesHelmChartsWithEnableHelm(t *testing.T) {
	dir := t.TempDir()
	for side, replicas := range map[string]string{"base": "2", "head": "4"} {
		chart := filepath.Join(dir, side, "apps", "cache")
		writeTree(t, chart, map[string]string{
			"kustomization.yaml":       "namespace: cache\nhelmCharts:\n- name: redis\n  releaseName: cache\n  valuesInline: {replicas: " + replicas + "}\n",
			"charts/redis/Chart.yaml":  "apiVersion: v2\nname: redis\nversion: 0.1.0\n",
			"charts/redis/values.yaml": "replicas: 1\n",
			"charts/redis/templates/s.yaml": "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: '{{ .Release.Name }}-redis'}\nspec:\n  replicas: {{ .Values.replicas }}\n  serviceName: redis\n" +
				"  selector: {matchLabels: {app: redis}}\n  template:\n    metadata: {labels: {app: redis}}\n    spec: {containers: [{name: redis, image: redis}]}\n",
		})
	}
	out, errOut, code := runCLI(t, "diff", "--base", filepath.Join(dir, "base"), "--head", filepath.Join(dir, "head"), "--enable-helm", "--format", "json")
	if code != exitChanges || !strings.Contains(out, `"name": "cache-redis"`) || !strings.Contains(out, `"path": ".spec.replicas"`) {
		t.Errorf("--enable-helm: exit %d, %s\n%s", code, errOut, out)
	}
	out, _, code = runCLI(t, "diff", "--base", filepath.Join(dir, "base"), "--head", filepath.Join(dir, "head"), "--format", "json")
	if code != exitError || !strings.Contains(out, "Helm charts are not rendered without --enable-helm") {
		t.Errorf("without --enable-helm: exit %d\n%s", code, out)
	}
}
