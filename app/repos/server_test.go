package repos

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/driftback/driftback/internal/gittest"
)

const (
	fullName  = "acme/gitops"
	testToken = "ghs_repos-test-token"
)

// server is a git server holding acme/gitops, taking testToken, and a local
// repository whose commits are pushed to it.
type server struct {
	*gittest.Server
	t     *testing.T
	url   string
	local *git.Repository
	work  string
	seq   int
}

func newServer(t *testing.T) *server {
	t.Helper()
	s := &server{Server: gittest.NewServer(t, func(token string) bool { return token == testToken }), t: t, work: t.TempDir()}
	s.url = s.URL(fullName)
	var err error
	if s.local, err = git.PlainInit(s.work, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.local.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{s.url}}); err != nil {
		t.Fatal(err)
	}
	return s
}

// commit records files on parent (none: a root commit).
func (s *server) commit(parent plumbing.Hash, files map[string]string) plumbing.Hash {
	s.t.Helper()
	wt, err := s.local.Worktree()
	if err != nil {
		s.t.Fatal(err)
	}
	if !parent.IsZero() {
		if err := wt.Checkout(&git.CheckoutOptions{Hash: parent, Force: true}); err != nil {
			s.t.Fatal(err)
		}
	}
	for name, content := range files {
		p := filepath.Join(s.work, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			s.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		s.t.Fatal(err)
	}
	s.seq++
	h, err := wt.Commit("change", &git.CommitOptions{All: true, AllowEmptyCommits: true,
		Author: &object.Signature{Name: "dev", Email: "dev@example.com", When: time.Unix(1_760_000_000+int64(s.seq), 0)}})
	if err != nil {
		s.t.Fatal(err)
	}
	return h
}

// push publishes commits to refs on the server.
func (s *server) push(refs map[string]plumbing.Hash) {
	s.t.Helper()
	if err := gittest.Push(s.local, refs, testToken); err != nil {
		s.t.Fatal(err)
	}
}
