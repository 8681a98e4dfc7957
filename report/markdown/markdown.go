// Package markdown turns text from Git, the cluster or GitHub into
// GitHub-flavoured Markdown, one function per context: the only way such
// text reaches a comment, a check run, an issue or a pull request.
package markdown

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
// against; docs/security.md says what they defend.

// ZWJ breaks what GitHub would otherwise turn into a mention, an autolink or
// an email link, without changing what a reader sees.
const ZWJ = "\u200d"

// Visible shows the Unicode format characters of s (bidi overrides and
// isolates, zero-width characters, a byte-order mark, …) as <U+XXXX>: they
// reorder or hide what a reviewer reads, in code as in text.
func Visible(s string) string {
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

// NoRefs breaks GitHub's references in s without changing what a reader
// sees: text from Git or the cluster cannot link, or notify, another issue
// or pull request. Code spans and blocks hold none.
func NoRefs(s string) string {
	return references.ReplaceAllStringFunc(s, func(m string) string {
		i := len(m) - 1 // before the first digit
		return m[:i] + ZWJ + m[i:]
	})
}

// NoMarker breaks "<!--", which starts driftback's hidden markers (and any
// HTML comment), so that no text from Git, the cluster or GitHub can carry
// one, even inside code, without changing what a reader sees.
func NoMarker(s string) string {
	if !strings.Contains(s, "<!--") {
		return s
	}
	return strings.ReplaceAll(s, "<!--", "<!-"+ZWJ+"-")
}

// oneLine turns every line break into a space: code spans and cells cannot
// hold one, and a blank line ends an HTML block.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
}

// Valid replaces bytes that are not UTF-8, which renderers treat unevenly.
func Valid(s string) string {
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

// Code shows s as one inline code span, whatever it holds: the span's fence
// is longer than any run of backticks inside, and line breaks become spaces.
// Inside a code span nothing is Markdown, HTML or a mention; "<!--" is
// broken, so that it cannot carry a marker.
func Code(s string) string {
	s = NoMarker(oneLine(Visible(Valid(s))))
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

// Fenced shows s as a fenced code block with the given info string (a
// language such as "diff", or ""): the fence is longer than any run of
// backticks in s, so no line of s can close it, every kind of line break
// is a newline, and no line holds a marker.
func Fenced(s, info string) string {
	s = NoMarker(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(Visible(Valid(s))))
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	fence := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	return fence + info + "\n" + s + fence + "\n"
}

var htmlEscaper = strings.NewReplacer(
	"&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;",
	"\r\n", " ", "\r", " ", "\n", " ",
	"@", "@"+ZWJ, "://", ":"+ZWJ+"//", "www.", "www"+ZWJ+".",
	// Inline HTML in a paragraph (<sub>) is still parsed as Markdown; as
	// character references these are plain characters in both places.
	"*", "&#42;", "_", "&#95;", "`", "&#96;", "[", "&#91;", "]", "&#93;", "~", "&#126;",
	"$", "&#36;", "|", "&#124;", "\\", "&#92;", "!", "&#33;", "#", "&#35;",
)

// HTML shows s as text inside HTML (a <summary>, a <code> in one, a <sub>
// in a paragraph): no tag, no entity of its own, no Markdown syntax, no line
// break that would end the HTML block, no mention and no autolink.
func HTML(s string) string { return htmlEscaper.Replace(NoRefs(Visible(Valid(s)))) }

// HTMLCode shows s as <code> inside HTML, where Markdown code spans are not
// parsed.
func HTMLCode(s string) string { return "<code>" + HTML(s) + "</code>" }

// CodeLines shows s as <code> keeping its lines, each a line break: a
// multi-line value where a fenced block cannot go (a list item's sentence,
// a table cell).
func CodeLines(s string) string {
	lines := strings.Split(strings.TrimSuffix(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(s), "\n"), "\n")
	for i, l := range lines {
		lines[i] = HTML(l)
	}
	return "<code>" + strings.Join(lines, "<br>") + "</code>"
}

// Cell shows s as inline code in a table cell: a pipe would end the cell
// even inside a code span, so it is escaped for the table parser.
func Cell(s string) string { return strings.ReplaceAll(Code(s), "|", `\|`) }

// TextCell shows s as plain text in a table cell.
func TextCell(s string) string { return strings.ReplaceAll(Text(s), "|", `\|`) }

// Text shows s as plain Markdown text on one line: the characters that
// start inline structure (emphasis, code, links, images, HTML, entities,
// tables, strikethrough, math) are backslash-escaped, and so is a first
// character that could start a block; mentions and autolinks are broken.
// Other punctuation stays as it is, so the text reads the same in a
// terminal.
func Text(s string) string {
	s = NoRefs(strings.Trim(oneLine(Visible(Valid(s))), " \t"))
	// "1." or "2)" first would start an ordered list in a list item.
	digits := len(s) - len(strings.TrimLeft(s, "0123456789"))
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '@':
			b.WriteString("@" + ZWJ)
		case c == ':' && strings.HasPrefix(s[i:], "://"):
			b.WriteString(":" + ZWJ)
		case (c == 'w' || c == 'W') && len(s) >= i+4 && strings.EqualFold(s[i:i+4], "www."):
			b.WriteString(s[i:i+3] + ZWJ)
			i += 2
		case strings.IndexByte(InlineSyntax, c) >= 0, i == 0 && strings.IndexByte(BlockStart, c) >= 0,
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
	// InlineSyntax are the characters that start inline structure anywhere.
	InlineSyntax = "\\`*_[]<>!#|~&$"
	// BlockStart are the characters that start a block at a line's start.
	BlockStart = "-+=>"
)

// loginPattern is a GitHub login: letters, digits and single hyphens, at
// most 39, not starting or ending with a hyphen.
var loginPattern = regexp.MustCompile(`^[A-Za-z0-9](?:-?[A-Za-z0-9]){0,38}$`)

// Mention is an @-mention of a GitHub login: the one way a mention is
// written. Anything that is not a login is text, and mentions no one.
func Mention(login string) string {
	if loginPattern.MatchString(login) {
		return "@" + login
	}
	return Text(login)
}
