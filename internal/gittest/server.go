package gittest

import (
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/fluxcd/pkg/gittestserver"
)

// Server is a smart-HTTP git server that takes installation tokens as
// GitHub's does (user x-access-token), creating repositories on first push.
type Server struct {
	*gittestserver.GitServer
	uploads atomic.Int64
}

// NewServer starts a server that lets in the tokens valid accepts; it stops
// with the test.
func NewServer(t testing.TB, valid func(token string) bool) *Server {
	t.Helper()
	gs, err := gittestserver.NewTempGitServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(gs.Root()) })
	gs.AutoCreate()
	s := &Server{GitServer: gs}
	gs.AddHTTPMiddlewares(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			user, pass, ok := r.BasicAuth()
			if !ok || user != "x-access-token" || !valid(pass) {
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
	return s
}

// URL is the clone URL of the repository fullName (owner/name).
func (s *Server) URL(fullName string) string { return s.HTTPAddress() + "/" + fullName + ".git" }

// Uploads counts the fetches served.
func (s *Server) Uploads() int64 { return s.uploads.Load() }

// Push publishes commits of repo to refs of its remote origin, forced, with
// an installation token.
func Push(repo *git.Repository, refs map[string]plumbing.Hash, token string) error {
	var specs []config.RefSpec
	for ref, h := range refs {
		if err := repo.Storer.SetReference(plumbing.NewHashReference(plumbing.ReferenceName("refs/driftback-test/"+ref), h)); err != nil {
			return err
		}
		specs = append(specs, config.RefSpec("+refs/driftback-test/"+ref+":"+ref))
	}
	err := repo.Push(&git.PushOptions{RemoteName: "origin", RefSpecs: specs, Force: true,
		Auth: &githttp.BasicAuth{Username: "x-access-token", Password: token}})
	if err != nil && err != git.NoErrAlreadyUpToDate {
		return err
	}
	return nil
}
