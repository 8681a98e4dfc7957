package review

import (
	"os"
	"testing"

	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/render"
)

// TestMain makes the test binary the sandboxed render child, as driftback
// itself is in production, and gives the tests that read a cluster a real
// apiserver.
func TestMain(m *testing.M) {
	render.ServeChild()
	os.Exit(kubetest.Main(m))
}
