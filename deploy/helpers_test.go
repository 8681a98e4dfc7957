package deploy_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/render"
)

func TestMain(m *testing.M) {
	render.ServeChild() // this test binary is also the render child
	os.Exit(kubetest.Main(m))
}

const fieldManager = "driftback-deploy-test"

// withDryRun is an overlay, added in memory only, that opts the base into the
// dry-run component the way an operator's overlay would.
const withDryRun = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../base
components:
  - ../../components/dry-run
`

// withAudit is the example overlay with the audit component, added in
// memory only.
const withAudit = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../overlays/example
components:
  - ../../components/audit
`

// renderOverlay renders an overlay of this directory (deploy/) with driftback's
// own renderer. "test/dry-run" is the base with the dry-run component;
// "test/audit" the example overlay with the audit component.
func renderOverlay(t *testing.T, overlay string) []*unstructured.Unstructured {
	t.Helper()
	tree, err := render.DirTree(".")
	if err != nil {
		t.Fatal(err)
	}
	tree = tree.With(map[string][]byte{"test/dry-run/kustomization.yaml": []byte(withDryRun), "test/audit/kustomization.yaml": []byte(withAudit)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := render.New(render.DefaultOptions()).Render(ctx, tree, []string{overlay})
	if err != nil {
		t.Fatal(err)
	}
	o := res.Overlays[0]
	if err := o.Err(); err != nil {
		t.Fatalf("render %s: %v", overlay, err)
	}
	objs, err := o.Objects()
	if err != nil {
		t.Fatalf("render %s: %v", overlay, err)
	}
	if len(objs) == 0 {
		t.Fatalf("render %s: no objects", overlay)
	}
	return objs
}

// find returns the rendered object of kind and name.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s/%s among the rendered objects", kind, name)
	return nil
}

// warnings collects the Warning headers of the apiserver's responses.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.list...)
}

// cluster reaches the apiserver as one user, mapping kinds to resources.
type cluster struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	warned *warnings
}

func newCluster(t *testing.T, cfg *rest.Config) *cluster {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	w := &warnings{}
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = w
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), warned: w}
}

// resource is the client for obj's kind in obj's namespace.
func (c *cluster) resource(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", gvk.Kind, obj.GetName(), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	return c.dyn.Resource(m.Resource), nil
}

// apply applies obj server-side, forcing ownership; dryRun asks for a dry run.
func (c *cluster) apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	r, err := c.resource(obj)
	if err != nil {
		return err
	}
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = r.Apply(ctx, obj.GetName(), obj, opts)
	if err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// applyAll applies objs, Namespaces first, and returns the warnings the
// apiserver sent while doing so.
func applyAll(t *testing.T, c *cluster, objs []*unstructured.Unstructured) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ordered := append([]*unstructured.Unstructured(nil), objs...)
	sort.SliceStable(ordered, func(i, j int) bool {
		return ordered[i].GetKind() == "Namespace" && ordered[j].GetKind() != "Namespace"
	})
	before := len(c.warned.all())
	for _, o := range ordered {
		if err := c.apply(ctx, o, false); err != nil {
			t.Fatal(err)
		}
	}
	return c.warned.all()[before:]
}

// eventually retries check until it returns nil: RBAC changes reach the
// apiserver's authorizer through an informer, a moment after they are stored.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = check(); err == nil {
			return
		}
	}
	t.Fatalf("%s: %v", what, err)
}

// object parses one object from YAML.
func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	objs, err := render.ParseObjects([]byte(doc))
	if err != nil || len(objs) != 1 {
		t.Fatalf("parse %q: %d objects, %v", doc, len(objs), err)
	}
	return objs[0]
}

var (
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	configMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets     = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	namespaces  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	crds        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	roles       = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	bindings    = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
	leases      = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
)
