package compare_test

import (
	"testing"

	"github.com/driftback/driftback/reconcile/compare"
)

// TestRepoKeyNamesARepositoryWhateverItsURL: a checkout's remote and a
// reconciler's source name one repository alike in every URL form,
// credentials included.
func TestRepoKeyNamesARepositoryWhateverItsURL(t *testing.T) {
	for _, u := range []string{"https://github.com/acme/fleet", "https://github.com/acme/fleet.git", "git@github.com:acme/fleet.git",
		"ssh://git@github.com/acme/fleet", "https://gitlab-ci-token:s3cret@github.com/acme/fleet.git", "HTTPS://GitHub.com/Acme/Fleet/"} {
		if got := compare.RepoKey(u); got != "github.com/acme/fleet" {
			t.Errorf("%s: %q", u, got)
		}
	}
	if got := compare.RepoKey("ssh://git@git.example.com:2222/acme/fleet.git"); got != "git.example.com/acme/fleet" {
		t.Errorf("with a port: %q", got)
	}
}
