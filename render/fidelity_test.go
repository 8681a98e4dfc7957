package render_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/internal/testfs"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/render/helm"
)

// helmBinary is the helm make test builds (hack/helm/build.sh) of the
// version driftback's Helm SDK is, from DRIFTBACK_HELM. Outside CI the
// test is skipped without it; in CI it fails.
func helmBinary(tb testing.TB) string {
	dir := os.Getenv("DRIFTBACK_HELM")
	if dir == "" {
		if kubetest.InCI() {
			tb.Fatal("DRIFTBACK_HELM is not set: make test builds helm (hack/helm/build.sh) and sets it")
		}
		tb.Skip("DRIFTBACK_HELM is not set (make test builds helm): the comparison with helm template is not made")
	}
	return filepath.Join(dir, "helm")
}

// largeChart is the shape of a large public chart: n templates of a
// Deployment with its probes, resources and environment, each about 100
// lines rendered, through helpers and values.
func largeChart(n int) map[string][]byte {
	files := map[string][]byte{
		"Chart.yaml": []byte("apiVersion: v2\nname: large\nversion: 1.0.0\nappVersion: \"2.4.1\"\n"),
		"values.yaml": []byte(`image: {repository: registry.example.com/large, tag: ""}
replicaCount: 2
resources: {limits: {cpu: 500m, memory: 256Mi}, requests: {cpu: 100m, memory: 128Mi}}
env: {LOG_LEVEL: info, REGION: eu-west-1, FEATURE_A: "true", FEATURE_B: "false"}
`),
		"templates/_helpers.tpl": []byte(`{{- define "large.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}
`),
	}
	for i := range n {
		files[fmt.Sprintf("templates/component-%03d.yaml", i)] = []byte(fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-component-%03[1]d
  labels:
    {{- include "large.labels" . | nindent 4 }}
    component: "%03[1]d"
spec:
  replicas: {{ .Values.replicaCount }}
  selector:
    matchLabels:
      app.kubernetes.io/instance: {{ .Release.Name }}
      component: "%03[1]d"
  template:
    metadata:
      labels:
        {{- include "large.labels" . | nindent 8 }}
        component: "%03[1]d"
      annotations:
        checksum/values: {{ toYaml .Values | sha256sum }}
    spec:
      containers:
      - name: main
        image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
        args: ["--component", "%03[1]d", "--port", "8080"]
        ports:
        - {name: http, containerPort: 8080}
        - {name: metrics, containerPort: 9090}
        env:
        {{- range $k, $v := .Values.env }}
        - name: {{ $k }}
          value: {{ $v | quote }}
        {{- end }}
        livenessProbe:
          httpGet: {path: /healthz, port: http}
          initialDelaySeconds: 10
          periodSeconds: 10
        readinessProbe:
          httpGet: {path: /ready, port: http}
          periodSeconds: 5
        startupProbe:
          httpGet: {path: /healthz, port: http}
          failureThreshold: 30
          periodSeconds: 2
        securityContext:
          runAsNonRoot: true
          readOnlyRootFilesystem: true
          allowPrivilegeEscalation: false
          capabilities:
            drop: [ALL]
        resources:
          {{- toYaml .Values.resources | nindent 10 }}
        lifecycle:
          preStop:
            exec: {command: [/bin/sh, -c, sleep 5]}
        volumeMounts:
        - {name: config, mountPath: /etc/large}
        - {name: cache, mountPath: /var/cache/large}
      volumes:
      - name: config
        configMap: {name: {{ .Release.Name }}-config}
      - name: cache
        emptyDir: {}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}-component-%03[1]d
  labels:
    {{- include "large.labels" . | nindent 4 }}
spec:
  selector:
    app.kubernetes.io/instance: {{ .Release.Name }}
    component: "%03[1]d"
  ports:
  - {name: http, port: 80, targetPort: http}
  - {name: metrics, port: 9090, targetPort: metrics}
`, i))
	}
	return files
}

// fidelityCase is a chart and its values, rendered for one release.
type fidelityCase struct {
	name   string
	files  map[string][]byte
	values string
	opts   helm.Options
}

// fidelityCases are the fixture charts and values compared (their names
// have no comma: helm reads -f as a list).
func fidelityCases(t testing.TB) []fidelityCase {
	shop := testfs.Read(t, filepath.Join("helm", "testdata", "shop"))
	release := helm.Options{ReleaseName: "shop", Namespace: "prod", KubeVersion: "1.31.4"}
	withPDB := release
	withPDB.APIVersions = []string{"policy/v1", "policy/v1/PodDisruptionBudget"}
	return []fidelityCase{
		{"shop with its defaults", shop, "", release},
		{"shop with values over them and the subchart off", shop, "replicaCount: 4\ncache: {enabled: false}\nstorage: {size: 20Gi}\nimage: {tag: 9.9.9}\n", release},
		{"shop on a cluster with PodDisruptionBudgets", shop, "", withPDB},
		{"a large chart", largeChart(100), "replicaCount: 3\n", helm.Options{ReleaseName: "big", Namespace: "apps", KubeVersion: "1.33.0"}},
	}
}

// helmTemplate runs helm template on c and returns its objects (CRDs
// included, hooks not) and its hooks' kinds and names.
func helmTemplate(tb testing.TB, helmBin string, c fidelityCase) (objs []*unstructured.Unstructured, hooks []string) {
	dir := tb.TempDir()
	chart := filepath.Join(dir, "chart")
	for name, b := range c.files {
		p := filepath.Join(chart, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	values := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(values, []byte(c.values), 0o644); err != nil {
		tb.Fatal(err)
	}
	args := []string{"template", chart, "--name-template", c.opts.ReleaseName, "--namespace", c.opts.Namespace,
		"--kube-version", c.opts.KubeVersion, "-f", values, "--include-crds"}
	for _, v := range c.opts.APIVersions {
		args = append(args, "--api-versions", v)
	}
	run := func(extra ...string) []*unstructured.Unstructured {
		cmd := exec.Command(helmBin, append(args, extra...)...)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+dir, "HELM_CONFIG_HOME="+dir, "HELM_DATA_HOME="+dir)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			tb.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		parsed, err := render.ParseObjects(out)
		if err != nil {
			tb.Fatal(err)
		}
		return parsed
	}
	objs = run("--no-hooks")
	with := map[string]bool{}
	for _, o := range objs {
		with[key(o)] = true
	}
	for _, o := range run() {
		if !with[key(o)] {
			hooks = append(hooks, o.GetKind()+"/"+o.GetName())
		}
	}
	sort.Strings(hooks)
	return objs, hooks
}

func key(o *unstructured.Unstructured) string {
	return o.GetAPIVersion() + "/" + o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}

// TestChartsRenderAsHelmTemplateDoes: for each fixture chart and values,
// what driftback's render child gives (objects, crds/ and hooks) is what
// helm template of the same Helm version gives for the same inputs, object
// for object.
func TestChartsRenderAsHelmTemplateDoes(t *testing.T) {
	helmBin := helmBinary(t)
	r := render.New(render.Options{})
	for _, c := range fidelityCases(t) {
		t.Run(c.name, func(t *testing.T) {
			want, wantHooks := helmTemplate(t, helmBin, c)
			got, err := r.RenderChart(context.Background(), render.Chart{Name: c.name, Files: c.files, Values: []byte(c.values), Release: c.opts})
			if err != nil {
				t.Fatal(err)
			}
			if got.Problem != nil {
				t.Fatal(got.Problem)
			}
			mine := map[string]*unstructured.Unstructured{}
			for _, o := range append(append([]*unstructured.Unstructured{}, got.CRDs...), got.Objects...) {
				mine[key(o)] = o
			}
			if len(mine) != len(want) {
				t.Errorf("%d objects, helm template renders %d", len(mine), len(want))
			}
			for _, w := range want {
				m, ok := mine[key(w)]
				switch {
				case !ok:
					t.Errorf("%s: helm template renders it, driftback does not", key(w))
				case !reflect.DeepEqual(m.Object, w.Object):
					t.Errorf("%s differs:\ndriftback: %v\nhelm:      %v", key(w), m.Object, w.Object)
				}
			}
			var hooks []string
			for _, h := range got.Hooks {
				hooks = append(hooks, h.Kind+"/"+h.Name)
			}
			sort.Strings(hooks)
			if !reflect.DeepEqual(hooks, wantHooks) {
				t.Errorf("hooks %v, helm template's %v", hooks, wantHooks)
			}
		})
	}
}
