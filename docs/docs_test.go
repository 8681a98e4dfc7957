// Package docs holds driftback's documentation; its tests keep the README
// short and every link between the documents working.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// MaxReadmeLines bounds the README: it leads to the documents, it does not
// hold them.
const MaxReadmeLines = 150

// TestReadmeLeads proves the README stays a first screen: at most
// MaxReadmeLines lines, with the sections a newcomer looks for, and an
// example that is the demo's real comment.
func TestReadmeLeads(t *testing.T) {
	readme := read(t, filepath.Join("..", "README.md"))
	if n := strings.Count(readme, "\n"); n > MaxReadmeLines {
		t.Errorf("README.md has %d lines, over %d: move the detail into docs/", n, MaxReadmeLines)
	}
	for _, h := range []string{"## Quick start", "## Try it on your repository", "## Run it as a GitHub App", "## Run it in CI", "## Documentation", "## Development"} {
		if !strings.Contains(readme, "\n"+h+"\n") {
			t.Errorf("README.md has no section %q", h)
		}
	}
	// The example is quoted from the demo's comment, which a test of the
	// command keeps equal to what driftback prints: the README cannot show
	// a comment driftback does not write.
	demo := read(t, "demo-comment.md")
	quoted := 0
	for _, line := range strings.Split(readme, "\n") {
		text, ok := strings.CutPrefix(line, "> ")
		if !ok || text == "" {
			continue
		}
		quoted++
		if !strings.Contains(demo, text+"\n") {
			t.Errorf("the README's example line is not in docs/demo-comment.md: %s", text)
		}
	}
	if quoted < 5 {
		t.Errorf("the README quotes %d lines of the demo's comment; want its verdict, table and dangers", quoted)
	}
	if !strings.Contains(readme, "](docs/demo-comment.md)") {
		t.Error("the README does not link the whole demo comment")
	}
}

// TestLinks proves every relative link in the README, deploy/README.md and
// docs/ reaches a file that exists and, with a #fragment, a heading in it
// (as GitHub makes anchors from headings).
func TestLinks(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "README.md"), filepath.Join("..", "deploy", "README.md"))
	link := regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	for _, f := range files {
		for _, m := range link.FindAllStringSubmatch(withoutCode(read(t, f)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, fragment, _ := strings.Cut(target, "#")
			file := f
			if path != "" {
				file = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s: link %s: %v", f, target, err)
					continue
				}
			}
			if fragment == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			if !anchors(read(t, file))[fragment] {
				t.Errorf("%s: link %s: %s has no heading with that anchor", f, target, file)
			}
		}
	}
}

// anchors are the fragments GitHub gives a Markdown file's headings.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(withoutCode(doc), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// withoutCode blanks fenced code blocks: what they hold is not Markdown.
func withoutCode(doc string) string {
	var b strings.Builder
	code := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			code = !code
			b.WriteString("\n")
			continue
		}
		if !code {
			b.WriteString(line)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
