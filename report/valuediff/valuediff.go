// Package valuediff shows how one field's value changes, for a reader: a
// CustomResourceDefinition's versions as the properties their schemas gain,
// lose and change; a string holding a JSON or YAML document as the paths
// that changed; a multi-line text as a line diff. Each comes as a one-line
// summary and a block for a fenced diff. It writes plain text: the caller
// escapes the summary for where it goes (report's Markdown writer).
package valuediff

import "fmt"

// Field shows a field's change from → to of an object of the given
// apiVersion and kind at path (".spec.versions", ".data.settings.json"):
// ok is false when the two values read best inline, as they are. The
// caller leaves out values it hides (a Secret's): this package shows what
// it is given.
func Field(apiVersion, kind, path string, from, to any) (summary, block string, ok bool) {
	if changes, reworded, ok := crdDiff(apiVersion, kind, path, from, to); ok {
		return crdSummary(changes, reworded), crdBlock(changes), true
	}
	if format, changes, ok := docDiff(from, to); ok {
		return docSummary(format, changes), docDiffBlock(changes), true
	}
	if d := lineDiff(from, to); d != "" {
		return lineCount(from, to), d, true
	}
	return "", "", false
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
