package drift

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestArgoCDTrackingFollowsItsMethod: with annotation tracking (Argo CD 3's
// default) a label that happens to carry the application's name owns
// nothing; with label tracking the annotation owns nothing.
func TestArgoCDTrackingFollowsItsMethod(t *testing.T) {
	o := &unstructured.Unstructured{}
	o.SetAnnotations(map[string]string{argoTrackingID: "shop:apps/Deployment:shop/web"})
	for _, tc := range []struct {
		method            string
		labels, annotated bool
	}{
		{"", true, true},
		{"label", true, false},
		{"annotation", false, true},
		{"annotation+label", false, true},
	} {
		tr := Tracking{ArgoCDApp: "shop", ArgoCDInstanceLabel: "example.com/app", ArgoCDTrackingMethod: tc.method}
		sels, err := tr.selectors()
		if err != nil {
			t.Fatal(err)
		}
		if got := len(sels) == 1; got != tc.labels {
			t.Errorf("method %q: label selector %v, want %v", tc.method, sels, tc.labels)
		}
		if tc.labels && sels[0].String() != "example.com/app=shop" {
			t.Errorf("method %q: selector %s, want the configured instance label", tc.method, sels[0])
		}
		if got := tr.annotated(o); got != tc.annotated {
			t.Errorf("method %q: annotated %v, want %v", tc.method, got, tc.annotated)
		}
	}
}
