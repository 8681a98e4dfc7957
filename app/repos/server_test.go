package repos

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/fluxcd/pkg/gittestserver"
)

const (
	fullName  = "acme/gitops"
	testToken = "ghs_repos-test-token"
)

// server is a smart-HTTP git server holding acme/gitops, that takes the
// installation token as GitHub's does, and a local repository whose commits
// are pushed to it.
type server struct {
	t     *testing.T
	url   string
	local *git.Repository
	work  string
	seq   int
	// uploads counts the fetches served.
	uploads atomic.Int64
}

func newServer(t *testing.T) *server {
	t.Helper()
	gs, err := gittestserver.NewTempGitServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(gs.Root()) })
	gs.AutoCreate()
	s := &server{t: t}
	gs.AddHTTPMiddlewares(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			user, pass, ok := r.BasicAuth()
			if !ok || user != "x-access-token" || pass != testToken {
				rw.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(rw, "authentication required", http.StatusUnauthorized)
				return
			}
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
				s.uploads.Add(1)
			}
			next.ServeHTTP(rw, r)
		})
	})
	if err := gs.StartHTTP(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gs.StopHTTP)
	s.url = gs.HTTPAddress() + "/" + fullName + ".git"
	s.work = t.TempDir()
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
	var specs []config.RefSpec
	for ref, h := range refs {
		if err := s.local.Storer.SetReference(plumbing.NewHashReference(plumbing.ReferenceName("refs/test/"+ref), h)); err != nil {
			s.t.Fatal(err)
		}
		specs = append(specs, config.RefSpec("+refs/test/"+ref+":"+ref))
	}
	err := s.local.Push(&git.PushOptions{RemoteName: "origin", RefSpecs: specs, Force: true,
		Auth: &githttp.BasicAuth{Username: "x-access-token", Password: testToken}})
	if err != nil && err != git.NoErrAlreadyUpToDate {
		s.t.Fatal(err)
	}
}
