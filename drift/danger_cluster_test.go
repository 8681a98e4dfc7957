package drift_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/google/go-cmp/cmp"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
)

// compareOn runs a comparison of base and head against the test cluster.
func compareOn(t *testing.T, c *cluster, base, head []*unstructured.Unstructured, opts drift.Options) *drift.Target {
	t.Helper()
	reader, err := livestate.NewClusterReader(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	target, err := drift.Compare(context.Background(), reader, drift.Input{Path: "app", Base: base, Head: head, HasBase: true}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(target.Errors) > 0 {
		t.Fatalf("errors: %v", target.Errors)
	}
	return target
}

func findChange(t *testing.T, changes []drift.Change, kind, name string) drift.Change {
	t.Helper()
	for _, ch := range changes {
		if ch.Kind == kind && ch.Name == name {
			return ch
		}
	}
	t.Fatalf("no change for %s/%s among %+v", kind, name, changes)
	return drift.Change{}
}

func oneDanger(t *testing.T, ch drift.Change, reason drift.DangerReason, count int, says ...string) drift.Danger {
	t.Helper()
	if len(ch.Danger) != 1 {
		t.Fatalf("%s/%s: dangers %+v, want one %s", ch.Kind, ch.Name, ch.Danger, reason)
	}
	d := ch.Danger[0]
	if d.Reason != reason || d.Count != count {
		t.Errorf("%s/%s: danger %+v, want %s with count %d", ch.Kind, ch.Name, d, reason, count)
	}
	for _, s := range says {
		if !strings.Contains(d.Message, s) {
			t.Errorf("%s/%s: danger message %q does not say %q", ch.Kind, ch.Name, d.Message, s)
		}
	}
	return d
}

// TestCRDRemovalCountsCustomResources proves removing a CRD from Git is a
// danger whose blast radius is every custom resource of its kind, counted
// across namespaces on the live cluster.
func TestCRDRemovalCountsCustomResources(t *testing.T) {
	c := newCluster(t)
	other := newCluster(t)
	group := strings.ReplaceAll(c.env.Namespace, "-", "") + ".example.com"
	crd := obj(t, strings.ReplaceAll(widgetCRD, "GROUP", group))
	c.apply(crd, "kustomize-controller")
	waitForKind(t, c, group)
	for i, ns := range []string{c.env.Namespace, c.env.Namespace, other.env.Namespace} {
		c.apply(obj(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata:\n  name: w%d\n  namespace: %s\nspec:\n  size: 1\n", group, i, ns)), "someone")
	}
	target := compareOn(t, c, []*unstructured.Unstructured{crd}, nil, drift.DefaultOptions())
	ch := findChange(t, target.Changes, "CustomResourceDefinition", crd.GetName())
	if ch.Action != drift.ActionDelete {
		t.Fatalf("action %s", ch.Action)
	}
	d := oneDanger(t, ch, drift.DangerCRDRemoval, 3, "every Widget", "3 custom resources in 2 namespaces")
	// Each custom resource is named, with who made it: none is in Git.
	if len(d.Lost) != 3 {
		t.Fatalf("the CRD's removal names %d custom resources, want 3: %+v", len(d.Lost), d.Lost)
	}
	for _, l := range d.Lost {
		if l.Kind != "Widget" || l.InGit || l.CreatedBy != "someone" || l.Name == "" {
			t.Errorf("a lost custom resource: %+v, want a Widget made by someone, not in Git", l)
		}
	}
}

// TestNamespaceRemovalCountsItsObjects proves removing a Namespace counts what
// it holds, by kind, with claims called out.
func TestNamespaceRemovalCountsItsObjects(t *testing.T) {
	c := newCluster(t)
	ns := obj(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+c.env.Namespace+"\n")
	c.apply(ns, "kustomize-controller")
	for i := range 3 {
		c.apply(obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\n  namespace: %s\ndata: {k: v}\n", i, c.env.Namespace)), "kubectl")
	}
	pvName := "pv-" + c.env.Namespace
	c.apply(obj(t, "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: "+pvName+"\nspec:\n  capacity: {storage: 2Gi}\n  accessModes: [ReadWriteOnce]\n  persistentVolumeReclaimPolicy: Delete\n  hostPath: {path: /data}\n"), "kubectl")
	c.apply(obj(t, "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  namespace: "+c.env.Namespace+"\nspec:\n  accessModes: [ReadWriteOnce]\n  volumeName: "+pvName+"\n  resources:\n    requests: {storage: 1Gi}\n"), "kubectl")
	c.apply(obj(t, "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: pending\n  namespace: "+c.env.Namespace+"\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests: {storage: 1Gi}\n"), "kubectl")
	// c0 is in Git as well; the others were made on the cluster.
	inGit := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c0\n  namespace: "+c.env.Namespace+"\ndata: {k: v}\n")
	target := compareOn(t, c, []*unstructured.Unstructured{ns, inGit}, nil, drift.DefaultOptions())
	d := oneDanger(t, findChange(t, target.Changes, "Namespace", c.env.Namespace), drift.DangerNamespaceRemoval, 5,
		"5 objects", "2 PersistentVolumeClaims, 1 holding data, 3 ConfigMaps")
	// The objects are named: the claim holding data first, then what is in
	// no Git, then the rest; each with who made it.
	var got []string
	for _, l := range d.Lost {
		got = append(got, fmt.Sprintf("%s/%s git=%v by=%s %s", l.Kind, l.Name, l.InGit, l.CreatedBy, l.Detail))
	}
	want := []string{
		"PersistentVolumeClaim/data git=false by=kubectl bound to " + pvName + " (2Gi, Delete): its data is deleted",
		"ConfigMap/c1 git=false by=kubectl ",
		"ConfigMap/c2 git=false by=kubectl ",
		"PersistentVolumeClaim/pending git=false by=kubectl ",
		"ConfigMap/c0 git=true by=kubectl ",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the objects the namespace takes with it (-want +got):\n%s", diff)
	}
}

// TestVolumeRemovals proves a claim's removal names its bound volume with
// capacity and reclaim policy, a volume's removal says the same, and a
// StatefulSet's removal counts the claims of its templates.
func TestVolumeRemovals(t *testing.T) {
	c := newCluster(t)
	pvName := "pv-" + c.env.Namespace
	pv := obj(t, "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: "+pvName+"\nspec:\n  capacity: {storage: 8Gi}\n  accessModes: [ReadWriteOnce]\n  persistentVolumeReclaimPolicy: Delete\n  hostPath: {path: /data}\n")
	pvc := obj(t, "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  namespace: "+c.env.Namespace+"\nspec:\n  accessModes: [ReadWriteOnce]\n  volumeName: "+pvName+"\n  resources:\n    requests: {storage: 8Gi}\n")
	sts := obj(t, `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
  namespace: `+c.env.Namespace+`
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: postgres:17}]
  volumeClaimTemplates:
  - metadata: {name: pgdata}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
`)
	for _, o := range []*unstructured.Unstructured{pv, pvc, sts} {
		c.apply(o, "kustomize-controller")
	}
	for i := range 2 {
		c.apply(obj(t, fmt.Sprintf("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: pgdata-db-%d\n  namespace: %s\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests: {storage: 1Gi}\n", i, c.env.Namespace)), "statefulset-controller")
	}
	target := compareOn(t, c, []*unstructured.Unstructured{pv, pvc, sts}, nil, drift.DefaultOptions())
	oneDanger(t, findChange(t, target.Changes, "PersistentVolumeClaim", "data"), drift.DangerPVCRemoval, 1, "bound to "+pvName+" (8Gi, Delete): its data is deleted")
	oneDanger(t, findChange(t, target.Changes, "PersistentVolume", pvName), drift.DangerPVRemoval, 1, "(8Gi, Delete): its data is deleted")
	oneDanger(t, findChange(t, target.Changes, "StatefulSet", "db"), drift.DangerStatefulSetPVC, 2, "pgdata-db-0, pgdata-db-1")

	// A claim bound to no volume holds no data: removing it is no danger.
	pending := obj(t, "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: pending\n  namespace: "+c.env.Namespace+"\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests: {storage: 1Gi}\n")
	c.apply(pending, "kustomize-controller")
	unbound := compareOn(t, c, []*unstructured.Unstructured{pending}, nil, drift.DefaultOptions())
	if ch := findChange(t, unbound.Changes, "PersistentVolumeClaim", "pending"); ch.Action != drift.ActionDelete || len(ch.Danger) != 0 {
		t.Errorf("an unbound claim's removal: %s with dangers %+v, want a delete without danger", ch.Action, ch.Danger)
	}
}

// TestImmutableAndRBACDangers proves a changed Deployment selector and a
// Service clusterIP are flagged as changes a sync cannot apply, and that
// RBAC newly granting wildcards or cluster-admin is flagged, while RBAC that
// already had them live is not.
func TestImmutableAndRBACDangers(t *testing.T) {
	c := newCluster(t)
	ns := c.env.Namespace
	dep := obj(t, inNS(webDeployment, ns))
	// The service's address is the one the apiserver allocates (a fixed one
	// may be taken by another test's service), then written as Git has it.
	svc := obj(t, "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: "+ns+"\nspec:\n  selector: {app: web}\n  ports: [{port: 80}]\n")
	c.apply(svc, "kustomize-controller")
	ip, otherIP := allocatedIP(t, c, svc)
	_ = unstructured.SetNestedField(svc.Object, ip, "spec", "clusterIP")
	oldRole := obj(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: old-admin\n  namespace: "+ns+"\nrules:\n- apiGroups: [\"\"]\n  resources: [\"*\"]\n  verbs: [\"*\"]\n")
	for _, o := range []*unstructured.Unstructured{dep, svc, oldRole} {
		c.apply(o, "kustomize-controller")
	}
	headDep := dep.DeepCopy()
	_ = unstructured.SetNestedStringMap(headDep.Object, map[string]string{"app": "web", "tier": "front"}, "spec", "selector", "matchLabels")
	_ = unstructured.SetNestedStringMap(headDep.Object, map[string]string{"app": "web", "tier": "front"}, "spec", "template", "metadata", "labels")
	headSvc := svc.DeepCopy()
	_ = unstructured.SetNestedField(headSvc.Object, otherIP, "spec", "clusterIP")
	newRole := obj(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: "+ns+"-debug\nrules:\n- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [\"*\"]\n")
	binding := obj(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: "+ns+"-admins\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects:\n- {kind: Group, name: oncall, apiGroup: rbac.authorization.k8s.io}\n")

	base := []*unstructured.Unstructured{dep, svc, oldRole}
	head := []*unstructured.Unstructured{headDep, headSvc, oldRole, newRole, binding}
	target := compareOn(t, c, base, head, drift.DefaultOptions())
	oneDanger(t, findChange(t, target.Changes, "Deployment", "web"), drift.DangerImmutableField, 1, ".spec.selector")
	oneDanger(t, findChange(t, target.Changes, "Service", "web"), drift.DangerImmutableField, 1, ".spec.clusterIP")
	oneDanger(t, findChange(t, target.Changes, "ClusterRole", ns+"-debug"), drift.DangerRBACEscalation, 1, "verbs [*]")
	oneDanger(t, findChange(t, target.Changes, "ClusterRoleBinding", ns+"-admins"), drift.DangerRBACEscalation, 1, "cluster-admin to Group oncall")
	if ch := findChange(t, target.Changes, "Role", "old-admin"); len(ch.Danger) != 0 {
		t.Errorf("a role that already had its wildcards live is flagged: %+v", ch.Danger)
	}
	if d := findChange(t, target.Changes, "Deployment", "web").Danger[0]; d.Before {
		t.Error("the pull request changes the selector, yet the failing sync is marked as true before it")
	}

	// Git already holds the new selector and clusterIP at the base: the sync
	// fails whether or not this change merges. Not its doing.
	again := compareOn(t, c, []*unstructured.Unstructured{headDep, headSvc}, []*unstructured.Unstructured{headDep, headSvc}, drift.DefaultOptions())
	for _, name := range []string{"Deployment", "Service"} {
		d := oneDanger(t, findChange(t, again.Changes, name, "web"), drift.DangerImmutableField, 1)
		if !d.Before {
			t.Errorf("%s/web: the immutable field differs live only, yet the danger is not marked as true before", name)
		}
	}
	if n := again.Dangers()[drift.DangerImmutableField]; n != 0 {
		t.Errorf("%d immutable-field dangers counted for a change that does not touch them, want 0", n)
	}
}

// allocatedIP reads the cluster IP the apiserver gave a service, and
// returns another address of its range, which the service does not have.
func allocatedIP(t *testing.T, c *cluster, svc *unstructured.Unstructured) (string, string) {
	t.Helper()
	res, err := c.res(svc)
	if err != nil {
		t.Fatal(err)
	}
	live, err := res.Get(context.Background(), svc.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip, _, _ := unstructured.NestedString(live.Object, "spec", "clusterIP")
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		t.Fatalf("the service's cluster IP %q: %v", ip, err)
	}
	b := addr.As4()
	b[3] = b[3]%250 + 1
	if netip.AddrFrom4(b) == addr {
		b[3]++
	}
	return ip, netip.AddrFrom4(b).String()
}

// TestPruneOfTrackedObjects proves objects the reconciler tracks live (Flux
// labels here) and the head does not render are pruned even when the base
// render does not have them, and that the keep annotations turn a prune into
// "keep".
func TestPruneOfTrackedObjects(t *testing.T) {
	c := newCluster(t)
	ns := c.env.Namespace
	labels := "  labels:\n    kustomize.toolkit.fluxcd.io/name: shop\n    kustomize.toolkit.fluxcd.io/namespace: flux-system\n"
	for _, y := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: orphan\n  namespace: " + ns + "\n" + labels,
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept-flux\n  namespace: " + ns + "\n" + labels + "  annotations:\n    kustomize.toolkit.fluxcd.io/prune: disabled\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept-argo\n  namespace: " + ns + "\n" + labels + "  annotations:\n    argocd.argoproj.io/sync-options: Prune=false\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: untracked\n  namespace: " + ns + "\n",
	} {
		c.apply(obj(t, y), "kustomize-controller")
	}
	opts := drift.DefaultOptions()
	opts.Tracking = drift.Tracking{FluxName: "shop", FluxNamespace: "flux-system"}
	target := compareOn(t, c, nil, nil, opts)
	got := map[string]drift.Change{}
	for _, ch := range target.Changes {
		if ch.Namespace == ns {
			got[ch.Name] = ch
		}
	}
	if got["orphan"].Action != drift.ActionDelete {
		t.Errorf("orphan: %+v, want delete", got["orphan"])
	}
	if ch := got["kept-flux"]; ch.Action != drift.ActionKeep || ch.KeptBy != "kustomize.toolkit.fluxcd.io/prune: disabled" {
		t.Errorf("kept-flux: %+v", ch)
	}
	if ch := got["kept-argo"]; ch.Action != drift.ActionKeep || !strings.Contains(ch.KeptBy, "Prune=false") {
		t.Errorf("kept-argo: %+v", ch)
	}
	if _, ok := got["untracked"]; ok {
		t.Errorf("an untracked object is pruned")
	}
}

// TestReaderListsOncePerKindAndNamespace proves many objects of a kind in a
// namespace are read with one list, not one GET each.
func TestReaderListsOncePerKindAndNamespace(t *testing.T) {
	c := newCluster(t)
	var refs []object.Ref
	for i := range 20 {
		o := obj(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%02d\n  namespace: %s\n", i, c.env.Namespace))
		c.apply(o, "kustomize-controller")
		refs = append(refs, object.RefOf(o))
	}
	refs = append(refs, object.Ref{Version: "v1", Kind: "ConfigMap", Namespace: c.env.Namespace, Name: "absent"})
	cfg := rest.CopyConfig(c.env.Config)
	var gets, lists atomic.Int64
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if strings.Contains(r.URL.Path, "/configmaps") {
				if strings.HasSuffix(r.URL.Path, "/configmaps") {
					lists.Add(1)
				} else {
					gets.Add(1)
				}
			}
			return rt.RoundTrip(r)
		})
	}
	reader, err := livestate.NewClusterReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := reader.Get(context.Background(), refs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 20 {
		t.Errorf("read %d objects, want 20", len(got))
	}
	if gets.Load() != 0 || lists.Load() != 1 {
		t.Errorf("%d GETs and %d LISTs for 21 objects of one kind in one namespace; want 0 and 1", gets.Load(), lists.Load())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestGitDangersWithTheCluster: a role the pull request widens in Git is
// flagged even when the cluster already grants as much; a removal of what
// the cluster does not have loses nothing and is not a danger there.
func TestGitDangersWithTheCluster(t *testing.T) {
	c := newCluster(t)
	ns := c.env.Namespace
	role := func(verbs string) *unstructured.Unstructured {
		return obj(t, strings.NewReplacer("VERBS", verbs, "shop", ns).Replace(gitRole))
	}
	c.apply(role(`"*"`), "kubectl-edit") // someone widened it live already
	gone := obj(t, "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: never-applied, namespace: "+ns+"}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n")

	target := compareOn(t, c, []*unstructured.Unstructured{role("get, list"), gone}, []*unstructured.Unstructured{role(`"*"`)}, drift.DefaultOptions())
	ch := findChange(t, target.Changes, "Role", "deployer")
	oneDanger(t, ch, drift.DangerRBACEscalation, 1, "the pull request grants", "verbs [*]")
	if got := target.Dangers(); got[drift.DangerRBACEscalation] != 1 || got[drift.DangerPVCRemoval] != 0 {
		t.Errorf("dangers with the cluster read: %v; want the Git escalation and no removal of a claim the cluster lacks", got)
	}
}
