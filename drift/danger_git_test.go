package drift_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/scope"
	"github.com/driftback/driftback/report"
)

const (
	gitCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
`
	gitPV = `apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-data}
spec:
  capacity: {storage: 5Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: /data}
`
	gitSTS = `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: shop}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: postgres:16}]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`
	gitRole = `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: deployer, namespace: shop}
rules:
- apiGroups: [apps]
  resources: [deployments]
  verbs: [VERBS]
`
)

// TestDangersAreKnownFromGit: without a cluster, every danger the rendered
// objects show is reported from the pull request's own change, its blast
// radius marked unknown where it needs the cluster.
func TestDangersAreKnownFromGit(t *testing.T) {
	deployment := func(app string) *unstructured.Unstructured {
		return obj(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  selector: {matchLabels: {app: "+app+"}}\n  template:\n    metadata: {labels: {app: "+app+"}}\n    spec: {containers: [{name: web, image: nginx}]}\n")
	}
	role := func(verbs string) *unstructured.Unstructured {
		return obj(t, strings.Replace(gitRole, "VERBS", verbs, 1))
	}
	base := []*unstructured.Unstructured{
		obj(t, gitCRD), obj(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop-preview}\n"),
		obj(t, "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: cache, namespace: shop}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n"),
		obj(t, gitPV), obj(t, gitSTS), deployment("web"), role("get, list"),
	}
	powers := obj(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: powers}
rules:
- {apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles], verbs: [escalate, bind]}
- {apiGroups: [""], resources: [users, serviceaccounts], verbs: [impersonate]}
- {apiGroups: [""], resources: [pods/exec], verbs: [create]}
- {apiGroups: [""], resources: [nodes/proxy], verbs: [get]}
- {apiGroups: [""], resources: [secrets], verbs: [list]}
- {apiGroups: [""], resources: [configmaps], verbs: [get]}
`)
	head := []*unstructured.Unstructured{deployment("web-v2"), role(`"*"`), powers}

	target, err := drift.Compare(context.Background(), nil, drift.Input{Path: "shop", Base: base, Head: head, HasBase: true}, drift.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if target.LiveError == "" {
		t.Error("a comparison without a cluster does not say the cluster was not read")
	}
	got := target.Dangers()
	for _, reason := range []drift.DangerReason{drift.DangerCRDRemoval, drift.DangerNamespaceRemoval, drift.DangerPVCRemoval,
		drift.DangerPVRemoval, drift.DangerStatefulSetPVC, drift.DangerImmutableField} {
		if got[reason] != 1 {
			t.Errorf("%s: %d, want 1 from Git (all: %v)", reason, got[reason], got)
		}
	}
	if got[drift.DangerRBACEscalation] != 2 {
		t.Errorf("rbac-escalation: %d, want the widened Role and the new ClusterRole", got[drift.DangerRBACEscalation])
	}
	crd := findChange(t, target.PR, "CustomResourceDefinition", "widgets.example.com")
	oneDanger(t, crd, drift.DangerCRDRemoval, 0, "every Widget", "unknown without the cluster")
	if !crd.Danger[0].CountUnknown {
		t.Error("the CRD's blast radius is not marked unknown")
	}
	oneDanger(t, findChange(t, target.PR, "PersistentVolume", "pv-data"), drift.DangerPVRemoval, 1, "pv-data (5Gi, Retain)", "nothing mounts")
	oneDanger(t, findChange(t, target.PR, "StatefulSet", "db"), drift.DangerStatefulSetPVC, 0, "whenDeleted: Delete")
	oneDanger(t, findChange(t, target.PR, "Deployment", "web"), drift.DangerImmutableField, 1, ".spec.selector")
	oneDanger(t, findChange(t, target.PR, "Role", "deployer"), drift.DangerRBACEscalation, 1, "verbs [*]", "wildcard")
	oneDanger(t, findChange(t, target.PR, "ClusterRole", "powers"), drift.DangerRBACEscalation, 5,
		"escalate (", "bind (", "impersonate (", "exec into pods", "node proxy", "read Secrets")
}

// TestAnUnknownCountIsNotRecorded: removing a CRD whose custom resources
// live outside the target's scope (every namespace but its own) deletes an
// unknown number of them: the danger says so, and no count is recorded for
// a later restore to quote as what driftback counted.
func TestAnUnknownCountIsNotRecorded(t *testing.T) {
	crd := obj(t, gitCRD)
	cm := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\n")
	live := livestate.NewObjectReader([]*unstructured.Unstructured{crd, cm})
	base := []*unstructured.Unstructured{crd, cm}
	sc, err := scope.Of(context.Background(), nil, base)
	if err != nil {
		t.Fatal(err)
	}
	opts := drift.DefaultOptions()
	opts.Scope = sc
	target, err := drift.Compare(context.Background(), live, drift.Input{Path: "p", Base: base, Head: []*unstructured.Unstructured{cm}, HasBase: true}, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range target.Changes {
		if ch.Kind != "CustomResourceDefinition" {
			continue
		}
		if len(ch.Danger) != 1 || !ch.Danger[0].CountUnknown || !strings.Contains(ch.Danger[0].Message, "how many is unknown, outside this target's scope") {
			t.Fatalf("the CRD's removal: %+v, want its count unknown", ch.Danger)
		}
		if m := report.LostMarker(ch.Danger[0], ch); m != "" {
			t.Errorf("the CRD's removal records a count it does not know: %s", m)
		}
		return
	}
	t.Fatalf("no removal of the CRD among %+v", target.Changes)
}
