package kubetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// ReconcilerCRDs are the CustomResourceDefinitions of the kinds GitOps
// reconcilers keep their configuration in, as the reconcilers ship them:
// Flux's Kustomization, GitRepository, OCIRepository, Bucket,
// HelmRepository and ExternalArtifact and Argo CD's Application and
// AppProject, read from the modules hack/testbin/crds.sh brings into the Go
// module cache (DRIFTBACK_RECONCILER_CRDS, which make test sets, or the
// script run here). Their schemas validate fixtures as a real cluster does.
// HelmRelease, whose module the proxy does not serve, is a schemaless one.
func ReconcilerCRDs(t testing.TB) []string {
	t.Helper()
	crdsOnce.Do(func() { crds, crdsErr = readReconcilerCRDs() })
	if crdsErr != nil {
		if InCI() {
			t.Fatalf("kubetest: %v", crdsErr)
		}
		t.Skipf("kubetest: %v (run `make test`; with CI set this fails)", crdsErr)
	}
	return append(append([]string{}, crds...), reconcilerCRD("helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases"))
}

var (
	crdsOnce sync.Once
	crds     []string
	crdsErr  error
)

func readReconcilerCRDs() ([]string, error) {
	list := os.Getenv("DRIFTBACK_RECONCILER_CRDS")
	if list == "" {
		root, err := moduleRoot()
		if err != nil {
			return nil, err
		}
		out, err := exec.Command(filepath.Join(root, "hack", "testbin", "crds.sh")).Output()
		if err != nil {
			return nil, fmt.Errorf("hack/testbin/crds.sh: %w", err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		list = lines[len(lines)-1]
	}
	var out []string
	for _, f := range strings.Split(list, ":") {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reconciler CRDs: %w", err)
		}
		out = append(out, string(b))
	}
	return out, nil
}

func reconcilerCRD(group, version, kind, plural string) string {
	return strings.NewReplacer("GROUP", group, "VERSION", version, "KIND", kind, "PLURAL", plural, "SINGULAR", strings.ToLower(kind)).Replace(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: PLURAL.GROUP
spec:
  group: GROUP
  names: {kind: KIND, listKind: KINDList, plural: PLURAL, singular: SINGULAR}
  scope: Namespaced
  versions:
  - name: VERSION
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`)
}

// InstallCRDs applies CustomResourceDefinitions (idempotent: tests of one
// binary share the apiserver) and waits until each one's kind is served and
// listable.
func InstallCRDs(t testing.TB, e *Env, manifests ...string) {
	t.Helper()
	installCRDs(t, e, manifests...)
}

// ArgoCDDefaultProject creates Argo CD's default AppProject in ns, as its
// install does: every source, destination and namespace.
func ArgoCDDefaultProject(t testing.TB, e *Env, ns string) {
	t.Helper()
	p := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: default}
spec:
  sourceRepos: ['*']
  sourceNamespaces: ['*']
  destinations: [{server: '*', namespace: '*'}, {name: '*', namespace: '*'}]
  clusterResourceWhitelist: [{group: '*', kind: '*'}]
`), &p.Object); err != nil {
		t.Fatal(err)
	}
	p.SetNamespace(ns)
	Apply(t, e.Setup, "kubetest", p)
}

func installCRDs(t testing.TB, e *Env, manifests ...string) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(e.Setup)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(e.Setup)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range manifests {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(m), &u.Object); err != nil {
			t.Fatal(err)
		}
		Apply(t, e.Setup, "kubetest", u)
		group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(u.Object, "spec", "names", "plural")
		versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
		var version string
		for _, v := range versions {
			if storage, _, _ := unstructured.NestedBool(v.(map[string]any), "storage"); storage {
				version, _, _ = unstructured.NestedString(v.(map[string]any), "name")
			}
		}
		gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
		deadline := time.Now().Add(60 * time.Second)
		for {
			served := false
			if list, err := dc.ServerResourcesForGroupVersion(gvr.GroupVersion().String()); err == nil {
				for _, r := range list.APIResources {
					served = served || r.Name == plural
				}
			}
			if served {
				if _, err := dyn.Resource(gvr).Namespace(e.Namespace).List(context.Background(), metav1.ListOptions{Limit: 1}); err == nil {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("kubetest: %s is not served a minute after its CRD was applied", gvr)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
