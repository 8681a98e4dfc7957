package review

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/internal/kubetest"
)

func parse(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestAServiceAccountBoundsTheScope: a Flux Kustomization that applies as a
// tenant's service account (spec.serviceAccountName, Flux's multi-tenancy
// lockdown) gets nothing applied where the account may not patch: a pull
// request reads, for its target, only the namespaces and cluster-scoped
// objects the account may write, as the cluster's RBAC says.
func TestAServiceAccountBoundsTheScope(t *testing.T) {
	env := kubetest.New(t)
	ctx := context.Background()
	ns := env.Namespace
	other := ns + "-other"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	apply := func(y string) {
		t.Helper()
		kubetest.Apply(t, env.Setup, "kubectl", parse(t, y))
	}
	apply("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: tenant, namespace: " + ns + "}\n")
	apply("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: tenant, namespace: " + ns + "}\nrules: [{apiGroups: [''], resources: [configmaps], verbs: [get, list, patch, create]}]\n")
	binding := func(kind, roleKind, where string) string {
		meta := "{name: tenant-" + where + "}"
		if kind == "RoleBinding" {
			meta = "{name: tenant, namespace: " + where + "}"
		}
		return "apiVersion: rbac.authorization.k8s.io/v1\nkind: " + kind + "\nmetadata: " + meta +
			"\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: " + roleKind + ", name: tenant-" + where + "}\nsubjects: [{kind: ServiceAccount, name: tenant, namespace: " + ns + "}]\n"
	}
	apply("apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: tenant, namespace: " + ns + "}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: tenant}\nsubjects: [{kind: ServiceAccount, name: tenant, namespace: " + ns + "}]\n")

	ks := parse(t, "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: tenant, namespace: "+ns+"}\nspec: {interval: 5m, path: ./tenant, prune: true, serviceAccountName: tenant, sourceRef: {kind: GitRepository, name: fleet}}\n")
	found := discover.FromFlux(ks, nil, discover.Settings{On: "test", Host: "github.com"})
	if found.ServiceAccount != "tenant" {
		t.Fatalf("the Kustomization's service account: %q", found.ServiceAccount)
	}
	role := "break-glass-" + ns
	objs := []*unstructured.Unstructured{
		parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine, namespace: "+ns+"}\n"),
		parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: theirs, namespace: "+other+"}\n"),
		parse(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: "+role+"}\n"),
	}
	reader, err := livestate.NewClusterReader(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	w := &targetWork{t: targets.Target{Target: config.Target{Name: "tenant"}, Found: found}, defaults: objs}
	scope, err := scopeOf(ctx, reader, w)
	if err != nil {
		t.Fatal(err)
	}
	if !scope.Namespaces[ns] || scope.Namespaces[other] || len(scope.ClusterObjects) != 0 {
		t.Errorf("scope %s: want the tenant's namespace alone, no cluster-scoped object", scope)
	}

	// Granted more, the account's scope grows with it.
	apply("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: tenant-" + other + "}\nrules: [{apiGroups: ['', rbac.authorization.k8s.io], resources: [configmaps, clusterroles], verbs: [patch]}]\n")
	apply(binding("RoleBinding", "ClusterRole", other))
	apply(binding("ClusterRoleBinding", "ClusterRole", other))
	t.Cleanup(func() {
		_ = env.Client.RbacV1().ClusterRoles().Delete(ctx, "tenant-"+other, metav1.DeleteOptions{})
		_ = env.Client.RbacV1().ClusterRoleBindings().Delete(ctx, "tenant-"+other, metav1.DeleteOptions{})
	})
	if scope, err = scopeOf(ctx, reader, w); err != nil {
		t.Fatal(err)
	}
	if !scope.Namespaces[ns] || !scope.Namespaces[other] || len(scope.ClusterObjects) != 1 {
		t.Errorf("scope %s: want both namespaces and the ClusterRole", scope)
	}

	// A Kustomization without a service account applies as the controller:
	// its scope is what it renders.
	w.t.Found = discover.FromFlux(parse(t, "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: all, namespace: "+ns+"}\nspec: {interval: 5m, path: ./all, prune: true, sourceRef: {kind: GitRepository, name: fleet}}\n"), nil, discover.Settings{On: "test"})
	if scope, err = scopeOf(ctx, reader, w); err != nil {
		t.Fatal(err)
	}
	if !scope.Namespaces[other] || len(scope.ClusterObjects) != 1 {
		t.Errorf("without a service account: scope %s", scope)
	}
}
