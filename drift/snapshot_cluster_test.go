package drift_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/kubetest"
)

// requestLog counts the requests a client makes, by method and path.
type requestLog struct {
	mu    sync.Mutex
	paths []string
}

func (l *requestLog) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			// The next page of a list is the same list: other tests' objects
			// on the shared apiserver may make a cluster-wide one paginate.
			if r.URL.Query().Get("continue") == "" {
				l.mu.Lock()
				l.paths = append(l.paths, r.Method+" "+r.URL.Path)
				l.mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

// count returns how many requests' paths end in suffix, a paginated list
// counted once.
func (l *requestLog) count(suffix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, p := range l.paths {
		if strings.HasSuffix(p, suffix) {
			n++
		}
	}
	return n
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// spread applies, as the GitOps applier, a Deployment and two ConfigMaps in
// each of n namespaces, and scales every Deployment by hand.
func spread(t *testing.T, c *cluster, n int) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for i := range n {
		ns := fmt.Sprintf("%s-%d", c.env.Namespace, i)
		c.apply(obj(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n"), "kustomize-controller")
		d := obj(t, inNS(fmt.Sprintf(webDeploymentNamed, i, i, i, i), ns))
		objs = append(objs, d,
			obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: %s\ndata:\n  k: \"%d\"\n", ns, i)),
			obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: %s\ndata:\n  k: \"%d\"\n", ns, i)))
	}
	for _, o := range objs {
		c.apply(o, "kustomize-controller")
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			c.scale(o, "kubectl", 7)
		}
	}
	return objs
}

// TestSnapshotListsEachKindOnce proves a comparison over many namespaces
// reads each kind with one cluster-wide list, never once per namespace or per
// object, and that comparing from the snapshot gives what comparing against
// the cluster directly gives.
func TestSnapshotListsEachKindOnce(t *testing.T) {
	c := newCluster(t)
	objs := spread(t, c, 6)
	ctx := context.Background()

	var log requestLog
	reader, err := livestate.NewClusterReader(log.wrap(c.env.Config))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := livestate.NewSnapshot(ctx, reader, objs)
	if err != nil {
		t.Fatal(err)
	}
	// Compare each namespace as its own target, as the overlays of a
	// repository are compared.
	var fromSnap []*drift.Target
	for i := 0; i < len(objs); i += 3 {
		tg, err := drift.Compare(ctx, snap, drift.Input{Path: objs[i].GetNamespace(), Head: objs[i : i+3]}, drift.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		fromSnap = append(fromSnap, tg)
	}
	if got := log.count("/deployments") + log.count("/configmaps"); got != 2 {
		t.Errorf("%d lists and gets of Deployments and ConfigMaps for 6 namespaces, want 2 (one cluster-wide list each):\n%s", got, strings.Join(log.paths, "\n"))
	}
	if got := log.count("/apis/apps/v1/deployments"); got != 1 {
		t.Errorf("Deployments listed cluster-wide %d times, want once", got)
	}
	// Who autoscales the Deployments (which Git gives replicas) is read with
	// them: one more cluster-wide list of each autoscaler kind served
	// (KEDA's too when another test installed its CRD).
	autoscalers := log.count("/horizontalpodautoscalers")
	if autoscalers != 1 {
		t.Errorf("HorizontalPodAutoscalers read %d times, want one cluster-wide list", autoscalers)
	}
	autoscalers += log.count("/scaledobjects")
	// So are the admission rules (drift/admission): the quotas and limit
	// ranges of the 6 namespaces, one cluster-wide list each; the
	// namespaces, the policies and their bindings, one list each.
	for _, kind := range []string{"/resourcequotas", "/limitranges", "/api/v1/namespaces", "/validatingadmissionpolicies", "/validatingadmissionpolicybindings"} {
		if got := log.count(kind); got != 1 {
			t.Errorf("%s read %d times, want one list", kind, got)
		}
	}
	if st := snap.Stats(); st.ClusterLists != 4+autoscalers || st.NamespaceLists != 3 || st.Gets != 0 {
		t.Errorf("stats %+v, want %d cluster-wide lists and 3 lists of cluster-scoped kinds", st, 4+autoscalers)
	}

	direct, err := livestate.NewClusterReader(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	drifted := 0
	for i, tg := range fromSnap {
		want, err := drift.Compare(ctx, direct, drift.Input{Path: tg.Path, Head: objs[i*3 : i*3+3]}, drift.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(jsonOf(t, want), jsonOf(t, tg)); diff != "" {
			t.Errorf("%s from the snapshot differs from a direct read (-direct +snapshot):\n%s", tg.Path, diff)
		}
		for _, ch := range tg.Changes {
			if ch.Action == drift.ActionUpdate {
				drifted++
			}
		}
	}
	if drifted != 6 {
		t.Errorf("%d updates, want the 6 scaled Deployments", drifted)
	}
}

// TestSnapshotFallsBackPerNamespace proves credentials that may only list in
// the target namespaces (a RoleBinding per namespace, no ClusterRole) still
// read everything: the refused cluster-wide list becomes one list per
// namespace, and the result is the same.
func TestSnapshotFallsBackPerNamespace(t *testing.T) {
	c := newCluster(t)
	objs := spread(t, c, 3)
	ctx := context.Background()
	var rbac []*unstructured.Unstructured
	rbac = append(rbac, obj(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: %s-reader
rules:
- apiGroups: ["", "apps"]
  resources: [configmaps, deployments]
  verbs: [get, list, watch]
`, c.env.Namespace)))
	for i := range 3 {
		rbac = append(rbac, obj(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: reader
  namespace: %s-%d
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %s-reader}
subjects:
- {kind: ServiceAccount, name: reader, namespace: %s}
`, c.env.Namespace, i, c.env.Namespace, c.env.Namespace)))
	}
	kubetest.Apply(t, c.env.Setup, "test", rbac...)

	var log requestLog
	reader, err := livestate.NewClusterReader(log.wrap(kubetest.Impersonate(c.env.Config, c.env.Namespace, "reader")))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := livestate.NewSnapshot(ctx, reader, objs)
	if err != nil {
		t.Fatal(err)
	}
	st := snap.Stats()
	if st.Forbidden != 2 || st.NamespaceLists != 6 {
		t.Errorf("stats %+v, want 2 refused cluster-wide lists and 6 lists by namespace", st)
	}
	tg, err := drift.Compare(ctx, snap, drift.Input{Path: "all", Head: objs}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	seen, updates := 0, 0
	for _, ch := range tg.Changes {
		if ch.Action != drift.ActionCreate {
			seen++
		}
		if ch.Action == drift.ActionUpdate {
			updates++
		}
	}
	if seen != len(objs) || updates != 3 {
		t.Errorf("%d of %d objects found live, %d updates; want all found and the 3 scaled Deployments", seen, len(objs), updates)
	}
}

// TestSnapshotReadsEachObjectAtItsVersion: a list returns a kind at its
// preferred version; objects a render names at another version (HPAs at
// autoscaling/v1, where the server prefers v2) are read at theirs.
func TestSnapshotReadsEachObjectAtItsVersion(t *testing.T) {
	c := newCluster(t)
	var objs []*unstructured.Unstructured
	for _, name := range []string{"a", "b"} {
		o := obj(t, fmt.Sprintf(`apiVersion: autoscaling/v1
kind: HorizontalPodAutoscaler
metadata:
  name: %s
  namespace: %s
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: %s}
  minReplicas: 1
  maxReplicas: 3
`, name, c.env.Namespace, name))
		c.apply(o, "kustomize-controller")
		objs = append(objs, o)
	}
	reader, err := livestate.NewClusterReader(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := livestate.NewSnapshot(context.Background(), reader, objs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := snap.Get(context.Background(), []object.Ref{object.RefOf(objs[0]), object.RefOf(objs[1])})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		l := got[object.RefOf(o).Key()]
		if l == nil || l.GetAPIVersion() != "autoscaling/v1" {
			t.Errorf("%s read as %v, want autoscaling/v1", o.GetName(), l)
		}
	}
}

// TestSnapshotGetsWhatItMayNotList: credentials that may get named objects
// but list nothing (a Role with resourceNames) still read them, one by one.
func TestSnapshotGetsWhatItMayNotList(t *testing.T) {
	c := newCluster(t)
	objs := spread(t, c, 3)
	var cms []*unstructured.Unstructured
	var rbac []*unstructured.Unstructured
	for i := range 3 {
		ns := fmt.Sprintf("%s-%d", c.env.Namespace, i)
		rbac = append(rbac, obj(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: named, namespace: %s}
rules:
- {apiGroups: [""], resources: [configmaps], resourceNames: [a, b], verbs: [get]}
`, ns)), obj(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: named, namespace: %s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: named}
subjects:
- {kind: ServiceAccount, name: named, namespace: %s}
`, ns, c.env.Namespace)))
	}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" {
			cms = append(cms, o)
		}
	}
	kubetest.Apply(t, c.env.Setup, "test", rbac...)
	reader, err := livestate.NewClusterReader(kubetest.Impersonate(c.env.Config, c.env.Namespace, "named"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := livestate.NewSnapshot(context.Background(), reader, cms)
	if err != nil {
		t.Fatalf("a snapshot of objects that may be got but not listed: %v", err)
	}
	got, err := snap.Get(context.Background(), refsOf(cms))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(cms) {
		t.Errorf("read %d of %d ConfigMaps", len(got), len(cms))
	}
}

func refsOf(objs []*unstructured.Unstructured) []object.Ref {
	out := make([]object.Ref, len(objs))
	for i, o := range objs {
		out[i] = object.RefOf(o)
	}
	return out
}
