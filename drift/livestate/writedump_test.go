package livestate_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/testfs"
)

// TestAWrittenDumpReadsAsWhatItHolds: a dump written for a render in
// namespace shop holds the rendered kinds, every namespaced kind there,
// PVCs and Namespaces, and the custom resources of the render's CRD in
// every namespace; read back, it knows nothing of other namespaces, of
// kinds it did not read, or of Secrets, which it never holds.
func TestAWrittenDumpReadsAsWhatItHolds(t *testing.T) {
	ctx := context.Background()
	cluster := livestate.NewObjectReader(testfs.Objects(t,
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: shop}\ndata: {a: b}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: billing}\n",
		"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: shop}\n",
		"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: runner, namespace: shop}\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: token, namespace: shop}\ndata: {t: c2VjcmV0}\n",
		"apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: blue, namespace: billing}\n",
		// The cluster's admission rules are dumped whole, whatever the render.
		"apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: pinned}\nspec: {}\n"))
	render := testfs.Objects(t,
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: shop}\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: token, namespace: shop}\n",
		"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec: {group: example.com, names: {kind: Widget}, scope: Namespaced}\n",
		// Git may name a core kind in a CRD: no Secret is read for it.
		"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: secrets.core}\nspec: {group: '', names: {kind: Secret}, scope: Namespaced}\n")
	dir := t.TempDir()
	got, err := livestate.WriteDump(ctx, cluster, render, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Objects != 6 || strings.Join(got.Namespaces, ",") != "shop" {
		t.Errorf("wrote %d objects in %v; want 6 (no Secret, no CRD: the cluster has none, nothing of billing but its Widget; the policy) in shop", got.Objects, got.Namespaces)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), "c2VjcmV0") || strings.Contains(string(b), "kind: Secret") {
			t.Errorf("%s holds a Secret:\n%s", f, b)
		}
	}
	dump, err := livestate.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	cm, secret, widget, deploy := schema.GroupKind{Kind: "ConfigMap"}, schema.GroupKind{Kind: "Secret"}, schema.GroupKind{Group: "example.com", Kind: "Widget"}, schema.GroupKind{Group: "apps", Kind: "Deployment"}
	for _, c := range []struct {
		gk   schema.GroupKind
		ns   string
		lack bool
	}{
		{cm, "shop", false}, {schema.GroupKind{Kind: "ServiceAccount"}, "shop", false}, {schema.GroupKind{Kind: "PersistentVolumeClaim"}, "shop", false},
		{cm, "billing", true}, {widget, "billing", false}, {secret, "shop", true}, {deploy, "shop", true},
		{schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}, "", false},
	} {
		if why := object.LacksIn(dump, c.gk, c.ns); (why != "") != c.lack {
			t.Errorf("%s in %s: lacks %q; want lacking %v", c.gk, c.ns, why, c.lack)
		}
	}
	if l, err := dump.List(ctx, widget, "", nil); err != nil || len(l) != 1 {
		t.Errorf("the Widget in billing: %v %v", l, err)
	}
	if index, err := os.ReadFile(filepath.Join(dir, livestate.DumpIndexFile)); err != nil || !strings.Contains(string(index), "everywhere:\n- example.com/Widget\n") {
		t.Errorf("the index does not say the Widgets were read everywhere: %v\n%s", err, index)
	}

	// The claim is deleted; a new dump into the same folder says so.
	cluster = livestate.NewObjectReader(testfs.Objects(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: shop}\n"))
	if _, err := livestate.WriteDump(ctx, cluster, render, dir); err != nil {
		t.Fatal(err)
	}
	if dump, err = livestate.ReadDir(dir); err != nil {
		t.Fatal(err)
	}
	if got, err := dump.Get(ctx, []object.Ref{{Version: "v1", Kind: "PersistentVolumeClaim", Namespace: "shop", Name: "data"}}); err != nil || len(got) != 0 {
		t.Errorf("a second dump still holds the deleted claim: %v %v", got, err)
	}
	// A folder that is not a dump is never replaced.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := livestate.WriteDump(ctx, cluster, render, other); err == nil || !strings.Contains(err.Error(), "holds no earlier dump") {
		t.Errorf("a folder of other files: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(other, "notes.txt")); err != nil || string(b) != "mine" {
		t.Errorf("the folder's own file: %q %v", b, err)
	}
}
