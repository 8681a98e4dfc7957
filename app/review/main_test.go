package review

import (
	"os"
	"testing"

	"github.com/driftback/driftback/render"
)

// TestMain makes the test binary the sandboxed render child, as driftback
// itself is in production.
func TestMain(m *testing.M) {
	render.ServeChild()
	os.Exit(m.Run())
}
