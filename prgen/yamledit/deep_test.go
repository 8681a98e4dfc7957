package yamledit

import (
	"testing"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// TestACollectionOfTheSameShapeIsSplicedScalarByScalar: a list or map
// whose new value has the same keys and as many items is written by its
// changed scalars only, each in its own style (a flow list's quoted string
// stays quoted, an integer stays plain, a trailing comment stays); a new
// item is not spliced (the document is rewritten).
func TestACollectionOfTheSameShapeIsSplicedScalarByScalar(t *testing.T) {
	src := "spec:\n  # how it starts\n  args: [\"--port\", \"8080\"] # keep\n  ports:\n    - name: http\n      port: 80 # public\n    - name: admin\n      port: 9000\n"
	docs, err := ReadDocs([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path  string
		value any
		want  string
	}{
		{"args", []any{"--port", "9090"}, "spec:\n  # how it starts\n  args: [\"--port\", \"9090\"] # keep\n  ports:\n    - name: http\n      port: 80 # public\n    - name: admin\n      port: 9000\n"},
		{"ports", []any{map[string]any{"name": "http", "port": int64(8080)}, map[string]any{"name": "admin", "port": int64(9000)}},
			"spec:\n  # how it starts\n  args: [\"--port\", \"8080\"] # keep\n  ports:\n    - name: http\n      port: 8080 # public\n    - name: admin\n      port: 9000\n"},
	} {
		n := LookupAt(docs[0], fieldpath.MakePathOrDie("spec", c.path))
		got, ok := SpliceDeep([]byte(src), n.YNode(), c.value)
		if !ok || string(got) != c.want {
			t.Errorf("%s: spliced %v:\n%s\nwant:\n%s", c.path, ok, got, c.want)
		}
	}
	n := LookupAt(docs[0], fieldpath.MakePathOrDie("spec", "ports"))
	added := []any{map[string]any{"name": "http", "port": int64(80)}, map[string]any{"name": "admin", "port": int64(9000)}, map[string]any{"name": "metrics", "port": int64(9100)}}
	if _, ok := SpliceDeep([]byte(src), n.YNode(), added); ok {
		t.Error("a list with a new item was spliced: its shape differs")
	}
	if _, ok := SpliceDeep([]byte(src), n.YNode(), []any{map[string]any{"name": "http", "port": int64(80)}, map[string]any{"name": "admin", "port": int64(9000)}}); ok {
		t.Error("a list that does not change was spliced")
	}
	// A null written as nothing has no token to replace: not spliced
	// (a glued "-x" would read as another value).
	nulls := "a:\n  -\n  - y\n"
	nd, err := ReadDocs([]byte(nulls))
	if err != nil {
		t.Fatal(err)
	}
	if out, ok := SpliceDeep([]byte(nulls), LookupAt(nd[0], fieldpath.MakePathOrDie("a")).YNode(), []any{"x", "y"}); ok {
		t.Errorf("a null item was spliced:\n%s", out)
	}
}
