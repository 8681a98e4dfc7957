package discover

import (
	"strings"
	"testing"
)

// FuzzRepoOf: a URL from a cluster object is hostile; whatever it is, a
// repository read from it is owner/name and nothing else.
func FuzzRepoOf(f *testing.F) {
	for _, s := range []string{"https://github.com/acme/gitops.git", "git@github.com:a/b", "ssh://git@github.com:22/a/b", "https://github.com/a/b/../c", "git@@github.com::a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, url string) {
		repo, ok := RepoOf(url, "github.com")
		if !ok {
			if repo != "" {
				t.Fatalf("RepoOf(%q) = %q without ok", url, repo)
			}
			return
		}
		owner, name, _ := strings.Cut(repo, "/")
		if owner == "" || name == "" || strings.Contains(name, "/") || strings.HasSuffix(repo, ".git") ||
			owner == ".." || name == ".." || strings.ContainsAny(repo, " ?#%\\") {
			t.Fatalf("RepoOf(%q) = %q, not owner/name", url, repo)
		}
	})
}

// FuzzJQPointer: an ignoreDifferences expression is converted to a pointer
// or refused, never guessed into something that ignores the whole object.
func FuzzJQPointer(f *testing.F) {
	for _, s := range []string{".spec.replicas", `.a[] | select(.name == "x") | .b`, `.a["b/c"]`, ".a[0]", "|", `.a[] | select(.name == "x"`, ".[]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		p, ok := JQPointer(expr)
		if ok && (len(p) < 2 || p[0] != '/' || strings.Contains(p, "//")) {
			t.Fatalf("JQPointer(%q) = %q: not a pointer to a field", expr, p)
		}
	})
}
