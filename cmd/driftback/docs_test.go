package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCLIReference proves docs/cli.md documents every command and every
// flag each one has, in its section's flags table, and no flag a command
// does not have: a flag added, renamed or removed in code fails here until
// the reference says so.
func TestCLIReference(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	for _, part := range strings.Split(string(doc), "\n## `driftback ")[1:] {
		name, _, _ := strings.Cut(part, "`")
		sections[name] = part
	}
	for _, c := range commands() {
		section, ok := sections[c.name]
		if !ok {
			t.Errorf("docs/cli.md has no section ## `driftback %s`", c.name)
			continue
		}
		delete(sections, c.name)
		inCode := flagsOf(t, c)
		inDoc := tableFlags(section)
		for _, f := range inCode {
			if !slices.Contains(inDoc, f) {
				t.Errorf("driftback %s --%s is not in the flags table of its section in docs/cli.md", c.name, f)
			}
		}
		for _, f := range inDoc {
			if !slices.Contains(inCode, f) {
				t.Errorf("docs/cli.md documents driftback %s --%s, which the command does not have", c.name, f)
			}
		}
	}
	for name := range sections {
		t.Errorf("docs/cli.md documents driftback %s, which is no command", name)
	}
}

// flagsOf lists a command's flags, as its -h prints them.
func flagsOf(t *testing.T, c command) []string {
	t.Helper()
	var help bytes.Buffer
	if code := c.run([]string{"-h"}, io.Discard, &help); code != exitOK {
		t.Fatalf("driftback %s -h: exit %d", c.name, code)
	}
	var out []string
	for _, m := range usageFlag.FindAllStringSubmatch(help.String(), -1) {
		out = append(out, m[1])
	}
	return out
}

// tableFlags lists the flags in the first column of a section's tables.
func tableFlags(section string) []string {
	var out []string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `-") {
			continue
		}
		cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		// --name, or -x for a one-letter flag.
		for _, m := range regexp.MustCompile("`--?([a-z0-9-]+)").FindAllStringSubmatch(cell, -1) {
			out = append(out, m[1])
		}
	}
	return out
}
