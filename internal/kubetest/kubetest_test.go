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
	// One apiserver: the other test's client finds it by its namespace.
	if _, err := b.Client.CoreV1().ConfigMaps(a.Namespace).Get(ctx, "probe", metav1.GetOptions{}); err != nil {
		t.Errorf("the second test's client reads another apiserver: %v", err)
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

// TestConfigHasNoClientLimits proves the Config tests give product code is a
// kubeconfig's: no client rate limits, so the product applies its own, and
// only the harness's Setup is raised.
func TestConfigHasNoClientLimits(t *testing.T) {
	env := kubetest.New(t)
	if env.Config.QPS != 0 || env.Config.Burst != 0 || env.Config.RateLimiter != nil {
		t.Errorf("Config carries client limits QPS %v burst %d limiter %v: product code would run with the harness's", env.Config.QPS, env.Config.Burst, env.Config.RateLimiter)
	}
	if env.Setup.QPS <= env.Config.QPS {
		t.Errorf("Setup QPS %v is not raised", env.Setup.QPS)
	}
}

// TestInCI proves any non-empty CI but "false" and "0" counts as CI.
func TestInCI(t *testing.T) {
	for v, want := range map[string]bool{"": false, "true": true, "1": true, "yes": true, "false": false, "0": false} {
		t.Setenv("CI", v)
		if got := kubetest.InCI(); got != want {
			t.Errorf("CI=%q: InCI() = %v, want %v", v, got, want)
		}
	}
}
