package prepare_test

import (
	"os"
	"testing"

	"github.com/driftback/driftback/render"
)

func TestMain(m *testing.M) {
	render.ServeChild() // this test binary is also the render child
	os.Exit(m.Run())
}
