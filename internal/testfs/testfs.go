// Package testfs writes the files of a test's repository tree, and reads
// them as a render tree; Objects parses a test's objects.
package testfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/render"
)

// Objects parses each of docs, one YAML object each; a failure fails the
// test.
func Objects(t testing.TB, docs ...string) []*unstructured.Unstructured {
	t.Helper()
	out := make([]*unstructured.Unstructured, 0, len(docs))
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

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
