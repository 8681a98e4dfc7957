// Package apidefaults holds the apiserver's own scheme for built-in kinds:
// the Go types of every built-in group at every version, their internal
// form, the conversions between them and the defaulting functions, all as
// the Kubernetes release that matches client-go (see go.mod) registers them.
// Nothing here is written by hand: each group's install package is the one
// kube-apiserver links.
//
// A read-only prediction runs an object through this scheme the way the
// apiserver does through its storage: defaulted after the merge, converted to
// the internal form and back. That is what turns a NetworkPolicy port without
// a protocol into `protocol: TCP`, and writes `apiVersion`/`kind` into a
// StatefulSet's volume claim templates.
package apidefaults

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	admissionregistration "k8s.io/kubernetes/pkg/apis/admissionregistration/install"
	apiserverinternal "k8s.io/kubernetes/pkg/apis/apiserverinternal/install"
	apps "k8s.io/kubernetes/pkg/apis/apps/install"
	authentication "k8s.io/kubernetes/pkg/apis/authentication/install"
	authorization "k8s.io/kubernetes/pkg/apis/authorization/install"
	autoscaling "k8s.io/kubernetes/pkg/apis/autoscaling/install"
	batch "k8s.io/kubernetes/pkg/apis/batch/install"
	certificates "k8s.io/kubernetes/pkg/apis/certificates/install"
	coordination "k8s.io/kubernetes/pkg/apis/coordination/install"
	core "k8s.io/kubernetes/pkg/apis/core/install"
	discovery "k8s.io/kubernetes/pkg/apis/discovery/install"
	events "k8s.io/kubernetes/pkg/apis/events/install"
	extensions "k8s.io/kubernetes/pkg/apis/extensions/install"
	flowcontrol "k8s.io/kubernetes/pkg/apis/flowcontrol/install"
	networking "k8s.io/kubernetes/pkg/apis/networking/install"
	node "k8s.io/kubernetes/pkg/apis/node/install"
	policy "k8s.io/kubernetes/pkg/apis/policy/install"
	rbac "k8s.io/kubernetes/pkg/apis/rbac/install"
	resource "k8s.io/kubernetes/pkg/apis/resource/install"
	scheduling "k8s.io/kubernetes/pkg/apis/scheduling/install"
	storage "k8s.io/kubernetes/pkg/apis/storage/install"
	storagemigration "k8s.io/kubernetes/pkg/apis/storagemigration/install"
)

// installs are the served built-in groups, as kube-apiserver imports them
// (pkg/controlplane/import_known_versions.go), less the groups that have no
// stored objects (admission, imagepolicy, lifecycle reviews).
var installs = []func(*runtime.Scheme){
	admissionregistration.Install,
	apiserverinternal.Install,
	apps.Install,
	authentication.Install,
	authorization.Install,
	autoscaling.Install,
	batch.Install,
	certificates.Install,
	coordination.Install,
	core.Install,
	discovery.Install,
	events.Install,
	extensions.Install,
	flowcontrol.Install,
	networking.Install,
	node.Install,
	policy.Install,
	rbac.Install,
	resource.Install,
	scheduling.Install,
	storage.Install,
	storagemigration.Install,
}

// NewScheme returns a scheme with client-go's built-in types and, for every
// built-in group, the apiserver's internal types, conversions and defaults.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	for _, install := range installs {
		install(s)
	}
	return s
}

// Store does to a defaulted built-in object what the apiserver's storage does
// before it answers: convert it to the internal form and back to its version,
// then default it again (the apiserver defaults on every decode). Kinds
// without an internal form are returned as they are.
func Store(s *runtime.Scheme, obj runtime.Object) (runtime.Object, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	internal := schema.GroupVersion{Group: gvk.Group, Version: runtime.APIVersionInternal}
	if !s.Recognizes(internal.WithKind(gvk.Kind)) {
		return obj, nil
	}
	in, err := s.ConvertToVersion(obj, internal)
	if err != nil {
		return nil, err
	}
	out, err := s.ConvertToVersion(in, gvk.GroupVersion())
	if err != nil {
		return nil, err
	}
	s.Default(out)
	out.GetObjectKind().SetGroupVersionKind(gvk)
	return out, nil
}
