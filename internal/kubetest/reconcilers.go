package kubetest

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// ReconcilerCRDs are minimal CustomResourceDefinitions of the kinds GitOps
// reconcilers keep their configuration in: Flux's Kustomization and
// GitRepository, Argo CD's Application. They accept any spec, as the real
// ones accept what driftback reads.
var ReconcilerCRDs = []string{
	reconcilerCRD("kustomize.toolkit.fluxcd.io", "v1", "Kustomization", "kustomizations"),
	reconcilerCRD("source.toolkit.fluxcd.io", "v1", "GitRepository", "gitrepositories"),
	reconcilerCRD("argoproj.io", "v1alpha1", "Application", "applications"),
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
		version, _, _ := unstructured.NestedString(versions[0].(map[string]any), "name")
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
