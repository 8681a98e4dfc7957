package kubetest_test

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/driftback/driftback/internal/kubetest"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// TestNamespacesAreSeparate proves two tests share one real apiserver but each
// works in its own namespace: an object created in one is not in the other.
func TestNamespacesAreSeparate(t *testing.T) {
	a, b := kubetest.New(t), kubetest.New(t)
	if a.Namespace == b.Namespace {
		t.Fatalf("both got namespace %s", a.Namespace)
	}
	if a.Config.Host != b.Config.Host {
		t.Errorf("two apiservers: %s and %s", a.Config.Host, b.Config.Host)
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Data: map[string]string{"k": "v"}}
	if _, err := a.Client.CoreV1().ConfigMaps(a.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := a.Client.CoreV1().ConfigMaps(a.Namespace).Get(ctx, "probe", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("read back from the apiserver: %v %v", got, err)
	}
	if _, err := b.Client.CoreV1().ConfigMaps(b.Namespace).Get(ctx, "probe", metav1.GetOptions{}); err == nil {
		t.Errorf("the object is visible in the other test's namespace")
	}
	// The server is a real one: it reports its version and runs admission.
	v, err := a.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.Minor != "37" {
		t.Errorf("server version %s.%s, want the pinned 1.37", v.Major, v.Minor)
	}
}

// TestImpersonate proves the shared apiserver authorizes with RBAC: a service
// account bound to nothing is refused what the admin Config may do, so a test
// that a role forbids something cannot pass by the server allowing everything.
func TestImpersonate(t *testing.T) {
	env := kubetest.New(t)
	ctx := context.Background()
	if _, err := env.Client.CoreV1().ConfigMaps(env.Namespace).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("admin: %v", err)
	}
	sa, err := kubernetes.NewForConfig(kubetest.Impersonate(env.Config, env.Namespace, "nobody"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sa.CoreV1().ConfigMaps(env.Namespace).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a service account bound to nothing lists ConfigMaps: err = %v, want Forbidden", err)
	}
	if want := "system:serviceaccount:" + env.Namespace + ":nobody"; !strings.Contains(err.Error(), want) {
		t.Errorf("the refusal %q does not name %s", err, want)
	}
}
