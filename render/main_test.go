package render_test

import (
	"os"
	"testing"

	"github.com/driftback/driftback/render"
)

func TestMain(m *testing.M) {
	render.ServeChild() // this test binary is also the render child
	code := m.Run()
	render.RemoveKustomizeChild()
	os.Exit(code)
}
