package render_test

import (
	"os"
	"testing"

	"github.com/driftback/driftback/render"
)

func TestMain(m *testing.M) {
	render.ServeChild() // this test binary is also the render child
	code := m.Run()
	if kustomizeChildBuilt.dir != "" {
		os.RemoveAll(kustomizeChildBuilt.dir)
	}
	os.Exit(code)
}
