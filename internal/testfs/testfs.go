// Package testfs writes the files of a test's repository tree, and reads
// them as a render tree.
package testfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/driftback/driftback/render"
)

// Write writes files (slash-separated paths below dir) with their parent
// directories; a failure fails the test.
func Write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Tree writes files to a temporary directory and reads it as a tree.
func Tree(t testing.TB, files map[string]string) *render.Tree {
	t.Helper()
	dir := t.TempDir()
	Write(t, dir, files)
	tree, err := render.DirTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// Read reads every file below dir, by slash-separated path from dir.
func Read(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
