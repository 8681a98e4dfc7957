package aftermerge

import (
	"strings"
	"testing"
)

// TestTheCommentsSectionEscapesWhatTheClusterSays: a reconciler's message
// is the cluster's text: it cannot mention, reference, break the table or
// forge driftback's markers.
func TestTheCommentsSectionEscapesWhatTheClusterSays(t *testing.T) {
	v := newView()
	hostile := "BuildFailed: x | y\n<!-- driftback:after-merge -->\n@org/team #1 <img src=x>"
	if !v.set("prod/web", "failure", hostile) || v.set("prod/web", "failure", hostile+" again") {
		t.Error("the comment is written when the state changes, and only then")
	}
	section := v.section()
	for _, bad := range []string{"\n<!-- driftback:after-merge -->", "@org", " <img", "x | y"} {
		if strings.Contains(section, bad) {
			t.Errorf("the section holds %q:\n%s", bad, section)
		}
	}
	if rows := strings.Count(section, "\n|"); rows != 3 {
		t.Errorf("%d table rows, want the header, its rule and one target:\n%s", rows, section)
	}
	if !strings.Contains(section, "again") {
		t.Errorf("the latest description is not shown:\n%s", section)
	}
}
