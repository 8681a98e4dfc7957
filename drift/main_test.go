package drift_test

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driftback/driftback/internal/kubetest"
)

func TestMain(m *testing.M) {
	// The dry-run engine's client logs through controller-runtime; these
	// tests read results, not logs.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(kubetest.Main(m))
}
