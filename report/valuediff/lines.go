package valuediff

import (
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// diffContext is how many unchanged lines a line diff shows around a change.
const diffContext = 3

// lineDiff is a unified diff of a field whose value is a multi-line string
// on either side (a file in a ConfigMap, a script), or "": one changed line
// of forty reads as one line, not as two escaped strings.
func lineDiff(from, to any) string {
	a, aok := from.(string)
	b, bok := to.(string)
	if (!aok && from != nil) || (!bok && to != nil) || (!strings.Contains(a, "\n") && !strings.Contains(b, "\n")) {
		return ""
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(a), B: difflib.SplitLines(b), Context: diffContext})
	if err != nil || d == "" {
		return ""
	}
	return d
}

// lineCount says how many lines a multi-line change touches.
func lineCount(from, to any) string {
	a, _ := from.(string)
	b, _ := to.(string)
	m := difflib.NewMatcher(difflib.SplitLines(a), difflib.SplitLines(b))
	removed, added := 0, 0
	for _, op := range m.GetOpCodes() {
		switch op.Tag {
		case 'r':
			removed += op.I2 - op.I1
			added += op.J2 - op.J1
		case 'd':
			removed += op.I2 - op.I1
		case 'i':
			added += op.J2 - op.J1
		}
	}
	return fmt.Sprintf("%s removed, %s added", plural(removed, "line"), plural(added, "line"))
}
