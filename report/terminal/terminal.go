// Package terminal shows driftback's Markdown (report's comment, a drift
// plan) in a terminal, and keeps control characters from reaching it.
package terminal

import (
	stdhtml "html"
	"io"
	"regexp"
	"strings"
	"unicode"

	"github.com/driftback/driftback/report/markdown"
)

// ANSI styles for a terminal that shows colour.
const (
	ansiBold  = "\x1b[1m"
	ansiCode  = "\x1b[36m"
	ansiAdd   = "\x1b[32m"
	ansiDel   = "\x1b[31m"
	ansiReset = "\x1b[0m"
)

// Render turns driftback's own Markdown (a comment, a drift plan) into
// plain text for a terminal: no HTML, no hidden markers, no Markdown
// syntax; tables aligned, collapsed blocks indented, code spans and diff
// lines coloured when colour is true. Every control character a value could
// carry is dropped before driftback adds its own, so nothing from Git or the
// cluster can steer the terminal.
func Render(md string, colour bool) string {
	style := painter(colour)
	var out strings.Builder
	lines := strings.Split(noControls(md), "\n")
	depth := 0
	indent := func() string { return strings.Repeat("  ", depth) }
	fence := ""
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case fence != "":
			if l == fence {
				fence = ""
				continue
			}
			line := indent() + "  " + l
			if strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++") {
				line = style.paint(ansiAdd, line)
			} else if strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "---") {
				line = style.paint(ansiDel, line)
			}
			out.WriteString(line + "\n")
		case strings.HasPrefix(l, "```"):
			fence = l[:len(l)-len(strings.TrimLeft(l, "`"))]
		case strings.HasPrefix(l, "<!-- "):
			// A hidden marker: for GitHub only.
		case strings.HasPrefix(l, "<details><summary>"):
			summary := strings.TrimSuffix(strings.TrimPrefix(l, "<details><summary>"), "</summary>")
			out.WriteString(indent() + inlineHTML(summary, style) + "\n")
			depth++
		case l == "</details>":
			depth = max(0, depth-1)
		case strings.HasPrefix(l, "|"):
			var rows [][]string
			for ; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
				if !tableRule.MatchString(lines[i]) {
					rows = append(rows, cells(lines[i], style))
				}
			}
			i--
			out.WriteString(alignTable(rows, indent()))
		case strings.HasPrefix(l, "#"):
			out.WriteString(indent() + style.paint(ansiBold, inlineMarkdown(strings.TrimLeft(strings.TrimLeft(l, "#"), " "), style)) + "\n")
		case l == "":
			if !strings.HasSuffix(out.String(), "\n\n") {
				out.WriteString("\n")
			}
		default:
			out.WriteString(indent() + inlineMarkdown(l, style) + "\n")
		}
	}
	return strings.TrimLeft(out.String(), "\n")
}

// painter styles text when the terminal shows colour.
type painter bool

func (p painter) paint(code, s string) string {
	if !p || s == "" {
		return s
	}
	return code + s + ansiReset
}

// NoControls is w without control characters but line breaks and tabs:
// what a command prints to a terminal from Git, the cluster or GitHub
// never moves its cursor, colours it or rewrites what it shows.
func NoControls(w io.Writer) io.Writer { return noControlsWriter{w} }

type noControlsWriter struct{ w io.Writer }

func (n noControlsWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(n.w, noControls(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// noControls drops control characters but line breaks and tabs.
func noControls(s string) string {
	return strings.Map(func(r rune) rune {
		if r != '\n' && r != '\t' && unicode.IsControl(r) || r == '\u200d' {
			return -1
		}
		return r
	}, s)
}

var (
	tableRule    = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+\s*$`)
	htmlCodeSpan = regexp.MustCompile(`<code>(.*?)</code>`)
)

// inlineHTML reads a summary line: <code> spans, then entities.
func inlineHTML(s string, style painter) string {
	var b strings.Builder
	for {
		m := htmlCodeSpan.FindStringSubmatchIndex(s)
		if m == nil {
			b.WriteString(stdhtml.UnescapeString(s))
			return b.String()
		}
		b.WriteString(stdhtml.UnescapeString(s[:m[0]]))
		b.WriteString(style.paint(ansiCode, stdhtml.UnescapeString(s[m[2]:m[3]])))
		s = s[m[1]:]
	}
}

// inlineMarkdown reads a line driftback wrote: code spans (fenced by a run
// of backticks, with a space padding each side when both are there), bold,
// and backslash escapes.
func inlineMarkdown(s string, style painter) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case s[i] == '`':
			n := len(s[i:]) - len(strings.TrimLeft(s[i:], "`"))
			fence := s[i : i+n]
			end := strings.Index(s[i+n:], fence)
			if end < 0 {
				b.WriteString(fence)
				i += n
				continue
			}
			content := s[i+n : i+n+end]
			if len(content) >= 2 && content[0] == ' ' && content[len(content)-1] == ' ' {
				content = content[1 : len(content)-1]
			}
			b.WriteString(style.paint(ansiCode, content))
			i += n + end + n
		case strings.HasPrefix(s[i:], "**"):
			end := strings.Index(s[i+2:], "**")
			if end < 0 {
				b.WriteString("**")
				i += 2
				continue
			}
			b.WriteString(style.paint(ansiBold, inlineMarkdown(s[i+2:i+2+end], style)))
			i += 2 + end + 2
		case s[i] == '\\' && i+1 < len(s) && strings.IndexByte(markdown.InlineSyntax+markdown.BlockStart+".)", s[i+1]) >= 0:
			b.WriteByte(s[i+1])
			i += 2
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}

// cells splits a table row at its unescaped pipes and reads each cell.
func cells(row string, style painter) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|")
	var out []string
	var cur strings.Builder
	for i := 0; i < len(row); i++ {
		if row[i] == '\\' && i+1 < len(row) && row[i+1] == '|' {
			cur.WriteString(`\|`)
			i++
			continue
		}
		if row[i] == '|' {
			out = append(out, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(row[i])
	}
	out = append(out, cur.String())
	for i, c := range out {
		out[i] = inlineMarkdown(strings.ReplaceAll(strings.TrimSpace(c), `\|`, "|"), style)
	}
	return out
}

// alignTable writes rows in columns as wide as their widest cell.
func alignTable(rows [][]string, indent string) string {
	width := map[int]int{}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], visibleWidth(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(indent)
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-visibleWidth(c)))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// ansiSequence matches the styles driftback adds.
var ansiSequence = regexp.MustCompile("\x1b\\[[0-9;]*m")

// visibleWidth counts the runes a cell shows.
func visibleWidth(s string) int { return len([]rune(ansiSequence.ReplaceAllString(s, ""))) }
