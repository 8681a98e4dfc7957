package reconcile

import (
	"os"
	"testing"

	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/render"
)

func TestMain(m *testing.M) {
	render.ServeChild()
	os.Exit(kubetest.Main(m))
}
