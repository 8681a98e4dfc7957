// Command driftback-render is driftback's render child for kustomize
// overlays: the sandboxed process that builds them, linking kustomize and
// nothing of Helm, the Kubernetes client or the App, so that it starts in a
// fraction of driftback's time. driftback runs it when it is installed
// beside driftback and of the same build, for overlays that inflate no
// chart; everything else, and every render when it is missing, goes to
// driftback itself. It is not run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/driftback/driftback/render/child"
)

func main() {
	child.Serve(nil) // never returns in a render child
	fmt.Fprintf(os.Stderr, "driftback-render is driftback's render child: driftback runs it (it renders nothing by itself).\n")
	os.Exit(2)
}
