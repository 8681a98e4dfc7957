package render_test

import (
	"testing"

	"github.com/driftback/driftback/render"
)

// TestSameClosure: an overlay whose build reads the same files with the
// same content at both sides renders the same; one whose base, own file
// or list of files changed does not.
func TestSameClosure(t *testing.T) {
	files := func(image string) map[string]any {
		return map[string]any{
			"base/kustomization.yaml": "resources: [web.yaml]\n",
			"base/web.yaml":           "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {image: \"" + image + "\"}\n",
			"dev/kustomization.yaml":  "resources: [../base]\n",
			"solo/kustomization.yaml": "resources: [cm.yaml]\n",
			"solo/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: solo}\n",
		}
	}
	tree := func(f map[string]any) *render.Tree {
		dir := t.TempDir()
		writeFiles(t, dir, f)
		tr, err := render.DirTree(dir)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	a, b := tree(files("1.0")), tree(files("1.1"))
	if !render.SameClosure(a, b, "solo") {
		t.Error("an overlay none of whose files changed does not render the same")
	}
	if render.SameClosure(a, b, "dev") {
		t.Error("an overlay whose base changed renders the same")
	}
	more := files("1.0")
	more["solo/kustomization.yaml"] = "resources: [cm.yaml, other.yaml]\n"
	more["solo/other.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n"
	if render.SameClosure(a, tree(more), "solo") {
		t.Error("an overlay that reads another file renders the same")
	}
}
