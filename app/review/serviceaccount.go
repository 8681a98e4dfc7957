package review

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	rbacauthorizer "k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/drift/scope"
)

// applicableBy narrows a scope to what a service account may apply: Flux's
// tenant lockdown, where kustomize-controller impersonates the
// Kustomization's spec.serviceAccountName. A namespace where the account
// may not patch every object the render puts there, and a cluster-scoped
// object it may not patch, get nothing from a sync and are not this
// target's to read. The cluster's RBAC is read and evaluated as the
// apiserver does, without asking the apiserver to decide (which would need
// a write).
func applicableBy(ctx context.Context, live object.LiveReader, within *scope.Scope, namespace, name string, objs []*unstructured.Unstructured) (*scope.Scope, error) {
	kinds, err := live.Kinds(ctx)
	if err != nil {
		return nil, err
	}
	resources := map[schema.GroupKind]object.Kind{}
	for _, k := range kinds {
		resources[k.GroupKind()] = k
	}
	rules, err := readRBAC(ctx, live, within)
	if err != nil {
		return nil, err
	}
	auth := rbacauthorizer.New(rules, rules, rules, rules)
	account := &user.DefaultInfo{
		Name:   fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, user.AllAuthenticated},
	}
	may := func(o *unstructured.Unstructured, ns string) bool {
		gk := o.GroupVersionKind().GroupKind()
		k, ok := resources[gk]
		if !ok {
			return false // a kind the cluster does not serve: nothing applies it
		}
		d, _, err := auth.Authorize(ctx, authorizer.AttributesRecord{
			User: account, Verb: "patch", Namespace: ns, APIGroup: gk.Group, APIVersion: k.Version,
			Resource: k.Resource, Name: o.GetName(), ResourceRequest: true,
		})
		return err == nil && d == authorizer.DecisionAllow
	}
	out := &scope.Scope{Namespaces: map[string]bool{}, ClusterKinds: within.ClusterKinds, ClusterObjects: map[string]object.Ref{}}
	denied := map[string]bool{}
	for _, o := range objs {
		gk := o.GroupVersionKind().GroupKind()
		if k, ok := resources[gk]; ok && !k.Namespaced {
			if ref := object.RefOf(o); may(o, "") {
				if r, in := within.ClusterObjects[ref.Key()]; in {
					out.ClusterObjects[ref.Key()] = r
				}
			}
			continue
		}
		ns := o.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		if !may(o, ns) {
			denied[ns] = true
		}
	}
	for ns := range within.Namespaces {
		if !denied[ns] {
			out.Namespaces[ns] = true
		}
	}
	return out, nil
}

// rbacRules are the cluster's roles and bindings as read, for the
// authorizer: the namespaces of the scope's, and the cluster's own.
type rbacRules struct {
	roles               map[string]*rbacv1.Role // by namespace/name
	roleBindings        map[string][]*rbacv1.RoleBinding
	clusterRoles        map[string]*rbacv1.ClusterRole
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
}

func readRBAC(ctx context.Context, live object.LiveReader, within *scope.Scope) (*rbacRules, error) {
	r := &rbacRules{roles: map[string]*rbacv1.Role{}, roleBindings: map[string][]*rbacv1.RoleBinding{}, clusterRoles: map[string]*rbacv1.ClusterRole{}}
	list := func(kind, ns string, each func(*unstructured.Unstructured) error) error {
		objs, err := live.List(ctx, schema.GroupKind{Group: rbacv1.GroupName, Kind: kind}, ns, nil)
		if err != nil {
			return fmt.Errorf("read %ss: %w", kind, err)
		}
		for _, o := range objs {
			if err := each(o); err != nil {
				return err
			}
		}
		return nil
	}
	convert := func(o *unstructured.Unstructured, into any) error {
		return runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into)
	}
	if err := list("ClusterRole", "", func(o *unstructured.Unstructured) error {
		c := &rbacv1.ClusterRole{}
		r.clusterRoles[o.GetName()] = c
		return convert(o, c)
	}); err != nil {
		return nil, err
	}
	if err := list("ClusterRoleBinding", "", func(o *unstructured.Unstructured) error {
		b := &rbacv1.ClusterRoleBinding{}
		r.clusterRoleBindings = append(r.clusterRoleBindings, b)
		return convert(o, b)
	}); err != nil {
		return nil, err
	}
	for ns := range within.Namespaces {
		if ns == scope.AnyNamespace {
			ns = ""
		}
		if err := list("Role", ns, func(o *unstructured.Unstructured) error {
			role := &rbacv1.Role{}
			r.roles[o.GetNamespace()+"/"+o.GetName()] = role
			return convert(o, role)
		}); err != nil {
			return nil, err
		}
		if err := list("RoleBinding", ns, func(o *unstructured.Unstructured) error {
			b := &rbacv1.RoleBinding{}
			r.roleBindings[o.GetNamespace()] = append(r.roleBindings[o.GetNamespace()], b)
			return convert(o, b)
		}); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *rbacRules) GetRole(_ context.Context, namespace, name string) (*rbacv1.Role, error) {
	if role, ok := r.roles[namespace+"/"+name]; ok {
		return role, nil
	}
	return nil, apierrors.NewNotFound(rbacv1.Resource("roles"), name)
}

func (r *rbacRules) ListRoleBindings(_ context.Context, namespace string) ([]*rbacv1.RoleBinding, error) {
	return r.roleBindings[namespace], nil
}

func (r *rbacRules) GetClusterRole(_ context.Context, name string) (*rbacv1.ClusterRole, error) {
	if role, ok := r.clusterRoles[name]; ok {
		return role, nil
	}
	return nil, apierrors.NewNotFound(rbacv1.Resource("clusterroles"), name)
}

func (r *rbacRules) ListClusterRoleBindings(context.Context) ([]*rbacv1.ClusterRoleBinding, error) {
	return r.clusterRoleBindings, nil
}
