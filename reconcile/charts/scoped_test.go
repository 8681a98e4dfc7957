package charts

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftback/driftback/internal/kubetest"
)

// TestScopedReadsOnlyWhatItsScopeAllows: on a real apiserver, a pull
// request's build reads a Secret in a namespace its scope covers, and one
// the default branch's render read; one in another namespace is refused
// before any request, with a message that says why.
func TestScopedReadsOnlyWhatItsScopeAllows(t *testing.T) {
	env := kubetest.New(t)
	ctx := context.Background()
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	other := env.Namespace + "-other"
	for _, ns := range []string{other} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []struct{ ns, name string }{{env.Namespace, "mine"}, {other, "theirs"}, {other, "shared-creds"}} {
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.name}, StringData: map[string]string{"k": "v"}}); err != nil {
			t.Fatal(err)
		}
	}
	// The default branch's render read the shared credentials.
	reads := NewReads(c)
	if err := reads.Get(ctx, client.ObjectKey{Namespace: other, Name: "shared-creds"}, &corev1.Secret{}); err != nil {
		t.Fatal(err)
	}
	asked := NewReads(c) // what reaches the cluster
	scoped := NewScoped(asked, func(kind, ns, name string) bool { return ns == env.Namespace || reads.Has(kind, ns, name) })
	for _, ok := range []client.ObjectKey{{Namespace: env.Namespace, Name: "mine"}, {Namespace: other, Name: "shared-creds"}} {
		if err := scoped.Get(ctx, ok, &corev1.Secret{}); err != nil {
			t.Errorf("%s: %v, want it read", ok, err)
		}
	}
	err = scoped.Get(ctx, client.ObjectKey{Namespace: other, Name: "theirs"}, &corev1.Secret{})
	var outside *OutsideScopeError
	if !errors.As(err, &outside) || outside.Kind != "Secret" {
		t.Errorf("a Secret outside the scope: %v, want it refused", err)
	}
	if asked.Has("Secret", other, "theirs") {
		t.Error("the refused read reached the cluster")
	}
	if err := scoped.List(ctx, &corev1.SecretList{}); err == nil {
		t.Error("a list went through")
	}
}
