package driftloop

import (
	"os"
	"testing"

	"github.com/driftback/driftback/internal/kubetest"
)

// TestMain stops the shared apiserver the shard tests start, once they end.
func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }
