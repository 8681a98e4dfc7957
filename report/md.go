package report

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The functions in this file are the only way text from Git, the cluster or
// GitHub becomes Markdown. Each is for one context; GitHub-flavoured Markdown
// (cmark-gfm, then GitHub's own mention and link filters) is what they guard
// against. See ../shared/notes/markdown-safety.md for the rules they follow.

// zwj breaks what GitHub would otherwise turn into a mention, an autolink or
// an email link, without changing what a reader sees.
const zwj = "\u200d"

// visible shows the Unicode format characters of s (bidi overrides and
// isolates, zero-width characters, a byte-order mark, …) as <U+XXXX>: they
// reorder or hide what a reviewer reads, in code as in text.
func visible(s string) string {
	if !strings.ContainsFunc(s, isFormat) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isFormat(r) {
			fmt.Fprintf(&b, "<U+%04X>", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isFormat(r rune) bool { return unicode.Is(unicode.Cf, r) }

// references are what GitHub turns into a cross-reference to an issue or a
// pull request in text, which notifies it and, after "fixes", closes it:
// #123 (and owner/repo#123) and GH-123. A bare commit SHA only links, and
// only to a commit of the repository; breaking every hexadecimal run would
// put invisible characters in most generated Kubernetes names.
var references = regexp.MustCompile(`#[0-9]|(?i:\bgh-[0-9])`)

// noRefs breaks GitHub's references in s without changing what a reader
// sees: text from Git or the cluster cannot link, or notify, another issue
// or pull request. Code spans and blocks hold none.
func noRefs(s string) string {
	return references.ReplaceAllStringFunc(s, func(m string) string {
		i := len(m) - 1 // before the first digit
		return m[:i] + zwj + m[i:]
	})
}

// noMarker breaks "<!--", which starts driftback's hidden markers (and any
// HTML comment), so that no text from Git, the cluster or GitHub can carry
// one, even inside code, without changing what a reader sees.
func noMarker(s string) string {
	if !strings.Contains(s, "<!--") {
		return s
	}
	return strings.ReplaceAll(s, "<!--", "<!-"+zwj+"-")
}

// oneLine turns every line break into a space: code spans and cells cannot
// hold one, and a blank line ends an HTML block.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
}

// valid replaces bytes that are not UTF-8, which renderers treat unevenly.
func valid(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c rune) int {
	longest, run := 0, 0
	for _, r := range s {
		if r == c {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

// code shows s as one inline code span, whatever it holds: the span's fence
// is longer than any run of backticks inside, and line breaks become spaces.
// Inside a code span nothing is Markdown, HTML or a mention; "<!--" is
// broken, so that it cannot carry a marker.
func code(s string) string {
	s = noMarker(oneLine(visible(valid(s))))
	if s == "" {
		return "` `"
	}
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") || (strings.HasPrefix(s, " ") && strings.HasSuffix(s, " ")) {
		// A space on each side is stripped by the renderer, once; it keeps
		// a backtick at the edge from joining the fence.
		s = " " + s + " "
	}
	return fence + s + fence
}

// fenced shows s as a fenced code block with the given info string (a
// language such as "diff", or ""): the fence is longer than any run of
// backticks in s, so no line of s can close it, every kind of line break
// is a newline, and no line holds a marker.
func fenced(s, info string) string {
	s = noMarker(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(visible(valid(s))))
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	fence := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	return fence + info + "\n" + s + fence + "\n"
}

var htmlEscaper = strings.NewReplacer(
	"&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;",
	"\r\n", " ", "\r", " ", "\n", " ",
	"@", "@"+zwj, "://", ":"+zwj+"//", "www.", "www"+zwj+".",
	// Inline HTML in a paragraph (<sub>) is still parsed as Markdown; as
	// character references these are plain characters in both places.
	"*", "&#42;", "_", "&#95;", "`", "&#96;", "[", "&#91;", "]", "&#93;", "~", "&#126;",
	"$", "&#36;", "|", "&#124;", "\\", "&#92;", "!", "&#33;", "#", "&#35;",
)

// html shows s as text inside HTML (a <summary>, a <code> in one, a <sub>
// in a paragraph): no tag, no entity of its own, no Markdown syntax, no line
// break that would end the HTML block, no mention and no autolink.
func html(s string) string { return htmlEscaper.Replace(noRefs(visible(valid(s)))) }

// htmlCode shows s as <code> inside HTML, where Markdown code spans are not
// parsed.
func htmlCode(s string) string { return "<code>" + html(s) + "</code>" }

// cell shows s as inline code in a table cell: a pipe would end the cell
// even inside a code span, so it is escaped for the table parser.
func cell(s string) string { return strings.ReplaceAll(code(s), "|", `\|`) }

// textCell shows s as plain text in a table cell.
func textCell(s string) string { return strings.ReplaceAll(text(s), "|", `\|`) }

// text shows s as plain Markdown text on one line: the characters that
// start inline structure (emphasis, code, links, images, HTML, entities,
// tables, strikethrough, math) are backslash-escaped, and so is a first
// character that could start a block; mentions and autolinks are broken.
// Other punctuation stays as it is, so the text reads the same in a
// terminal.
func text(s string) string {
	s = noRefs(strings.Trim(oneLine(visible(valid(s))), " \t"))
	// "1." or "2)" first would start an ordered list in a list item.
	digits := len(s) - len(strings.TrimLeft(s, "0123456789"))
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '@':
			b.WriteString("@" + zwj)
		case c == ':' && strings.HasPrefix(s[i:], "://"):
			b.WriteString(":" + zwj)
		case (c == 'w' || c == 'W') && len(s) >= i+4 && strings.EqualFold(s[i:i+4], "www."):
			b.WriteString(s[i:i+3] + zwj)
			i += 2
		case strings.IndexByte(inlineSyntax, c) >= 0, i == 0 && strings.IndexByte(blockStart, c) >= 0,
			i == digits && digits > 0 && (c == '.' || c == ')'):
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

const (
	// inlineSyntax are the characters that start inline structure anywhere.
	inlineSyntax = "\\`*_[]<>!#|~&$"
	// blockStart are the characters that start a block at a line's start.
	blockStart = "-+=>"
)
