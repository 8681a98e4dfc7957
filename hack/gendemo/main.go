// Command gendemo regenerates fixtures/demo/live: it renders the demo's base
// overlays, applies them to a real kube-apiserver as Flux would
// (kustomize-controller, server-side apply), changes the cluster the way people
// and controllers do, and dumps the result with managedFields, as
// `kubectl get -o yaml --show-managed-fields` would.
//
// Run from the repository root after `make testbin`:
//
//	KUBEBUILDER_ASSETS=$(hack/testbin/build.sh 2>/dev/null | tail -1) go run ./hack/gendemo
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/render"
)

const demo = "fixtures/demo"

func main() {
	render.ServeChild()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gendemo:", err)
		os.Exit(1)
	}
}

type cluster struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func run() error {
	ctx := context.Background()
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("start the apiserver (set KUBEBUILDER_ASSETS): %w", err)
	}
	defer env.Stop()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	c := &cluster{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}

	// Git: the base branch, as the reconciler applied it.
	tree, err := render.DirTree(filepath.Join(demo, "base"))
	if err != nil {
		return err
	}
	res, err := render.New(render.Options{}).Render(ctx, tree, render.Discover(tree))
	if err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	for _, o := range res.Overlays {
		if err := o.Err(); err != nil {
			return err
		}
		got, err := o.Objects()
		if err != nil {
			return err
		}
		objs = append(objs, got...)
	}
	// Namespaces and CRDs first, as a reconciler orders them.
	sort.SliceStable(objs, func(i, j int) bool { return rank(objs[i]) < rank(objs[j]) })
	for _, o := range objs {
		if err := c.apply(ctx, o, "kustomize-controller"); err != nil {
			return err
		}
		if o.GetKind() == "CustomResourceDefinition" {
			time.Sleep(2 * time.Second) // served and published
			c.mapper.Reset()
		}
	}

	// The cluster's own doings: volumes bound to the claims, the HPA scaling.
	for _, pv := range []struct{ name, size, policy, claim string }{
		{"pv-uploads", "20Gi", "Retain", "uploads"},
		{"pv-cache", "5Gi", "Delete", "cache"},
	} {
		v := obj(fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: %s
spec:
  capacity: {storage: %s}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: %s
  storageClassName: standard
  hostPath: {path: /data/%s}
  claimRef: {namespace: shop-prod, name: %s}
`, pv.name, pv.size, pv.policy, pv.claim, pv.claim))
		if err := c.apply(ctx, v, "csi-provisioner"); err != nil {
			return err
		}
		if err := c.update(ctx, "v1", "PersistentVolumeClaim", "shop-prod", pv.claim, "kube-controller-manager", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, pv.name, "spec", "volumeName")
		}); err != nil {
			return err
		}
	}
	for _, ns := range []string{"shop-prod", "shop-staging"} {
		if err := c.scale(ctx, ns, "api", "kube-controller-manager", 4); err != nil {
			return err
		}
	}

	// People: an incident scale-up in production that stayed, debug logging
	// switched on by hand in staging, a widget and preview notes made by hand.
	if err := c.scale(ctx, "shop-prod", "web", "kubectl", 5); err != nil {
		return err
	}
	if err := c.update(ctx, "apps/v1", "Deployment", "shop-staging", "web", "kubectl-edit", func(u *unstructured.Unstructured) {
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		cs[0].(map[string]any)["env"] = []any{map[string]any{"name": "LOG_LEVEL", "value": "debug"}}
		_ = unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers")
	}); err != nil {
		return err
	}
	for _, y := range []string{
		"apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: red\n  namespace: shop-staging\nspec:\n  size: 1\n  color: red\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: preview-notes\n  namespace: shop-preview\ndata:\n  owner: alice\n",
		"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: preview-db\n  namespace: shop-preview\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests: {storage: 1Gi}\n",
	} {
		if err := c.create(ctx, obj(y), "kubectl-create"); err != nil {
			return err
		}
	}

	return c.dump(ctx, filepath.Join(demo, "live"))
}

func rank(o *unstructured.Unstructured) int {
	switch o.GetKind() {
	case "Namespace":
		return 0
	case "CustomResourceDefinition":
		return 1
	}
	return 2
}

func obj(y string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		panic(err) // the literals above are fixed
	}
	return u
}

func (c *cluster) res(apiVersion, kind, ns string) (dynamic.ResourceInterface, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	m, err := c.mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource).Namespace(ns), nil
	}
	return c.dyn.Resource(m.Resource), nil
}

func (c *cluster) apply(ctx context.Context, u *unstructured.Unstructured, manager string) error {
	r, err := c.res(u.GetAPIVersion(), u.GetKind(), u.GetNamespace())
	if err != nil {
		return err
	}
	b, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	force := true
	_, err = r.Patch(ctx, u.GetName(), types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: manager, Force: &force})
	return err
}

func (c *cluster) create(ctx context.Context, u *unstructured.Unstructured, manager string) error {
	r, err := c.res(u.GetAPIVersion(), u.GetKind(), u.GetNamespace())
	if err != nil {
		return err
	}
	_, err = r.Create(ctx, u, metav1.CreateOptions{FieldManager: manager})
	return err
}

func (c *cluster) update(ctx context.Context, apiVersion, kind, ns, name, manager string, change func(*unstructured.Unstructured)) error {
	r, err := c.res(apiVersion, kind, ns)
	if err != nil {
		return err
	}
	u, err := r.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	change(u)
	_, err = r.Update(ctx, u, metav1.UpdateOptions{FieldManager: manager})
	return err
}

func (c *cluster) scale(ctx context.Context, ns, name, manager string, replicas int) error {
	r, err := c.res("apps/v1", "Deployment", ns)
	if err != nil {
		return err
	}
	_, err = r.Patch(ctx, name, types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)),
		metav1.PatchOptions{FieldManager: manager}, "scale")
	return err
}

// dump writes every object of the demo's namespaces, and the cluster-scoped
// objects they use, as kubectl would print them.
func (c *cluster) dump(ctx context.Context, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	type file struct {
		name  string
		items []any
	}
	files := map[string]*file{}
	add := func(name string, u *unstructured.Unstructured) {
		f, ok := files[name]
		if !ok {
			f = &file{name: name}
			files[name] = f
		}
		f.items = append(f.items, u.Object)
	}
	kinds := []struct{ apiVersion, kind string }{
		{"v1", "Namespace"}, {"apiextensions.k8s.io/v1", "CustomResourceDefinition"}, {"v1", "PersistentVolume"},
		{"rbac.authorization.k8s.io/v1", "ClusterRole"},
		{"v1", "ConfigMap"}, {"v1", "Secret"}, {"v1", "Service"}, {"v1", "PersistentVolumeClaim"},
		{"apps/v1", "Deployment"}, {"autoscaling/v2", "HorizontalPodAutoscaler"}, {"example.com/v1", "Widget"},
	}
	demoNS := map[string]bool{"shop-prod": true, "shop-staging": true, "shop-preview": true}
	for _, k := range kinds {
		r, err := c.res(k.apiVersion, k.kind, "")
		if err != nil {
			return err
		}
		l, err := r.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range l.Items {
			u := &l.Items[i]
			ns := u.GetNamespace()
			switch {
			case ns != "" && demoNS[ns]:
				add(ns+".yaml", u)
			case ns == "" && (demoNS[u.GetName()] || strings.HasPrefix(u.GetName(), "pv-") || strings.HasSuffix(u.GetName(), ".example.com")):
				add("cluster.yaml", u)
			}
		}
	}
	// The kinds read whole: one of them with no object in the folder has
	// none live (livestate.DumpIndexFile).
	index := livestate.DumpIndex{APIVersion: "driftback.io/v1", Kind: "Dump"}
	for _, k := range kinds {
		group, _, ok := strings.Cut(k.apiVersion, "/")
		if !ok {
			group = ""
		}
		index.Kinds = append(index.Kinds, strings.TrimPrefix(group+"/"+k.kind, "/"))
	}
	b, err := yaml.Marshal(index)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, livestate.DumpIndexFile), b, 0o644); err != nil {
		return err
	}
	for _, f := range files {
		list := map[string]any{"apiVersion": "v1", "kind": "List", "items": f.items, "metadata": map[string]any{"resourceVersion": ""}}
		b, err := yaml.Marshal(list)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
