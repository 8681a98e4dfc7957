package charts

import (
	"os"
	"testing"

	"github.com/driftback/driftback/render"
)

func TestMain(m *testing.M) {
	render.ServeChild()
	os.Exit(m.Run())
}
