package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/driftback/driftback/internal/githubfake"
)

// actionsRun is a GitHub Actions job on a pull request, against the GitHub
// fake: the variables a workflow has and its event file.
type actionsRun struct {
	gh    *githubfake.Fake
	token string
}

func newActionsRun(t *testing.T, pull githubfake.Pull) *actionsRun {
	t.Helper()
	gh, err := githubfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gh.Close)
	gh.AddRepo(&githubfake.Repo{Owner: "acme", Name: "gitops", Installation: 1,
		Permissions: map[string]string{"maintainer": "write", "visitor": "triage"}})
	gh.SetPull("acme/gitops", pull)
	event := filepath.Join(t.TempDir(), "event.json")
	body := fmt.Sprintf(`{"action":"synchronize","number":%d,"pull_request":{"number":%d,"head":{"sha":%q}},"repository":{"name":"gitops","full_name":"acme/gitops","owner":{"login":"acme"}}}`,
		pull.Number, pull.Number, pull.HeadSHA)
	if err := os.WriteFile(event, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	run := &actionsRun{gh: gh, token: gh.ActionsToken(1)}
	t.Setenv("GITHUB_REPOSITORY", "acme/gitops")
	t.Setenv("GITHUB_EVENT_NAME", "pull_request")
	t.Setenv("GITHUB_EVENT_PATH", event)
	t.Setenv("GITHUB_API_URL", gh.URL())
	t.Setenv("GITHUB_TOKEN", run.token)
	return run
}

const (
	baseSHA = "1111111111111111111111111111111111111111"
	headSHA = "2222222222222222222222222222222222222222"
)

// TestPublishFromActions proves a CI job publishes what the App would, with
// the workflow's GITHUB_TOKEN: the sticky comment (by github-actions[bot])
// and the driftback check run on the head commit, failing on the dangers
// --fail-on names; a second run edits both in place instead of adding; a
// danger-acceptance label counts only from someone with write permission;
// and nothing of the token is printed.
func TestPublishFromActions(t *testing.T) {
	pull := githubfake.Pull{Number: 7, User: "dev", HeadSHA: headSHA, BaseSHA: baseSHA, BaseRef: "main", HeadRef: "shrink", HeadRepo: "acme/gitops"}
	run := newActionsRun(t, pull)
	// The driftback App is installed too: its own check run of the same
	// name is not the workflow's to edit.
	appRun := createCheckRun(t, run.gh, run.gh.Token(1), "driftback", headSHA)
	demo := filepath.Join("..", "..", "fixtures", "demo")
	args := []string{"diff", "--base", filepath.Join(demo, "base"), "--head", filepath.Join(demo, "pr"), "--live", filepath.Join(demo, "live"),
		"--format", "markdown", "--publish", "--fail-on", "pvc-removal", "--fail-on", "crd-removal"}

	out, errOut, code := runCLI(t, args...)
	if code != exitChanges {
		t.Fatalf("exit %d, want %d (the check fails on pvc-removal); stderr:\n%s", code, exitChanges, errOut)
	}
	comments := run.gh.Comments("acme/gitops", 7)
	if len(comments) != 1 {
		t.Fatalf("%d comments, want 1", len(comments))
	}
	c := comments[0]
	if c.User != githubfake.ActionsLogin || !strings.HasPrefix(c.Body, "<!-- driftback:comment part=1 of=1 -->") {
		t.Errorf("the comment is by %s and starts %q; want github-actions[bot] and the marker", c.User, firstLine(c.Body))
	}
	for _, want := range []string{"❌ **The check fails**", "crd-removal", "driftback/allow-danger", "head 222222222222"} {
		if !strings.Contains(c.Body, want) {
			t.Errorf("the comment does not say %q:\n%s", want, c.Body)
		}
	}
	runs := actionsRuns(t, run.gh, headSHA, appRun)
	if len(runs) != 1 || runs[0].Name != "driftback" || runs[0].Conclusion != "failure" || runs[0].AppSlug != githubfake.ActionsSlug {
		t.Fatalf("check runs %+v; want one failing driftback run by github-actions", runs)
	}
	if !strings.Contains(out, "crd-removal") {
		t.Errorf("stdout lacks the report:\n%s", out)
	}
	for _, s := range []string{out, errOut} {
		if strings.Contains(s, run.token) {
			t.Fatal("the token was printed")
		}
	}

	// A triager's label accepts nothing; the same label from a writer does.
	pull.Labels, pull.LabeledBy = []string{"driftback/allow-danger"}, map[string]string{"driftback/allow-danger": "visitor"}
	run.gh.SetPull("acme/gitops", pull)
	if _, errOut, code = runCLI(t, args...); code != exitChanges {
		t.Fatalf("a triager's label: exit %d, want %d; stderr:\n%s", code, exitChanges, errOut)
	}
	pull.LabeledBy = map[string]string{"driftback/allow-danger": "maintainer"}
	run.gh.SetPull("acme/gitops", pull)
	if _, errOut, code = runCLI(t, args...); code != exitOK {
		t.Fatalf("a writer's label: exit %d, want %d; stderr:\n%s", code, exitOK, errOut)
	}
	comments, runs = run.gh.Comments("acme/gitops", 7), actionsRuns(t, run.gh, headSHA, appRun)
	if len(comments) != 1 || comments[0].ID != c.ID {
		t.Errorf("after three runs: %d comments (first id %d); want the one comment %d, edited", len(comments), comments[0].ID, c.ID)
	}
	if len(runs) != 1 || runs[0].Conclusion != "success" {
		t.Errorf("after three runs: check runs %+v; want the one run, now a success", runs)
	}
}

// TestPublishSplitsALongComment proves a report longer than a GitHub
// comment is published in parts, each under the limit, and that a shorter
// one on the next push deletes the parts it no longer needs.
func TestPublishSplitsALongComment(t *testing.T) {
	run := newActionsRun(t, githubfake.Pull{Number: 8, User: "dev", HeadSHA: headSHA, BaseSHA: baseSHA, BaseRef: "main", HeadRepo: "acme/gitops"})
	dir := t.TempDir()
	base, head := filepath.Join(dir, "base"), filepath.Join(dir, "head")
	writeConfigMaps(t, base, 300, "old")
	writeConfigMaps(t, head, 300, "new")

	_, errOut, code := runCLI(t, "diff", "--base", base, "--head", head, "--format", "markdown", "--publish")
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut)
	}
	comments := run.gh.Comments("acme/gitops", 8)
	if len(comments) < 2 {
		t.Fatalf("%d comment parts for 300 changed objects, want several", len(comments))
	}
	for i, c := range comments {
		if len(c.Body) > githubfake.MaxCommentBody {
			t.Errorf("part %d is %d characters, over GitHub's limit", i+1, len(c.Body))
		}
		if want := fmt.Sprintf("<!-- driftback:comment part=%d of=%d -->", i+1, len(comments)); !strings.HasPrefix(c.Body, want) {
			t.Errorf("part %d starts %q, want %q", i+1, firstLine(c.Body), want)
		}
	}
	runs := run.gh.CheckRuns("acme/gitops", headSHA)
	if len(runs) != 1 || runs[0].Conclusion != "neutral" {
		t.Errorf("check runs %+v; want one neutral run (the cluster was not read)", runs)
	}

	writeConfigMaps(t, head, 1, "new")
	if _, errOut, code = runCLI(t, "diff", "--base", base, "--head", head, "--format", "markdown", "--publish", "--path", "."); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut)
	}
	if n := len(run.gh.Comments("acme/gitops", 8)); n >= len(comments) {
		t.Errorf("a shorter report left %d parts of %d", n, len(comments))
	}
}

// TestPublishNeedsItsContext proves --publish says what is missing instead
// of comparing and then failing to publish.
func TestPublishNeedsItsContext(t *testing.T) {
	newActionsRun(t, githubfake.Pull{Number: 9, HeadSHA: headSHA, BaseSHA: baseSHA, HeadRepo: "acme/gitops"})
	demo := filepath.Join("..", "..", "fixtures", "demo")
	args := []string{"diff", "--base", filepath.Join(demo, "base"), "--head", filepath.Join(demo, "pr"), "--publish"}
	for _, tc := range []struct {
		env, value, want string
	}{
		{"GITHUB_TOKEN", "", "GITHUB_TOKEN is not set"},
		{"GITHUB_TOKEN", "ghs_wrong", "GitHub refused the token"},
		{"GITHUB_EVENT_NAME", "push", "not on a pull request: give --pr NUMBER"},
		{"GITHUB_REPOSITORY", "", "GITHUB_REPOSITORY (owner/name) is not set"},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			_, errOut, code := runCLI(t, args...)
			if code != exitError || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, exitError, tc.want)
			}
		})
	}
	_, errOut, code := runCLI(t, append(args[:len(args)-1], "--fail-on", "pvc-removal")...)
	if code != exitError || !strings.Contains(errOut, "go with --publish") {
		t.Errorf("--fail-on without --publish: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = runCLI(t, append(args, "--fail-on", "everything")...)
	if code != exitError || !strings.Contains(errOut, "not a danger; the dangers are") {
		t.Errorf("--fail-on everything: exit %d, stderr %q", code, errOut)
	}
}

// createCheckRun creates a queued check run with token, as its App does.
func createCheckRun(t *testing.T, gh *githubfake.Fake, token, name, sha string) int64 {
	t.Helper()
	req, err := http.NewRequest("POST", gh.URL()+"repos/acme/gitops/check-runs", strings.NewReader(fmt.Sprintf(`{"name":%q,"head_sha":%q}`, name, sha)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ ID int64 }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create check run: %s, %v", resp.Status, err)
	}
	return out.ID
}

// actionsRuns are the check runs on sha but the App's (id appRun), which
// must be left as it was.
func actionsRuns(t *testing.T, gh *githubfake.Fake, sha string, appRun int64) []githubfake.CheckRun {
	t.Helper()
	var out []githubfake.CheckRun
	for _, r := range gh.CheckRuns("acme/gitops", sha) {
		if r.ID == appRun {
			if r.Status != "queued" || r.AppSlug != githubfake.Slug {
				t.Errorf("the App's own check run was changed: %+v", r)
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// writeConfigMaps writes a kustomization of n ConfigMaps whose data holds
// a long value made of word.
func writeConfigMaps(t *testing.T, dir string, n int, word string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var objs, names strings.Builder
	for i := range n {
		fmt.Fprintf(&objs, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings-%03d\n  namespace: shop\ndata:\n  value: %s\n", i, strings.Repeat(word+" ", 60))
	}
	names.WriteString("resources:\n- objects.yaml\n")
	for name, content := range map[string]string{"objects.yaml": objs.String(), "kustomization.yaml": names.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestPublishShowsAForkGitOnly proves a fork's pull request is compared in
// Git only, as the App does, unless --fork-live says otherwise.
func TestPublishShowsAForkGitOnly(t *testing.T) {
	run := newActionsRun(t, githubfake.Pull{Number: 10, User: "stranger", HeadSHA: headSHA, BaseSHA: baseSHA, BaseRef: "main", HeadRepo: "stranger/gitops"})
	demo := filepath.Join("..", "..", "fixtures", "demo")
	args := []string{"diff", "--base", filepath.Join(demo, "base"), "--head", filepath.Join(demo, "pr"), "--live", filepath.Join(demo, "live"), "--format", "markdown", "--publish"}
	if _, errOut, code := runCLI(t, args...); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut)
	}
	c := run.gh.Comments("acme/gitops", 10)
	if len(c) != 1 || !strings.Contains(c[0].Body, "comes from a fork: the cluster is not compared") || strings.Contains(c[0].Body, "kubectl-edit") {
		t.Errorf("a fork's comment shows the cluster, or does not say why not:\n%s", c[0].Body)
	}
	if runs := run.gh.CheckRuns("acme/gitops", headSHA); len(runs) != 1 || runs[0].Conclusion != "neutral" {
		t.Errorf("check runs %+v; want one neutral run (Git only)", runs)
	}
	if _, errOut, code := runCLI(t, append(args, "--fork-live")...); code != exitOK {
		t.Fatalf("--fork-live: exit %d; stderr:\n%s", code, errOut)
	}
	if c = run.gh.Comments("acme/gitops", 10); len(c) != 1 || !strings.Contains(c[0].Body, "kubectl-edit") {
		t.Errorf("with --fork-live the comment does not show the cluster's changes:\n%s", c[0].Body)
	}
}
