package drift_test

import (
	"context"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/internal/kubetest"
)

// cluster drives the shared test apiserver the way people and controllers do:
// server-side applies and updates under named field managers.
type cluster struct {
	t      *testing.T
	env    *kubetest.Env
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	env := kubetest.New(t)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, env: env, dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

func obj(t testing.TB, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func (c *cluster) res(u *unstructured.Unstructured) dynamic.ResourceInterface {
	c.t.Helper()
	gvk := u.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.mapper.Reset()
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	return c.dyn.Resource(m.Resource)
}

// apply server-side applies u as manager, forcing conflicts as GitOps appliers do.
func (c *cluster) apply(u *unstructured.Unstructured, manager string) *unstructured.Unstructured {
	c.t.Helper()
	b, err := json.Marshal(u.Object)
	if err != nil {
		c.t.Fatal(err)
	}
	force := true
	out, err := c.res(u).Patch(context.Background(), u.GetName(), types.ApplyPatchType, b,
		metav1.PatchOptions{FieldManager: manager, Force: &force})
	if err != nil {
		c.t.Fatalf("apply %s/%s as %s: %v", u.GetKind(), u.GetName(), manager, err)
	}
	return out
}

// edit reads the live object, changes it and writes it back with an Update, as
// `kubectl edit` does.
func (c *cluster) edit(u *unstructured.Unstructured, manager string, change func(*unstructured.Unstructured)) {
	c.t.Helper()
	live, err := c.res(u).Get(context.Background(), u.GetName(), metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	change(live)
	if _, err := c.res(u).Update(context.Background(), live, metav1.UpdateOptions{FieldManager: manager}); err != nil {
		c.t.Fatalf("update %s/%s as %s: %v", u.GetKind(), u.GetName(), manager, err)
	}
}

// scale sets replicas through the scale subresource, as `kubectl scale` and
// the HPA do.
func (c *cluster) scale(u *unstructured.Unstructured, manager string, replicas int64) {
	c.t.Helper()
	patch := []byte(`{"spec":{"replicas":` + jsonInt(replicas) + `}}`)
	if _, err := c.res(u).Patch(context.Background(), u.GetName(), types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: manager}, "scale"); err != nil {
		c.t.Fatalf("scale %s as %s: %v", u.GetName(), manager, err)
	}
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
