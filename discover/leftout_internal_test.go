package discover

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftback/driftback/internal/kubetest"
)

// TestAKindNotServedLeavesNothingOut: a reconciler whose CRD the cluster
// does not serve has no object to leave out (the apiserver answers
// NotFound), which is not an error.
func TestAKindNotServedLeavesNothingOut(t *testing.T) {
	env := kubetest.New(t)
	kubetest.InstallCRDs(t, env, kubetest.ReconcilerCRDs(t)...)
	saved := leftOutKinds
	t.Cleanup(func() { leftOutKinds = saved })
	leftOutKinds = append(leftOutKinds[:len(leftOutKinds):len(leftOutKinds)], struct {
		gvr  schema.GroupVersionResource
		kind string
		flux bool
	}{schema.GroupVersionResource{Group: "nothing.example.com", Version: "v1", Resource: "gizmos"}, "gizmos", true})
	got, err := CountLeftOut(context.Background(), env.Config, Options{Flux: true, ArgoCD: true, Namespaces: []string{env.Namespace}})
	if err != nil {
		t.Fatalf("a kind not served is an error: %v", err)
	}
	for _, l := range got {
		if l.Kind == "gizmos" {
			t.Errorf("gizmos left out: %v", l)
		}
	}
}
