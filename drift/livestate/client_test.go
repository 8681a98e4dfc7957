package livestate_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/internal/kubetest"
)

// TestDeprecationWarningsAreNotPrinted: a read the apiserver answers with a
// deprecation warning (v1 ComponentStatus) prints nothing through client-go's
// log, where it would reach a command's stderr.
func TestDeprecationWarningsAreNotPrinted(t *testing.T) {
	env := kubetest.New(t)
	var buf bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&buf)
	t.Cleanup(func() { klog.SetOutput(nil); klog.LogToStderr(true) })
	dyn, err := dynamic.NewForConfig(livestate.Configure(env.Setup, livestate.ClientLimits{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "componentstatuses"}).List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	klog.Flush()
	if strings.Contains(buf.String(), "deprecated") {
		t.Errorf("client-go printed the apiserver's warning: %s", buf.String())
	}
	// Without driftback's configuration the same read prints it: the test
	// sees what it claims to hide.
	plain, err := dynamic.NewForConfig(env.Setup)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Resource(schema.GroupVersionResource{Version: "v1", Resource: "componentstatuses"}).List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	klog.Flush()
	if !strings.Contains(buf.String(), "deprecated") {
		t.Fatalf("the apiserver sent no deprecation warning for v1 ComponentStatus, so this test proves nothing: %q", buf.String())
	}
}
