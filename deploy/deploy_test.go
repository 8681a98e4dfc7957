package deploy_test

import (
	"context"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/internal/kubetest"
)

// TestExampleConfig proves the example overlay's app.yml, as the generated
// ConfigMap carries it, is a configuration driftback accepts, and that every
// file and folder it names is one the Deployment mounts from the right place.
func TestExampleConfig(t *testing.T) {
	objs := renderOverlay(t, "overlays/example")
	var cm *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "driftback-config-") {
			cm = o
		}
	}
	if cm == nil {
		t.Fatal("the example overlay generates no ConfigMap driftback-config-<hash>")
	}
	doc, _, _ := unstructured.NestedString(cm.Object, "data", "app.yml")
	cfg, err := config.ParseConfig([]byte(doc), nil)
	if err != nil {
		t.Fatalf("app.yml: %v", err)
	}

	var dep appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, objs, "Deployment", "driftback").Object, &dep); err != nil {
		t.Fatal(err)
	}
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	// mounted returns the volume holding a path of the container, and the
	// path inside that volume.
	mounted := func(p string) (corev1.Volume, string) {
		t.Helper()
		best := corev1.VolumeMount{}
		for _, m := range c.VolumeMounts {
			if (p == m.MountPath || strings.HasPrefix(p, m.MountPath+"/")) && len(m.MountPath) > len(best.MountPath) {
				best = m
			}
		}
		if best.Name == "" {
			t.Fatalf("%s is on no volume of the container", p)
		}
		return volumes[best.Name], strings.TrimPrefix(strings.TrimPrefix(p, best.MountPath), "/")
	}
	secretKey := func(p string) string {
		t.Helper()
		v, rel := mounted(p)
		if v.Secret == nil || v.Secret.SecretName != "driftback-github" {
			t.Fatalf("%s is not on the Secret driftback-github", p)
		}
		for _, it := range v.Secret.Items {
			if it.Path == rel {
				return it.Key
			}
		}
		t.Fatalf("%s: the Secret volume has no item at %s", p, rel)
		return ""
	}

	if len(c.Args) != 3 || c.Args[0] != "serve" || c.Args[1] != "--config" {
		t.Fatalf("args %q, want serve --config FILE", c.Args)
	}
	if v, rel := mounted(c.Args[2]); v.ConfigMap == nil || v.ConfigMap.Name != cm.GetName() || rel != "app.yml" {
		t.Errorf("--config %s is not app.yml of the generated ConfigMap %s (volume %+v, file %q)", c.Args[2], cm.GetName(), v, rel)
	}
	if got := secretKey(cfg.GitHub.PrivateKeyFile); got != "private-key.pem" {
		t.Errorf("github.privateKeyFile %s reads the Secret's key %q, want private-key.pem", cfg.GitHub.PrivateKeyFile, got)
	}
	if got := secretKey(cfg.GitHub.WebhookSecretFile); got != "webhook-secret" {
		t.Errorf("github.webhookSecretFile %s reads the Secret's key %q, want webhook-secret", cfg.GitHub.WebhookSecretFile, got)
	}
	if v, rel := mounted(cfg.Server.CacheDir); v.EmptyDir == nil || rel != "" {
		t.Errorf("server.cacheDir %s is not an emptyDir's mount (volume %+v)", cfg.Server.CacheDir, v)
	}
	if cfg.Server.CacheDir == "" || strings.HasPrefix(cfg.Server.CacheDir, "/tmp") {
		t.Errorf("server.cacheDir %q should be the cache volume", cfg.Server.CacheDir)
	}
	if sl := volumes["cache"].EmptyDir; sl == nil || sl.SizeLimit == nil || cfg.Server.CacheMaxBytes >= sl.SizeLimit.Value() {
		t.Errorf("server.cacheMaxBytes %d does not fit in the cache volume", cfg.Server.CacheMaxBytes)
	}
	var port int32
	for _, p := range c.Ports {
		if p.Name == "http" {
			port = p.ContainerPort
		}
	}
	if want := ":" + strconv.Itoa(int(port)); cfg.Server.Listen != want {
		t.Errorf("server.listen %q, want %q, the container port http", cfg.Server.Listen, want)
	}
	if len(cfg.Targets) == 0 {
		t.Error("the example has no target")
	}
	for _, tg := range cfg.Targets {
		if cl := cfg.Clusters[tg.Cluster]; !cl.InCluster {
			t.Errorf("target %s: cluster %q is not inCluster; the example reaches only its own cluster", tg.Name, tg.Cluster)
		}
	}
}

// TestRoles proves, from the rendered manifests, the exact rules driftback is
// granted: read on everything, leases in its own namespace, and patch only
// with the dry-run component.
func TestRoles(t *testing.T) {
	read := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}}
	lease := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}}}
	patch := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"patch"}}}
	tests := []struct {
		name    string
		overlay string
		want    map[string][]rbacv1.PolicyRule
	}{
		{"the example overlay reads and takes a lease", "overlays/example", map[string][]rbacv1.PolicyRule{
			"ClusterRole/driftback-read": read, "Role/driftback/driftback-leader-election": lease}},
		{"the dry-run component adds patch", "test/dry-run", map[string][]rbacv1.PolicyRule{
			"ClusterRole/driftback-read": read, "Role/driftback/driftback-leader-election": lease, "ClusterRole/driftback-dry-run": patch}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string][]rbacv1.PolicyRule{}
			bound := map[string]bool{}
			for _, o := range renderOverlay(t, tt.overlay) {
				switch o.GetKind() {
				case "Role", "ClusterRole":
					var r rbacv1.ClusterRole // a Role's fields are a subset
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
						t.Fatal(err)
					}
					got[path.Join(o.GetKind(), o.GetNamespace(), o.GetName())] = r.Rules
				case "RoleBinding", "ClusterRoleBinding":
					var b rbacv1.ClusterRoleBinding
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
						t.Fatal(err)
					}
					if len(b.Subjects) != 1 || b.Subjects[0] != (rbacv1.Subject{Kind: "ServiceAccount", Name: "driftback", Namespace: "driftback"}) {
						t.Errorf("%s/%s binds %+v, want only the ServiceAccount driftback/driftback", o.GetKind(), o.GetName(), b.Subjects)
					}
					bound[path.Join(b.RoleRef.Kind, o.GetNamespace(), b.RoleRef.Name)] = true
				}
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("roles (-want +got):\n%s", d)
			}
			for role := range tt.want {
				if !bound[role] {
					t.Errorf("%s is bound to nothing", role)
				}
			}
		})
	}
}

// TestRestrictedPodSecurity proves the Deployment meets the "restricted" Pod
// Security Standard, and that the check can fail: the same Deployment without
// its securityContext draws the apiserver's warning in a namespace that warns.
func TestRestrictedPodSecurity(t *testing.T) {
	env := kubetest.New(t)
	admin := newCluster(t, env.Setup)
	ns := object(t, `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "`+env.Namespace+`", "labels": {
		"pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/warn-version": "latest"}}}`)
	if w := applyAll(t, admin, []*unstructured.Unstructured{ns}); len(w) > 0 {
		t.Fatalf("label the namespace: warnings %q", w)
	}

	dep := find(t, renderOverlay(t, "overlays/example"), "Deployment", "driftback").DeepCopy()
	dep.SetNamespace(env.Namespace)
	if w := applyAll(t, admin, []*unstructured.Unstructured{dep}); len(w) > 0 {
		t.Errorf("the Deployment as shipped drew warnings: %q", w)
	}

	insecure := dep.DeepCopy()
	insecure.SetName("driftback-without-security-context")
	unstructured.RemoveNestedField(insecure.Object, "spec", "template", "spec", "securityContext")
	containers, _, _ := unstructured.NestedSlice(insecure.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		delete(c.(map[string]any), "securityContext")
	}
	if err := unstructured.SetNestedSlice(insecure.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	w := applyAll(t, admin, []*unstructured.Unstructured{insecure})
	if len(w) == 0 || !strings.Contains(strings.Join(w, "\n"), `violate PodSecurity "restricted`) {
		t.Errorf("without a securityContext the apiserver warned %q, want a restricted PodSecurity violation", w)
	}
}

// TestServiceAccountIsReadOnly applies the example overlay to a real
// apiserver (with RBAC on; envtest's default) with no warnings, then acts as
// driftback's service account: it reads every kind everywhere, writes nothing
// but its own Lease, and can run a dry-run apply only once the dry-run
// component is applied, which also lets it really patch: the risk the
// component's comment states.
func TestServiceAccountIsReadOnly(t *testing.T) {
	env := kubetest.New(t)
	ctx := context.Background()
	admin := newCluster(t, env.Setup)
	if w := applyAll(t, admin, renderOverlay(t, "overlays/example")); len(w) > 0 {
		t.Errorf("applying the example overlay drew warnings: %q", w)
	}

	// Objects of other teams, made by the admin.
	ns := env.Namespace
	web := object(t, `{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "`+ns+`"},
		"spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}},
		"spec": {"containers": [{"name": "web", "image": "registry.example/web:1"}]}}}}`)
	settings := object(t, `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "`+ns+`"}, "data": {"a": "1"}}`)
	token := object(t, `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": "`+ns+`"}, "data": {"password": "c2VjcmV0"}}`)
	crd := object(t, `{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": {"name": "widgets.deploy-test.driftback.io"},
		"spec": {"group": "deploy-test.driftback.io", "scope": "Namespaced",
		"names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
		"versions": [{"name": "v1", "served": true, "storage": true,
		"schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}`)
	applyAll(t, admin, []*unstructured.Unstructured{web, settings, token, crd})
	t.Cleanup(func() {
		// best effort at teardown: the apiserver stops with the test binary
		_ = admin.dyn.Resource(crds).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{})
	})

	sa := newCluster(t, kubetest.Impersonate(env.Config, "driftback", "driftback"))
	eventually(t, "the service account lists Deployments once its binding is in force", func() error {
		_, err := sa.dyn.Resource(deployments).List(ctx, metav1.ListOptions{})
		return err
	})

	t.Run("it reads every kind in every namespace", func(t *testing.T) {
		reads := []struct {
			gvr             schema.GroupVersionResource
			namespace, name string
		}{
			{deployments, ns, "web"},
			{secrets, ns, "token"},
			{crds, "", crd.GetName()},
			{roles, "", "driftback-read"},
			{namespaces, "", ns},
		}
		for _, r := range reads {
			// Without a namespace, a namespaced resource is every namespace.
			all := sa.dyn.Resource(r.gvr)
			var one dynamic.ResourceInterface = all
			if r.namespace != "" {
				one = all.Namespace(r.namespace)
			}
			got, err := one.Get(ctx, r.name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("get %s %s: %v", r.gvr.Resource, r.name, err)
			}
			if r.gvr == secrets && err == nil {
				// The role reads Secret values; driftback masks them itself.
				if v, _, _ := unstructured.NestedString(got.Object, "data", "password"); v != "c2VjcmV0" {
					t.Errorf("the Secret's value reads as %q", v)
				}
			}
			if _, err := all.List(ctx, metav1.ListOptions{}); err != nil {
				t.Errorf("list %s in every namespace: %v", r.gvr.Resource, err)
			}
			w, err := all.Watch(ctx, metav1.ListOptions{})
			if err != nil {
				t.Errorf("watch %s in every namespace: %v", r.gvr.Resource, err)
				continue
			}
			w.Stop()
		}
	})

	t.Run("it writes nothing", func(t *testing.T) {
		type write struct {
			name string
			do   func() error
		}
		var writes []write
		for _, target := range []*unstructured.Unstructured{web, settings} {
			gvr := deployments
			if target.GetKind() == "ConfigMap" {
				gvr = configMaps
			}
			r := sa.dyn.Resource(gvr).Namespace(ns)
			what := target.GetKind() + " " + target.GetName()
			fresh := target.DeepCopy()
			fresh.SetName(target.GetName() + "-new")
			writes = append(writes,
				write{"create a " + target.GetKind(), func() error {
					_, err := r.Create(ctx, fresh, metav1.CreateOptions{})
					return err
				}},
				write{"update " + what, func() error {
					live, err := admin.dyn.Resource(gvr).Namespace(ns).Get(ctx, target.GetName(), metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					live.SetLabels(map[string]string{"changed-by": "driftback"})
					_, err = r.Update(ctx, live, metav1.UpdateOptions{})
					return err
				}},
				write{"patch " + what, func() error {
					_, err := r.Patch(ctx, target.GetName(), types.MergePatchType, []byte(`{"metadata":{"labels":{"changed-by":"driftback"}}}`), metav1.PatchOptions{})
					return err
				}},
				write{"apply " + what, func() error { return sa.apply(ctx, target, false) }},
				write{"delete " + what, func() error { return r.Delete(ctx, target.GetName(), metav1.DeleteOptions{}) }},
			)
		}
		writes = append(writes,
			write{"create a ConfigMap in its own namespace", func() error {
				cm := settings.DeepCopy()
				cm.SetNamespace("driftback")
				_, err := sa.dyn.Resource(configMaps).Namespace("driftback").Create(ctx, cm, metav1.CreateOptions{})
				return err
			}},
			write{"bind itself to cluster-admin", func() error {
				b := object(t, `{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "driftback-admin"},
					"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
					"subjects": [{"kind": "ServiceAccount", "name": "driftback", "namespace": "driftback"}]}`)
				_, err := sa.dyn.Resource(bindings).Create(ctx, b, metav1.CreateOptions{})
				return err
			}},
			write{"delete a Namespace", func() error {
				return sa.dyn.Resource(namespaces).Delete(ctx, ns, metav1.DeleteOptions{})
			}},
		)
		for _, w := range writes {
			if err := w.do(); !apierrors.IsForbidden(err) {
				t.Errorf("%s: err = %v, want Forbidden", w.name, err)
			}
		}
	})

	t.Run("it takes a lease in its own namespace only", func(t *testing.T) {
		lease := func(namespace string) *unstructured.Unstructured {
			return object(t, `{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
				"metadata": {"name": "driftback-deploy-test", "namespace": "`+namespace+`"}, "spec": {"holderIdentity": "driftback-0"}}`)
		}
		own := sa.dyn.Resource(leases).Namespace("driftback")
		t.Cleanup(func() {
			// best effort at teardown: the apiserver stops with the test binary
			_ = admin.dyn.Resource(leases).Namespace("driftback").Delete(context.Background(), "driftback-deploy-test", metav1.DeleteOptions{})
		})
		created, err := own.Create(ctx, lease("driftback"), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create its Lease: %v", err)
		}
		if err := unstructured.SetNestedField(created.Object, "driftback-1", "spec", "holderIdentity"); err != nil {
			t.Fatal(err)
		}
		if _, err := own.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Errorf("update its Lease: %v", err)
		}
		if _, err := own.Get(ctx, created.GetName(), metav1.GetOptions{}); err != nil {
			t.Errorf("get its Lease: %v", err)
		}
		// Membership Leases of replicas gone long ago are deleted.
		if err := own.Delete(ctx, created.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete its Lease: %v", err)
		}
		if _, err := sa.dyn.Resource(leases).Namespace(ns).Create(ctx, lease(ns), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("create a Lease in another namespace: err = %v, want Forbidden", err)
		}
		if err := sa.dyn.Resource(leases).Namespace(ns).Delete(ctx, "anything", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("delete a Lease in another namespace: err = %v, want Forbidden", err)
		}
	})

	t.Run("dry-run needs the opt-in component, which grants real patch", func(t *testing.T) {
		changed := settings.DeepCopy()
		if err := unstructured.SetNestedField(changed.Object, "2", "data", "a"); err != nil {
			t.Fatal(err)
		}
		if err := sa.apply(ctx, changed, true); !apierrors.IsForbidden(err) {
			t.Fatalf("dry-run apply without the component: err = %v, want Forbidden", err)
		}

		var added []*unstructured.Unstructured
		for _, o := range renderOverlay(t, "test/dry-run") {
			if o.GetName() == "driftback-dry-run" {
				added = append(added, o)
			}
		}
		if len(added) != 2 {
			t.Fatalf("the dry-run component renders %d objects named driftback-dry-run, want a ClusterRole and its binding", len(added))
		}
		t.Cleanup(func() {
			// Later runs in this binary start from the read-only state again.
			for _, gvr := range []schema.GroupVersionResource{bindings, roles} {
				_ = admin.dyn.Resource(gvr).Delete(context.Background(), "driftback-dry-run", metav1.DeleteOptions{}) // best effort at teardown
			}
		})
		if w := applyAll(t, admin, added); len(w) > 0 {
			t.Errorf("applying the dry-run component drew warnings: %q", w)
		}
		eventually(t, "dry-run apply with the component", func() error { return sa.apply(ctx, changed, true) })
		live, err := admin.dyn.Resource(configMaps).Namespace(ns).Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _ := unstructured.NestedString(live.Object, "data", "a"); v != "1" {
			t.Errorf("after a dry run the live value is %q, want 1", v)
		}

		// Server-side apply creates only with the create verb, dry run or not.
		fresh := changed.DeepCopy()
		fresh.SetName("settings-new")
		if err := sa.apply(ctx, fresh, true); !apierrors.IsForbidden(err) {
			t.Errorf("dry-run apply of a new object: err = %v, want Forbidden", err)
		}

		// The risk: RBAC cannot limit patch to dry runs.
		if _, err := sa.dyn.Resource(configMaps).Namespace(ns).Patch(ctx, "settings", types.MergePatchType, []byte(`{"data":{"a":"3"}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("a real patch with the component: %v; the component's warning would be wrong", err)
		}
		live, err = admin.dyn.Resource(configMaps).Namespace(ns).Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _ := unstructured.NestedString(live.Object, "data", "a"); v != "3" {
			t.Errorf("after a real patch the live value is %q, want 3", v)
		}
	})
}
