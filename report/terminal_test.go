package report

import (
	"strings"
	"testing"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/report/terminal"
)

// TestTheTerminalGetsPlainText: the comment read in a terminal has no HTML,
// no hidden marker and no Markdown syntax; its table is aligned, its values
// read as they are; colour comes only when asked; and no control character
// from a value reaches the terminal.
func TestTheTerminalGetsPlainText(t *testing.T) {
	rep := imageBump()
	tg := &rep.Targets[0]
	tg.Changes = append(tg.Changes, drift.Change{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: "widgets.example.com", Action: drift.ActionDelete,
		Danger: []drift.Danger{{Reason: drift.DangerCRDRemoval, Count: 1, Message: "removing the CRD deletes every Widget with it: 1 custom resource",
			Lost: []drift.Lost{{Kind: "Widget", Namespace: "shop", Name: "red\x1b]0;pwned\x07", CreatedBy: "kubectl-create"}}}}},
		drift.Change{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "app", Action: drift.ActionUpdate,
			Fields: []object.Field{{Path: ".data.app.properties", Kind: object.FieldPR, Base: "a = 1\nb = 2\n", Desired: "a = 1\nb = 3\n", Live: "a = 1\nb = 2\n"}}})
	md := strings.Join(Comment(rep, CommentOptions{}), "")
	plain := terminal.Render(md, false)
	for _, not := range []string{"<details>", "<summary>", "<code>", "<!--", "**", "`", "\x1b", "\\["} {
		if strings.Contains(plain, not) {
			t.Errorf("the terminal text holds %q:\n%s", not, plain)
		}
	}
	for _, want := range []string{
		"driftback: what merging this pull request does to the cluster\n\n⚠️ 1 danger to review: 1 losing data.\n",
		"target                create  update  delete  unchanged  ⚠️ dangers  ↩️ live changes a sync reverts\n",
		"prod (overlays/prod)  0       2       1       1          1           0\n",
		"   - Widget/shop/red]0;pwned: not in Git; made by kubectl-create\n",
		"\n    -b = 2\n    +b = 3\n",
	} {
		if !strings.Contains(plain, want) {
			t.Errorf("the terminal text does not say %q:\n%s", want, plain)
		}
	}
	coloured := terminal.Render(md, true)
	if !strings.Contains(coloured, "\x1b[32m    +b = 3\x1b[0m") || strings.Contains(coloured, "\x1b]") {
		t.Errorf("colour is not added, or a value's control sequence got through:\n%q", coloured)
	}
}
