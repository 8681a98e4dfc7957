package object_test

import (
	"os"
	"testing"

	"github.com/driftback/driftback/internal/kubetest"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }
