package yamledit

import (
	"strings"
	"testing"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// TestAValueIsSplicedOnItsOwnLineDeepInAStream: documents after empty ones
// and separators with comments, CRLF line ends: each value is written on
// its own line, every other byte kept.
func TestAValueIsSplicedOnItsOwnLineDeepInAStream(t *testing.T) {
	for name, nl := range map[string]string{"LF": "\n", "CRLF": "\r\n"} {
		t.Run(name, func(t *testing.T) {
			stream := strings.ReplaceAll(`a: 1 # first
---
# a note, no document
--- # the second
---
b: {c: 2}
d:
  e: "3" # quoted
`, "\n", nl)
			docs, err := ReadDocs([]byte(stream))
			if err != nil || len(docs) != 2 {
				t.Fatalf("%d documents (%v), want 2", len(docs), err)
			}
			out, err := EditAt([]byte(stream), docs, docs[1], fieldpath.MakePathOrDie("d", "e"), "4")
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.Replace(stream, `e: "3" # quoted`, `e: "4" # quoted`, 1); string(out) != want {
				t.Errorf("got\n%q\nwant\n%q", out, want)
			}
			out, err = EditAt([]byte(stream), docs, docs[0], fieldpath.MakePathOrDie("a"), int64(5))
			if err != nil || string(out) != strings.Replace(stream, "a: 1 # first", "a: 5 # first", 1) {
				t.Errorf("the first document's edit: %q (%v)", out, err)
			}
		})
	}
}

// TestAValueInAFlowCollectionKeepsItsDelimiters: a value inside a flow map
// or list is spliced without the `,`, `}` or `]` after it; text that would
// read as flow syntax or a comment is quoted.
func TestAValueInAFlowCollectionKeepsItsDelimiters(t *testing.T) {
	for _, c := range []struct {
		src   string
		path  fieldpath.Path
		value any
		want  string
	}{
		{"images:\n- {name: web, newTag: 2.0.0}\n", fieldpath.MakePathOrDie("images", 0, "newTag"), "2.1.0", "images:\n- {name: web, newTag: 2.1.0}\n"},
		{"data: {a: x, b: y} # two\n", fieldpath.MakePathOrDie("data", "a"), "x2", "data: {a: x2, b: y} # two\n"},
		{"args: [--v, 2]\n", fieldpath.MakePathOrDie("args", 1), int64(3), "args: [--v, 3]\n"},
		{"data: {a: x}\n", fieldpath.MakePathOrDie("data", "a"), "p, q", "data: {a: \"p, q\"}\n"},
		{"a: x # note\n", fieldpath.MakePathOrDie("a"), "y #z", "a: \"y #z\" # note\n"},
		// Characters of several bytes before the value.
		{"args: [\"ééé\", \"x\"]\n", fieldpath.MakePathOrDie("args", 1), "y", "args: [\"ééé\", \"y\"]\n"},
		{"data: {a: é, b: x}\n", fieldpath.MakePathOrDie("data", "b"), "y", "data: {a: é, b: y}\n"},
	} {
		docs, err := ReadDocs([]byte(c.src))
		if err != nil {
			t.Fatal(err)
		}
		out, err := EditAt([]byte(c.src), docs, docs[0], c.path, c.value)
		if err != nil || string(out) != c.want {
			t.Errorf("%q at %s = %v: got %q (%v), want %q", c.src, c.path, c.value, out, err, c.want)
		}
	}
}
