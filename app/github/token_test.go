package github

import (
	"context"
	"strings"
	"testing"

	"github.com/driftback/driftback/internal/githubfake"
)

// TestTheAppAndAWorkflowTokenEachFindTheirOwn proves the two ways driftback
// writes to a pull request keep apart: the App's comment and check run are
// its bot's and its App's, a workflow token's are github-actions[bot]'s and
// the GitHub Actions App's, and each publishes again over its own, never
// over the other's.
func TestTheAppAndAWorkflowTokenEachFindTheirOwn(t *testing.T) {
	gh, err := githubfake.New()
	if err != nil {
		t.Fatal(err)
	}
	defer gh.Close()
	gh.AddRepo(&githubfake.Repo{Owner: "o", Name: "r", Installation: 5})
	ctx := context.Background()
	app, err := NewClients(gh.AppID, gh.KeyPEM(), gh.URL(), RetryPolicy{}).Installation(5)
	if err != nil {
		t.Fatal(err)
	}
	workflow, err := WithToken(ctx, gh.ActionsToken(5), gh.URL(), RetryPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	const sha = "3333333333333333333333333333333333333333"
	for round := range 2 {
		for _, w := range []struct {
			name string
			in   *Installation
		}{{"app", app}, {"workflow", workflow}} {
			if err := w.in.PublishComment(ctx, "o", "r", 1, []string{w.name + " says " + strings.Repeat("!", round)}); err != nil {
				t.Fatalf("%s, round %d: comment: %v", w.name, round, err)
			}
			if err := w.in.PublishChecks(ctx, "o", "r", sha, []Check{{Name: "driftback", Conclusion: "success", Title: w.name}}); err != nil {
				t.Fatalf("%s, round %d: check: %v", w.name, round, err)
			}
		}
	}
	by := map[string]string{}
	for _, c := range gh.Comments("o/r", 1) {
		by[c.User] = c.Body
	}
	if len(by) != 2 || !strings.HasSuffix(by[githubfake.Slug+"[bot]"], "app says !") || !strings.HasSuffix(by[githubfake.ActionsLogin], "workflow says !") {
		t.Errorf("comments by author %q; want one each, edited in the second round", by)
	}
	runs := map[string]string{}
	for _, r := range gh.CheckRuns("o/r", sha) {
		runs[r.AppSlug] += r.Title
	}
	if len(runs) != 2 || runs[githubfake.Slug] != "app" || runs[githubfake.ActionsSlug] != "workflow" {
		t.Errorf("check runs by App %q; want one each", runs)
	}
	for _, in := range []*Installation{app, workflow} {
		if said, err := in.Commented(ctx, "o", "r", 1); err != nil || !said {
			t.Errorf("Commented: %v, %v; want true", said, err)
		}
	}
}
