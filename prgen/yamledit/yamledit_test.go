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
