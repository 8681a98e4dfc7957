// Package object is driftback's reading of Kubernetes objects, below the
// comparison: how an object is named (Ref) and where the apiserver stores it
// (Place), which kinds are namespaced, the readers of live state
// (LiveReader), a render's values as the JSON types the apiserver stores,
// the fields of a change and the managers that own them, the rules that
// ignore some of them, SOPS-encrypted objects, and what a server-side apply
// would make of an object, predicted without writing (Predictor).
package object

import (
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Ref identifies an object independently of the API version it is read at.
type Ref struct {
	Group     string `json:"-"`
	Version   string `json:"-"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// RefOf returns the identity of an object.
func RefOf(u *unstructured.Unstructured) Ref {
	gvk := u.GroupVersionKind()
	return Ref{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// GVK returns the group, version and kind.
func (r Ref) GVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}

// APIVersion returns group/version, or the version alone for the core group.
func (r Ref) APIVersion() string { return r.GVK().GroupVersion().String() }

// Key identifies the object without its version: the same object read at two
// versions has one key, and so has one written in the old group that served
// its kind (a Deployment of extensions/v1beta1 is the apps one).
func (r Ref) Key() string {
	return storedGroup(r.Group, r.Kind) + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name
}

// movedKinds are the kinds Kubernetes once served in the extensions group too,
// by the group that stores them.
var movedKinds = map[string]string{
	"Deployment": "apps", "DaemonSet": "apps", "ReplicaSet": "apps",
	"Ingress": "networking.k8s.io", "NetworkPolicy": "networking.k8s.io", "PodSecurityPolicy": "policy",
}

func storedGroup(group, kind string) string {
	if g, ok := movedKinds[kind]; ok && group == "extensions" {
		return g
	}
	return group
}

// String reads like "Deployment/shop/web" or "ClusterRole/admin".
func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// GroupKind returns the group and kind.
func (r Ref) GroupKind() schema.GroupKind { return schema.GroupKind{Group: r.Group, Kind: r.Kind} }

// clusterScoped lists built-in kinds without a namespace, for reading dumps
// where no discovery is available.
var clusterScoped = map[schema.GroupKind]bool{
	{Kind: "Namespace"}:        true,
	{Kind: "Node"}:             true,
	{Kind: "PersistentVolume"}: true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                       true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:               true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                 true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                    true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                             true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                             true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:      true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                           true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                              true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                    true,
}

// CRDScopes returns, for the CRDs among objs, whether each defined kind is
// cluster-scoped.
func CRDScopes(objs []*unstructured.Unstructured) map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
		out[schema.GroupKind{Group: group, Kind: kind}] = scope == "Cluster"
	}
	return out
}

func SortRefs(refs []Ref) {
	sort.Slice(refs, func(i, j int) bool { return refs[i].Key() < refs[j].Key() })
}

// HPAKind and ScaledObjectKind are the autoscalers driftback knows: a
// HorizontalPodAutoscaler (any version) and a KEDA ScaledObject.
var (
	HPAKind          = schema.GroupKind{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}
	ScaledObjectKind = schema.GroupKind{Group: "keda.sh", Kind: "ScaledObject"}
)

// AdmissionKinds are the cluster's admission rules a change is checked
// against (drift/admission), read with the objects by a snapshot and
// written into a dump: the quotas and limit ranges of the objects'
// namespaces, and, whole, the namespaces (their Pod Security labels) and
// the validating admission policies with their bindings.
var (
	AdmissionNamespacedKinds = []schema.GroupKind{{Kind: "ResourceQuota"}, {Kind: "LimitRange"}}
	AdmissionClusterKinds    = []schema.GroupKind{{Kind: "Namespace"},
		{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}, {Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}}
)

// AutoscalerKinds are the kinds that own a workload's replicas: a reader
// that holds them in the workloads' namespaces answers who autoscales
// without a request.
var AutoscalerKinds = []schema.GroupKind{HPAKind, ScaledObjectKind}
