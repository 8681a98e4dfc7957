package drift_test

import (
	"context"
	"encoding/json"
	"fmt"
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
	t      testing.TB
	env    *kubetest.Env
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	return clusterOn(t, kubetest.New(t))
}

func clusterOn(t testing.TB, env *kubetest.Env) *cluster {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.Setup)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(env.Setup)
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

func (c *cluster) res(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.mapper.Reset()
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource).Namespace(u.GetNamespace()), nil
	}
	return c.dyn.Resource(m.Resource), nil
}

// delete removes u, for the cleanup of objects outside the test's namespace.
func (c *cluster) delete(u *unstructured.Unstructured) {
	r, err := c.res(u)
	if err == nil {
		err = r.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
	}
	if err != nil {
		c.t.Logf("clean up %s: %v", u.GetName(), err)
	}
}

// apply server-side applies u as manager, forcing conflicts as GitOps appliers do.
func (c *cluster) apply(u *unstructured.Unstructured, manager string) {
	c.t.Helper()
	if err := c.tryApply(u, manager); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) tryApply(u *unstructured.Unstructured, manager string) error {
	r, err := c.res(u)
	if err != nil {
		return err
	}
	b, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	force := true
	if _, err := r.Patch(context.Background(), u.GetName(), types.ApplyPatchType, b,
		metav1.PatchOptions{FieldManager: manager, Force: &force}); err != nil {
		return fmt.Errorf("apply %s/%s as %s: %w", u.GetKind(), u.GetName(), manager, err)
	}
	return nil
}

// edit reads the live object, changes it and writes it back with an Update, as
// `kubectl edit` does.
func (c *cluster) edit(u *unstructured.Unstructured, manager string, change func(*unstructured.Unstructured)) {
	c.t.Helper()
	if err := c.tryEdit(u, manager, change); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) tryEdit(u *unstructured.Unstructured, manager string, change func(*unstructured.Unstructured)) error {
	r, err := c.res(u)
	if err != nil {
		return err
	}
	live, err := r.Get(context.Background(), u.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	change(live)
	if _, err := r.Update(context.Background(), live, metav1.UpdateOptions{FieldManager: manager}); err != nil {
		return fmt.Errorf("update %s/%s as %s: %w", u.GetKind(), u.GetName(), manager, err)
	}
	return nil
}

// scale sets replicas through the scale subresource, as `kubectl scale` and
// the HPA do.
func (c *cluster) scale(u *unstructured.Unstructured, manager string, replicas int64) {
	c.t.Helper()
	if err := c.tryScale(u, manager, replicas); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) tryScale(u *unstructured.Unstructured, manager string, replicas int64) error {
	r, err := c.res(u)
	if err != nil {
		return err
	}
	patch := []byte(`{"spec":{"replicas":` + jsonInt(replicas) + `}}`)
	if _, err := r.Patch(context.Background(), u.GetName(), types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: manager}, "scale"); err != nil {
		return fmt.Errorf("scale %s as %s: %w", u.GetName(), manager, err)
	}
	return nil
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
