package deploy_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/internal/testfs"
	"github.com/driftback/driftback/render/helm"
)

// templateChart renders the chart as `helm template driftback
// deploy/chart/driftback -n driftback` does, with the Helm SDK.
func templateChart(t *testing.T, values map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	r, err := helm.Template(context.Background(), testfs.Read(t, filepath.Join("chart", "driftback")), values, helm.Options{ReleaseName: "driftback", Namespace: "driftback", KubeVersion: "1.37.0"})
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(r.Manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out, nil
}

// TestTheChartRendersWhatKustomizeDoes: the chart, given what the example
// overlay gives (its app.yml, image tag, Ingress, the Namespace), renders
// the objects `kustomize build deploy/overlays/example` does, field for
// field, but for the objects' own labels (the chart gives every object
// deploy/base's and Helm's), the checksum that rolls the pods, and the
// ConfigMap's name, which kustomize suffixes with a hash.
// With audit.enabled, it renders what the example overlay with the audit
// component does. With dryRun.enabled it adds what the dry-run component adds. Without
// app.yml it refuses to render.
func TestTheChartRendersWhatKustomizeDoes(t *testing.T) {
	appYML, err := os.ReadFile(filepath.Join("overlays", "example", "app.yml"))
	if err != nil {
		t.Fatal(err)
	}
	values := func(dryRun bool, audit ...bool) map[string]any {
		return map[string]any{
			"config":    string(appYML),
			"image":     map[string]any{"tag": "v0.1.0"},
			"namespace": map[string]any{"create": true},
			"ingress":   map[string]any{"enabled": true},
			"dryRun":    map[string]any{"enabled": dryRun},
			"audit":     map[string]any{"enabled": len(audit) > 0 && audit[0]},
		}
	}
	normal := func(objs []*unstructured.Unstructured) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, o := range objs {
			o = o.DeepCopy()
			// The chart labels every object alike (checked below);
			// kustomize leaves what an overlay or component adds unlabelled.
			o.SetLabels(nil)
			if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "driftback-config") {
				o.SetName("driftback-config")
			}
			if o.GetKind() == "Deployment" {
				unstructured.RemoveNestedField(o.Object, "spec", "template", "metadata", "annotations")
				vols, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
				for _, v := range vols {
					if cm, ok := v.(map[string]any)["configMap"].(map[string]any); ok {
						cm["name"] = "driftback-config"
					}
				}
				_ = unstructured.SetNestedSlice(o.Object, vols, "spec", "template", "spec", "volumes")
			}
			out[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o.Object
		}
		return out
	}
	for _, tc := range []struct {
		overlay       string
		dryRun, audit bool
	}{{"overlays/example", false, false}, {"test/audit", false, true}} {
		want := normal(renderOverlay(t, tc.overlay))
		objs, err := templateChart(t, values(tc.dryRun, tc.audit))
		if err != nil {
			t.Fatal(err)
		}
		got := normal(objs)
		for k, w := range want {
			switch g, ok := got[k]; {
			case !ok:
				t.Errorf("%s: kustomize renders it, the chart does not", k)
			case !reflect.DeepEqual(g, w):
				t.Errorf("%s differs:\nchart:     %v\nkustomize: %v", k, g, w)
			}
		}
		for k := range got {
			if want[k] == nil {
				t.Errorf("%s: the chart renders it, kustomize does not", k)
			}
		}
	}
	// The dry-run component's objects, and nothing else, with dryRun.
	objs, err := templateChart(t, values(true))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := templateChart(t, values(false))
	extra := normal(objs)
	for k := range normal(plain) {
		delete(extra, k)
	}
	component := normal(renderOverlay(t, "test/dry-run"))
	if len(extra) != 2 {
		t.Errorf("dryRun adds %d objects, want the component's ClusterRole and binding", len(extra))
	}
	for k, g := range extra {
		if !reflect.DeepEqual(g, component[k]) {
			t.Errorf("%s differs from the dry-run component's:\nchart:     %v\nkustomize: %v", k, g, component[k])
		}
	}
	for _, o := range objs {
		if l := o.GetLabels(); l["app.kubernetes.io/part-of"] != "driftback" || l["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("%s/%s is labelled %v", o.GetKind(), o.GetName(), l)
		}
	}
	if _, err := templateChart(t, map[string]any{}); err == nil || !strings.Contains(err.Error(), "config (app.yml's content) is required") {
		t.Errorf("without app.yml: %v", err)
	}
}

// TestTheChartPassesHelmLint: `helm lint --strict` of the built helm finds
// nothing to say of the chart.
func TestTheChartPassesHelmLint(t *testing.T) {
	dir := os.Getenv("DRIFTBACK_HELM")
	if dir == "" {
		if kubetest.InCI() {
			t.Fatal("DRIFTBACK_HELM is not set: make test builds helm (hack/helm/build.sh) and sets it")
		}
		t.Skip("DRIFTBACK_HELM is not set (make test builds helm)")
	}
	cmd := exec.Command(filepath.Join(dir, "helm"), "lint", "--strict", filepath.Join("chart", "driftback"), "--set", "config=github: {appID: 1}")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("helm lint --strict: %v\n%s", err, out)
	}
}

// TestTheAuditComponentLetsReplicasReachEachOther: with the audit
// component, the pods may receive on the audit port and send to each
// other's: a replica carries its share of the apiserver's batches to the
// one running the cluster's drift loop, which the base's egress (DNS,
// HTTPS, the apiserver) would block.
func TestTheAuditComponentLetsReplicasReachEachOther(t *testing.T) {
	var in, out bool
	for _, o := range renderOverlay(t, "test/audit") {
		if o.GetKind() != "NetworkPolicy" {
			continue
		}
		rules := func(dir string) []any { r, _, _ := unstructured.NestedSlice(o.Object, "spec", dir); return r }
		hasPort := func(rule map[string]any) bool {
			ports, _, _ := unstructured.NestedSlice(rule, "ports")
			for _, p := range ports {
				if fmt.Sprint(p.(map[string]any)["port"]) == "8444" {
					return true
				}
			}
			return false
		}
		for _, r := range rules("ingress") {
			in = in || hasPort(r.(map[string]any))
		}
		for _, r := range rules("egress") {
			rule := r.(map[string]any)
			to, _, _ := unstructured.NestedSlice(rule, "to")
			for _, peer := range to {
				if name, _, _ := unstructured.NestedString(peer.(map[string]any), "podSelector", "matchLabels", "app.kubernetes.io/name"); name == "driftback" && hasPort(rule) {
					out = true
				}
			}
		}
	}
	if !in || !out {
		t.Errorf("the audit port: received %v, sent to the other replicas %v; want both", in, out)
	}
}
