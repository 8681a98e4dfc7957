package app

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/testfs"

	"github.com/driftback/driftback/reconcile"
	"github.com/driftback/driftback/reconcile/hide"

	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/render"
)

// TestDiscoveredFluxTargetRendersAsKustomizeController: a Kustomization
// read from the apiserver, with patches, targetNamespace and postBuild
// variables from a live ConfigMap and Secret, renders to exactly what
// kustomize-controller's library builds from the same repository with the
// same cluster.
func TestDiscoveredFluxTargetRendersAsKustomizeController(t *testing.T) {
	t.Parallel()
	env := kubetest.New(t)
	kubetest.InstallCRDs(t, env, kubetest.ReconcilerCRDs(t)...)
	ns := env.Namespace
	for _, y := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: vars, namespace: NS}\ndata: {CLUSTER_NAME: prod-eu-1, REPLICAS: '4'}\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: NS}\nstringData: {TOKEN: tok-canary-7781}\n",
		"apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: fleet, namespace: NS}\nspec: {interval: 1m, url: 'https://github.com/acme/gitops', ref: {branch: main}}\n",
		`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: NS}
spec:
  interval: 10m
  prune: false
  path: ./apps
  sourceRef: {kind: GitRepository, name: fleet}
  targetNamespace: shop
  patches:
  - patch: '[{"op": "add", "path": "/spec/template/metadata/labels/patched", "value": "yes"}]'
    target: {kind: Deployment}
  postBuild:
    substitute: {REGION: eu-west-1}
    substituteFrom:
    - {kind: ConfigMap, name: vars}
    - {kind: Secret, name: creds}
    - {kind: Secret, name: absent, optional: true}
`,
	} {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(strings.ReplaceAll(y, "NS", ns)), &u.Object); err != nil {
			t.Fatal(err)
		}
		kubetest.Apply(t, env.Setup, "kubectl", u)
	}
	files := map[string]string{
		"apps/web.yaml":              "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: ${REPLICAS}\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      - name: web\n        image: web:1\n        env:\n        - {name: CLUSTER, value: '${CLUSTER_NAME}-${REGION}'}\n        - {name: TOKEN, value: '${TOKEN}'}\n",
		"apps/db/kustomization.yaml": "resources: [db.yaml]\n",
		"apps/db/db.yaml":            "apiVersion: v1\nkind: Service\nmetadata: {name: db}\nspec: {ports: [{port: 5432}]}\n",
	}
	dir := t.TempDir()
	testfs.Write(t, dir, files)
	tree, err := render.DirTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	found, problems, err := discover.List(context.Background(), env.Config, discover.Options{Flux: true, Namespaces: []string{ns},
		Settings: discover.Settings{On: "prod", Host: "github.com"}})
	if err != nil || len(problems) > 0 || len(found) != 1 {
		t.Fatal(err, problems, found)
	}

	kubeconfig := writeKubeconfigFile(t, env, filepath.Join(t.TempDir(), "kubeconfig"))
	cfg := parseTestConfig(t, "clusters:\n  prod:\n    kubeconfig: "+kubeconfig+"\n    discover: {flux: true}\n")
	a := NewApp(cfg, nil, nil, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	ts, _ := targets.Merge(cfg, found)
	vars := reconcile.Variables(context.Background(), ts[0].Build(), true, a.kubeClient)
	if vars.Skip || vars.Note != "" || len(vars.Hidden) != 1 || vars.Hidden[0] != "tok-canary-7781" {
		t.Fatalf("variables: skip %v, note %q, hidden %d", vars.Skip, vars.Note, len(vars.Hidden))
	}
	b := reconcile.Build(context.Background(), render.New(render.Options{}), tree, ts[0].Build(), vars)
	if len(b.Problems) > 0 {
		t.Fatal(b.Problems)
	}

	// kustomize-controller, on disk, with its client reading the cluster.
	root := t.TempDir()
	testfs.Write(t, root, files)
	ks := *found[0].Flux
	if _, err := fluxkustomize.NewGenerator(root, ks).WriteFile(filepath.Join(root, "apps")); err != nil {
		t.Fatal(err)
	}
	m, err := fluxkustomize.SecureBuild(root, filepath.Join(root, "apps"), false)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var want []*unstructured.Unstructured
	for _, res := range m.Resources() {
		done, err := fluxkustomize.SubstituteVariables(context.Background(), kc, ks, res, fluxkustomize.SubstituteWithStrict(true))
		if err != nil {
			t.Fatal(err)
		}
		obj, err := done.Map()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, &unstructured.Unstructured{Object: obj})
	}
	ssautil.SetCommonMetadata(want, map[string]string{"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": ns}, nil)
	// kustomize-controller sends these as JSON: the apiserver reads kyaml's
	// Go ints as the JSON numbers driftback compares.
	if want, err = object.Typed(want); err != nil {
		t.Fatal(err)
	}
	// The fields a Secret's variable sets are driftback's stand-in, never
	// the value (a comparison would tell whether a guess is right): they,
	// and only they, differ from kustomize-controller's.
	gitOnly := hide.GitOnlyFields(b.GitOnly)
	standIns := 0
	for _, w := range want {
		for _, g := range b.Objects {
			if g.GetKind() != w.GetKind() || g.GetName() != w.GetName() || gitOnly == nil {
				continue
			}
			for _, p := range gitOnly(g) {
				if got := object.ValueAt(g.Object, p); got != "xxxxxxxxxxxxxxxx" || object.ValueAt(w.Object, p) == got {
					t.Errorf("%s %s: driftback renders %v where kustomize-controller renders the Secret's value: want its stand-in", g.GetName(), p, got)
				}
				set, err := object.SetValueAt(w.Object, p, object.ValueAt(g.Object, p))
				if err != nil {
					t.Fatal(err)
				}
				w.Object = set.(map[string]any)
				standIns++
			}
		}
	}
	if standIns == 0 {
		t.Error("no field is a Secret's stand-in: the Secret's variable is not in the test")
	}
	index := func(objs []*unstructured.Unstructured) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, o := range objs {
			out[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o.Object
		}
		return out
	}
	if diff := cmp.Diff(index(want), index(b.Objects)); diff != "" {
		t.Errorf("driftback's render differs from kustomize-controller's (-want +got)\n%s", diff)
	}
	if len(b.Objects) != 2 {
		t.Errorf("%d objects, want the Deployment and the nested Service", len(b.Objects))
	}
}

// writeKubeconfigFile writes a kubeconfig reaching the test's apiserver as
// its administrator.
func writeKubeconfigFile(t testing.TB, env *kubetest.Env, path string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
