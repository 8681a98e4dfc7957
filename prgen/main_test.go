package prgen_test

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/render"
)

func TestMain(m *testing.M) {
	render.ServeChild()
	ctrllog.SetLogger(logr.Discard())
	os.Exit(kubetest.Main(m))
}
