package app

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-github/v60/github"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/internal/githubfake"
)

// dashboard is the repository's drift dashboard issue, if there is one.
func (d *driftWorld) dashboard() (githubfake.Issue, bool) {
	for _, is := range d.gh.Issues(fullName) {
		if is.Title == "driftback: drift dashboard" {
			return is, true
		}
	}
	return githubfake.Issue{}, false
}

// edits counts the edits of an issue.
func (d *driftWorld) edits(number int) int {
	n := 0
	for _, c := range d.gh.Calls() {
		if c.Method == "PATCH" && c.Path == fmt.Sprintf("/repos/%s/issues/%d", fullName, number) {
			n++
		}
	}
	return n
}

// dashboardSays waits until the dashboard holds every text.
func (d *driftWorld) dashboardSays(what string, texts ...string) githubfake.Issue {
	d.t.Helper()
	var last string
	eventually(d.t, func() bool {
		is, ok := d.dashboard()
		last = is.Body
		if !ok {
			return false
		}
		for _, s := range texts {
			if !strings.Contains(is.Body, s) {
				return false
			}
		}
		return true
	}, what, func() string { return "dashboard:\n" + last })
	is, _ := d.dashboard()
	return is
}

// tick ticks, as user, the dashboard's box whose line holds label, and
// delivers the edit as GitHub does (delivery names it). It returns the
// event, to deliver again.
func (d *driftWorld) tick(user, label, delivery string) *github.IssuesEvent {
	d.t.Helper()
	is, _ := d.dashboard()
	found := false
	before := d.gh.EditIssue(fullName, is.Number, func(body string) string {
		lines := strings.Split(body, "\n")
		for i, l := range lines {
			box := strings.Index(l, "- [ ] ")
			if box >= 0 && strings.TrimSpace(l[:box]) == "" && strings.Contains(l, label) && strings.Contains(l, "<!-- driftback:tick") && !found {
				lines[i] = l[:box] + "- [x] " + l[box+len("- [ ] "):]
				found = true
			}
		}
		return strings.Join(lines, "\n")
	})
	if !found {
		d.t.Fatalf("no unticked box %q on the dashboard:\n%s", label, before)
	}
	after, _ := d.dashboard()
	ev := &github.IssuesEvent{
		Action: github.String("edited"),
		Issue: &github.Issue{Number: github.Int(is.Number), Body: github.String(after.Body), Title: github.String(is.Title),
			User: &github.User{Login: github.String(githubfake.Slug + "[bot]")}, UpdatedAt: &github.Timestamp{Time: time.Now()}},
		Changes:      &github.EditChange{Body: &github.EditBody{From: github.String(before)}},
		Sender:       &github.User{Login: github.String(user)},
		Repo:         repoPayload(),
		Installation: &github.Installation{ID: github.Int64(instID)},
	}
	if code := d.deliver("issues", delivery, ev); code != 202 {
		d.t.Fatalf("delivery answered %d", code)
	}
	return ev
}

// TestTheDashboardShowsEveryDriftAndActsForWriters follows the drift
// dashboard through a target's life with an hour's quiet period: a person
// scales production and changes a Secret; the dashboard shows both as
// waiting (the Secret's values hidden), with a box to propose now. A reader
// ticking it is unticked again with a note, and nothing happens; a writer
// ticking it opens the drift pull request at once, and the same delivery
// again does nothing twice. Closing the pull request makes it declined, with
// a box to propose again, which a writer ticks to open a new one. A commit
// that does not render puts the target under "Not compared" with the error.
// Once a person closes the dashboard it is no longer updated.
func TestTheDashboardShowsEveryDriftAndActsForWriters(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, time.Hour, nil)
	d.gh.SetPermission(fullName, "mallory", "read")
	d.gh.SetPermission(fullName, "alice", "write")
	d.run()
	d.settle(1)
	if _, ok := d.dashboard(); ok {
		t.Fatal("a dashboard was opened with nothing to show")
	}

	const secretValue = "s3cr3t-live-value"
	d.scale(5, "kubectl")
	d.patch("Secret", "api-token", "kubectl-edit", fmt.Sprintf(`{"stringData":{"token":%q}}`, secretValue))
	is := d.dashboardSays("both changes waiting", "Deployment/"+d.env.Namespace+"/web", "`.spec.replicas`", "`5`", "waiting until",
		"Secret/"+d.env.Namespace+"/api-token", "(hidden)", "propose now: Deployment")
	if len(d.gh.Pulls(fullName)) != 0 {
		t.Fatal("a drift pull request before the quiet period ended")
	}

	// A reader's tick is unticked again, with a note.
	d.tick("mallory", "propose now: Deployment", "d-1")
	d.waitFor("the reader's tick refused", func() bool { return commentsWith(d.gh, is.Number, "needs write permission") == 1 })
	d.dashboardSays("the box unticked again", "- [ ] propose now: Deployment")
	d.settle(2)
	if len(d.gh.Pulls(fullName)) != 0 {
		t.Fatal("a reader's tick opened a drift pull request")
	}

	// A writer's tick proposes it now; the same delivery again acts once.
	ev := d.tick("alice", "propose now: Deployment", "d-2")
	d.waitFor("the drift pull request opened at once", func() bool { return len(d.openPulls()) == 1 })
	d.deliver("issues", "d-2", ev)       // redelivered
	d.deliver("issues", "d-2-again", ev) // the same edit, another delivery
	d.settle(3)
	if n := commentsWith(d.gh, is.Number, "asked driftback to propose"); n != 1 {
		t.Errorf("%d request comments for one tick delivered twice, want 1", n)
	}
	if p := d.gh.Pulls(fullName); len(p) != 1 {
		t.Fatalf("%d drift pull requests, want 1", len(p))
	}
	pr := d.openPulls()[0]
	if got := replicasOf(d.renderedWeb(d.branch())); got != 5 {
		t.Errorf("the drift branch renders %d replicas, want 5", got)
	}
	d.dashboardSays("the change proposed", fmt.Sprintf("proposed in #%d", pr.Number), "## Open drift pull requests", fmt.Sprintf("- #%d:", pr.Number))

	// A person declines it; a writer asks for it again.
	d.gh.ClosePull(fullName, pr.Number, false)
	d.dashboardSays("the drift declined", "## Declined", fmt.Sprintf("#%d was closed without merging", pr.Number), fmt.Sprintf("declined in #%d", pr.Number))
	d.tick("alice", "propose it again", "d-3")
	d.waitFor("a new drift pull request", func() bool { return len(d.openPulls()) == 1 && d.openPulls()[0].Number != pr.Number })
	again := d.openPulls()[0]
	d.dashboardSays("the new one proposed", fmt.Sprintf("proposed in #%d", again.Number))

	// A commit that does not render: the target is not compared.
	broken := d.commit(d.main, map[string]any{"deploy/prod/kustomization.yaml": "resources:\n- missing.yaml\n"})
	d.push(map[string]plumbing.Hash{"refs/heads/main": broken})
	d.loop.Nudge(fullName)
	d.dashboardSays("the target not compared", "## Not compared", "the last check failed", "does not render")
	fixed := d.commit(broken, map[string]any{"deploy/prod/kustomization.yaml": driftRepo["deploy/prod/kustomization.yaml"]})
	d.push(map[string]plumbing.Hash{"refs/heads/main": fixed})
	d.loop.Nudge(fullName)
	d.dashboardSays("compared again", "## Differs from Git now")

	// Nothing of the Secret's value anywhere, as typed or as stored.
	encoded := base64.StdEncoding.EncodeToString([]byte(secretValue))
	for _, x := range d.gh.Issues(fullName) {
		if strings.Contains(x.Body, secretValue) || strings.Contains(x.Body, encoded) {
			t.Errorf("issue #%d shows the Secret's value", x.Number)
		}
		for _, c := range d.gh.Comments(fullName, x.Number) {
			if strings.Contains(c.Body, secretValue) || strings.Contains(c.Body, encoded) {
				t.Errorf("a comment on #%d shows the Secret's value", x.Number)
			}
		}
	}
	for _, p := range d.gh.Pulls(fullName) {
		if strings.Contains(p.Body, secretValue) || strings.Contains(p.Body, encoded) {
			t.Errorf("#%d shows the Secret's value", p.Number)
		}
	}

	// Nothing changes: the dashboard is not edited again.
	edits := func() int { return d.edits(is.Number) }
	d.settle(2)
	before := edits()
	d.settle(4)
	if n := edits() - before; n != 0 {
		t.Errorf("%d edits of the dashboard while nothing changed", n)
	}

	// A person closes the dashboard: it is left as it is.
	d.gh.SetIssueState(fullName, is.Number, "closed")
	closed, _ := d.dashboard()
	d.scale(7, "kubectl")
	d.settle(3)
	if now, _ := d.dashboard(); now.Body != closed.Body {
		t.Error("a closed dashboard was updated")
	}
	if n := len(d.gh.Issues(fullName)); n != 1 {
		t.Errorf("%d issues after the dashboard was closed, want it alone", n)
	}
}

// TestARepositoryTurnsItsDashboardOff: dashboard: false in the
// repository's .github/driftback.yml means no dashboard; a report-mode
// target keeps its one issue instead. Turned on again, the dashboard shows
// the drift, and the issue is closed, pointing there; closed by a person,
// the dashboard gives the drift back to an issue.
func TestARepositoryTurnsItsDashboardOff(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 300*time.Millisecond, func(p *config.Policy) { p.Codify = config.CodifyReport })
	off := d.commit(d.main, map[string]any{".github/driftback.yml": "dashboard: false\n"})
	d.push(map[string]plumbing.Hash{"refs/heads/main": off})
	d.run()
	d.scale(3, "kubectl")
	d.waitFor("the drift issue", func() bool { return len(d.gh.Issues(fullName)) == 1 })
	d.settle(3)
	if _, ok := d.dashboard(); ok {
		t.Error("a dashboard for a repository that turned it off")
	}
	is := d.gh.Issues(fullName)
	if len(is) != 1 || !strings.Contains(is[0].Body, "`3`") {
		t.Fatalf("issues %+v, want the target's drift issue", is)
	}
	on := d.commit(off, map[string]any{".github/driftback.yml": nil})
	d.push(map[string]plumbing.Hash{"refs/heads/main": on})
	d.dashboardSays("the drift, once the dashboard is on again", "Deployment/"+d.env.Namespace+"/web", "`3`")
	d.waitFor("the drift issue closed", func() bool {
		for _, i := range d.gh.Issues(fullName) {
			if i.Number == is[0].Number {
				return i.State == "closed" && commentsWith(d.gh, i.Number, "the drift dashboard shows this target's drift now") == 1
			}
		}
		return false
	})
	// A person closes the dashboard: the drift is the issue's again,
	// never taken for a person's decision against it.
	db, _ := d.dashboard()
	d.gh.SetIssueState(fullName, db.Number, "closed")
	d.waitFor("the drift back in an open issue", func() bool {
		for _, i := range d.gh.Issues(fullName) {
			if i.Number != db.Number && i.State == "open" && strings.Contains(i.Body, "`3`") {
				return true
			}
		}
		return false
	})
}

// TestTheDashboardSaysWhenEachTargetWasChecked: each target's part says
// when it was last compared; checks that change nothing else do not edit
// the issue each time, but its times are never staler than the bound.
func TestTheDashboardSaysWhenEachTargetWasChecked(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, time.Hour, nil)
	clock := d.stopClock()
	d.run()
	d.scale(5, "kubectl")
	first := clock.Now().UTC().Format("2006-01-02 15:04 UTC")
	is := d.dashboardSays("the change with its check time", "· checked "+first)
	edits := func() int { return d.edits(is.Number) }
	d.settle(2)
	clock.Advance(5 * time.Minute)
	before := edits()
	d.settle(3)
	if n := edits() - before; n != 0 {
		t.Errorf("%d edits of the dashboard within %s of the last, for check times alone", n, 15*time.Minute)
	}
	clock.Advance(11 * time.Minute)
	later := clock.Now().UTC().Format("2006-01-02 15:04 UTC")
	d.dashboardSays("the check time past the bound", "· checked "+later)
}
