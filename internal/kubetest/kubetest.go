// Package kubetest runs tests against a real kube-apiserver and etcd, started
// with controller-runtime envtest once per test binary. Each test gets its own
// namespace on the shared server.
//
// The binaries come from `make testbin` (built from the Go module proxy) and are
// found through KUBEBUILDER_ASSETS or, failing that, under bin/k8s/ at the module
// root. When they are missing a test is skipped with the reason, except when
// CI is set to anything, where it fails: CI never passes by skipping the
// cluster tests.
//
// Env.Config reaches the apiserver the way a kubeconfig does, with no client
// rate limits of its own, so the product's constructors apply the limits they
// ship with; tests and benchmarks hand it to product code. Env.Setup is the
// harness's own fast client, for creating fixtures only.
package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

var (
	once     sync.Once
	env      *envtest.Environment
	cfg      *rest.Config
	startErr error
)

// Main runs the tests of a package and stops the apiserver afterwards if one of
// them started it. Use it as: func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "kubetest: stop the apiserver:", err)
		}
	}
	return code
}

// Env is one test's slice of the shared apiserver.
type Env struct {
	// Config reaches the apiserver as a cluster administrator, as a
	// kubeconfig would: without client rate limits, so product code given it
	// runs with the limits it ships with.
	Config *rest.Config
	// Setup is Config with client limits raised, for creating and editing
	// fixtures quickly. Never give it to the code under test.
	Setup *rest.Config
	// Client is a typed client on Setup.
	Client kubernetes.Interface
	// Namespace exists for this test only and is deleted when it ends.
	Namespace string
}

// New starts the shared apiserver on first use and creates a namespace for t.
func New(t testing.TB) *Env {
	t.Helper()
	once.Do(start)
	if startErr != nil {
		if InCI() {
			t.Fatalf("kubetest: %v", startErr)
		}
		t.Skipf("kubetest: %v (run `make testbin`; with CI set this fails)", startErr)
	}
	return slice(t, cfg)
}

// slice creates t's namespace on the apiserver c reaches, deleted when t
// ends, and returns t's Env there.
func slice(t testing.TB, c *rest.Config) *Env {
	t.Helper()
	setup := Fast(c)
	client, err := kubernetes.NewForConfig(setup)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaceName(t.Name())}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("kubetest: create namespace %s: %v", ns.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// envtest runs no namespace controller, so the namespace only goes to
		// Terminating; its name is unique and nothing else reuses it.
		_ = client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}) // best effort at teardown
	})
	return &Env{Config: rest.CopyConfig(c), Setup: setup, Client: client, Namespace: ns.Name}
}

// InCI says the tests run in CI, where a missing test binary is a failure:
// CI is set to anything but "false" or "0".
func InCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false" && v != "0"
}

// Fast returns a copy of cfg whose client limits let a test create many
// fixtures without waiting on its own client.
func Fast(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 1000, 2000
	return c
}

// Impersonate returns a copy of cfg that acts as the service account
// namespace/serviceAccount, with the groups the apiserver gives every service
// account token. Tests use it to prove what a role allows and forbids: the
// admin Config is in system:masters, which RBAC never denies.
func Impersonate(cfg *rest.Config, namespace, serviceAccount string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + serviceAccount,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return c
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// namespaceName derives a unique, valid namespace name from a test name.
func namespaceName(test string) string {
	name := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(test), "-"), "-")
	if len(name) > 48 {
		name = strings.Trim(name[:48], "-")
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand does not fail on Linux
	return name + "-" + hex.EncodeToString(b[:])
}

func start() {
	dir, err := assets()
	if err != nil {
		startErr = err
		return
	}
	e := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	c, err := e.Start()
	if err != nil {
		startErr = fmt.Errorf("start kube-apiserver and etcd from %s: %w", dir, err)
		return
	}
	// As a kubeconfig gives it: the client limits are the product's to set.
	c.QPS, c.Burst, c.RateLimiter = 0, 0, nil
	env, cfg = e, c
}

// assets finds the folder holding kube-apiserver and etcd.
func assets() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		if err := hasBinaries(dir); err != nil {
			return "", fmt.Errorf("KUBEBUILDER_ASSETS=%s: %w", dir, err)
		}
		return dir, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	found, _ := filepath.Glob(filepath.Join(root, "bin", "k8s", "*"))
	sort.Sort(sort.Reverse(sort.StringSlice(found)))
	for _, dir := range found {
		if hasBinaries(dir) == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no kube-apiserver and etcd: KUBEBUILDER_ASSETS is not set and %s holds none", filepath.Join(root, "bin", "k8s"))
}

func hasBinaries(dir string) error {
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if info, err := os.Stat(filepath.Join(dir, b)); err != nil || info.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is missing or not executable", b)
		}
	}
	return nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// Eventually polls cond until it holds, failing t after timeout: tests wait
// on the condition itself, never on a fixed sleep.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CreateMany calls create for each i in [from, to) on 32 goroutines, as a
// fixture of thousands of objects needs, and fails t on the first error.
func CreateMany(t testing.TB, from, to int, create func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	next := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := create(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
