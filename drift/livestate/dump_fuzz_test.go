package livestate

import (
	"context"
	"testing"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

// FuzzDumpReader: any file in a --live folder is read or refused with an
// error, never a panic, and whatever is read can be compared.
func FuzzDumpReader(f *testing.F) {
	for _, s := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: b\ndata:\n  k: v\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: s}\n  data: {k: dg==}\n",
		`{"apiVersion":"v1","kind":"List","items":[{"kind":"X"},null,3]}`,
		"---\n---\nkind: [\n",
		"a: &a [*a]\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x]\n",
		"\xff\xfe",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		objs, err := decodeObjects(b)
		if err != nil {
			return
		}
		r := NewObjectReader(objs)
		for _, o := range objs {
			if _, err := r.Get(context.Background(), []object.Ref{object.RefOf(o)}); err != nil {
				t.Fatalf("a read object cannot be got: %v", err)
			}
		}
		if _, err := drift.Compare(context.Background(), r, drift.Input{Path: "fuzz", Head: objs}, drift.DefaultOptions()); err != nil {
			return // refused as a whole, with a reason
		}
	})
}
