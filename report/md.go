package report

import "github.com/driftback/driftback/report/markdown"

// The report's names for the markdown package's functions: the only way
// text from Git, the cluster or GitHub becomes Markdown here.
var (
	zwj       = markdown.ZWJ
	visible   = markdown.Visible
	noRefs    = markdown.NoRefs
	noMarker  = markdown.NoMarker
	valid     = markdown.Valid
	code      = markdown.Code
	fenced    = markdown.Fenced
	html      = markdown.HTML
	htmlCode  = markdown.HTMLCode
	codeLines = markdown.CodeLines
	cell      = markdown.Cell
	textCell  = markdown.TextCell
	text      = markdown.Text
	mentionOf = markdown.Mention
)
