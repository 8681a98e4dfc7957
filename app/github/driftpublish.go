package github

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-github/v60/github"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/repos"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/report"
)

// DriftPublisher executes a drift plan on GitHub for one target: the branch
// and pull request, or the issue in report mode. GitHub is its only state.
type DriftPublisher struct {
	Installation *Installation
	// Repo is the repository as read when the plan was made, and Head the
	// default branch's commit the plan was made on.
	Repo *Repository
	Head string
	// Token authenticates git fetches and pushes.
	Token  string
	Target targets.Target
	// Cache is where the repository is fetched to commit the plan.
	Cache *repos.Cache
	Log   *slog.Logger
	Now   func() time.Time
	// BeforeAct, when set, runs between deciding and acting on GitHub (tests
	// use it to stop a replica there).
	BeforeAct func(context.Context, prgen.Action)
	// Acted, when set, is told of each drift pull request or issue (kind)
	// opened, updated or closed (action).
	Acted func(kind, action string)
	// Again are closed pull requests a person asked, on the dashboard, to
	// propose again: their drift is not taken as declined.
	Again map[int]bool
}

// PullOutcome is where a target's drift stands on GitHub once published.
type PullOutcome struct {
	// Open is the pull request that proposes the drift now; 0 for none.
	Open int
	// Declined is the pull request with this drift a person closed
	// without merging.
	Declined int
	// Merged is the merged pull request with this drift: what it could not
	// write is still live.
	Merged int
}

// ErrHeadMoved says the default branch moved since the plan was made: the
// drift is read again at the new head.
var ErrHeadMoved = errors.New("the default branch moved")

func (p *DriftPublisher) branch() string { return config.DriftBranchPrefix + p.Target.Slug() }

// botIdentity is who driftback's commits are by.
func (p *DriftPublisher) botIdentity(ctx context.Context) (object.Signature, error) {
	bot, err := p.Installation.botLogin(ctx)
	if err != nil {
		return object.Signature{}, err
	}
	return object.Signature{Name: bot, Email: bot + "@users.noreply.github.com", When: p.Now()}, nil
}

// pulls returns the target's drift pull requests, newest first.
func (p *DriftPublisher) pulls(ctx context.Context) ([]*github.PullRequest, error) {
	var out []*github.PullRequest
	opts := &github.PullRequestListOptions{State: "all", Head: p.Repo.Owner + ":" + p.branch(), ListOptions: github.ListOptions{PerPage: 100}}
	for {
		page, resp, err := p.Installation.gh.PullRequests.List(ctx, p.Repo.Owner, p.Repo.Name, opts)
		if err != nil {
			return nil, fmt.Errorf("list drift pull requests: %w", err)
		}
		out = append(out, page...)
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

func driftMarker(kind, fp string) string {
	return fmt.Sprintf("<!-- driftback:drift-%s fingerprint=%s -->", kind, fp)
}

// PublishPull opens, updates or closes the target's drift pull request as the
// plan and the pull requests already there decide (prgen.Decide).
func (p *DriftPublisher) PublishPull(ctx context.Context, plan *prgen.Plan) (out PullOutcome, err error) {
	list, err := p.pulls(ctx)
	if err != nil {
		return out, err
	}
	var pulls []prgen.PullRequest
	var open *github.PullRequest
	for _, pr := range list {
		merged := pr.MergedAt != nil || pr.GetMerged()
		if pr.GetState() != "open" && !merged && p.Again[pr.GetNumber()] {
			continue // a person asked to propose its drift again
		}
		pulls = append(pulls, prgen.PullRequest{Number: pr.GetNumber(), Open: pr.GetState() == "open", Merged: merged, Body: pr.GetBody()})
		if pr.GetState() == "open" && open == nil {
			open = pr
		}
	}
	// The branches as they are now: the default head must be the one the plan
	// was made on, and the branch's commits say whether a person pushed.
	refs, err := RemoteRefs(ctx, p.Repo.CloneURL, p.Token)
	if err != nil {
		return out, fmt.Errorf("list the repository's branches: %w", err)
	}
	if refs["refs/heads/"+p.Repo.DefaultBranch] != p.Head {
		return out, ErrHeadMoved
	}
	me, err := p.botIdentity(ctx)
	if err != nil {
		return out, err
	}
	fetch, want := []string{"refs/heads/" + p.Repo.DefaultBranch}, []string{p.Head}
	tip := refs["refs/heads/"+p.branch()]
	if open != nil && tip != "" {
		fetch, want = append(fetch, "refs/heads/"+p.branch()), append(want, tip)
	}
	repo, release, err := p.Cache.Fetch(ctx, p.Repo.FullName, p.Repo.CloneURL, p.Token, fetch, want)
	if err != nil {
		return out, err
	}
	defer release()
	personPushed := false
	if open != nil && tip != "" {
		email, err := commitAuthor(repo, tip)
		if err != nil {
			return out, err
		}
		personPushed = email != me.Email
	}
	d := prgen.Decide(plan, pulls, personPushed)
	for _, pr := range pulls {
		if pr.Number != d.Number || d.Action == prgen.ActionClose {
			continue
		}
		switch {
		case pr.Open:
			out.Open = pr.Number
		case pr.Merged:
			out.Merged = pr.Number
		default:
			out.Declined = pr.Number
		}
	}
	log := p.Log.With("decision", d.Action, "reason", d.Reason)
	fp := plan.Fingerprint()
	if p.BeforeAct != nil && d.Action != prgen.ActionNothing {
		p.BeforeAct(ctx, d.Action)
	}
	switch d.Action {
	case prgen.ActionNothing:
		log.Debug("drift pull request up to date")
		return out, nil
	case prgen.ActionOpen, prgen.ActionUpdate:
		reviewers := p.people(ctx, plan, log)
		commit, err := commitFiles(repo, p.Head, plan.Files, report.CommitMessage(plan), me)
		if err != nil {
			return out, err
		}
		if err := pushBranch(ctx, repo, p.Repo.CloneURL, p.Token, commit, p.branch(), tip); err != nil {
			if errors.Is(err, errBranchMoved) {
				return out, ErrHeadMoved // read everything again
			}
			return out, err
		}
		title, body := report.DriftTitle(plan), report.DriftPullRequest(plan)
		if d.Action == prgen.ActionUpdate {
			if _, _, err := p.Installation.gh.PullRequests.Edit(ctx, p.Repo.Owner, p.Repo.Name, d.Number, &github.PullRequest{Title: &title, Body: &body}); err != nil {
				return out, fmt.Errorf("update #%d: %w", d.Number, err)
			}
			p.acted("pull_request", "updated")
			p.requestReviews(ctx, d.Number, reviewers, log)
			log.Info("drift pull request updated", "pr", d.Number, "commit", commit.String())
			return out, nil
		}
		base, head := p.Repo.DefaultBranch, p.branch()
		pr, _, err := p.Installation.gh.PullRequests.Create(ctx, p.Repo.Owner, p.Repo.Name, &github.NewPullRequest{Title: &title, Body: &body, Base: &base, Head: &head})
		if alreadyOpen(err) {
			// Another replica opened it between our look and now (a leader
			// handover): GitHub keeps one open pull request per branch, and
			// the next check finds it.
			log.Info("the drift pull request was opened elsewhere meanwhile")
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("open the drift pull request: %w", err)
		}
		if len(p.Target.Policy.DriftLabels) > 0 {
			if _, _, err := p.Installation.gh.Issues.AddLabelsToIssue(ctx, p.Repo.Owner, p.Repo.Name, pr.GetNumber(), p.Target.Policy.DriftLabels); err != nil {
				log.Warn("could not label the drift pull request", "err", err)
			}
		}
		out.Open = pr.GetNumber()
		p.acted("pull_request", "opened")
		p.requestReviews(ctx, pr.GetNumber(), reviewers, log)
		log.Info("drift pull request opened", "pr", pr.GetNumber(), "commit", commit.String())
		return out, nil
	case prgen.ActionComment:
		return out, p.commentOnce(ctx, d.Number, driftMarker("note", fp),
			"The drift in the cluster changed, but this branch has commits from a person, so driftback leaves it alone. The drift now:\n\n"+report.DriftPlan(plan))
	case prgen.ActionClose:
		if personPushed {
			return out, p.commentOnce(ctx, d.Number, driftMarker("gone", fp),
				"The cluster matches Git again. This branch has commits from a person, so driftback leaves the pull request open: close it if it is no longer wanted.")
		}
		if err := p.commentOnce(ctx, d.Number, driftMarker("gone", fp), "Closing: "+d.Reason+". The live changes this pull request proposed are no longer there to codify."); err != nil {
			return out, err
		}
		closed := "closed"
		if _, _, err := p.Installation.gh.PullRequests.Edit(ctx, p.Repo.Owner, p.Repo.Name, d.Number, &github.PullRequest{State: &closed}); err != nil {
			return out, fmt.Errorf("close #%d: %w", d.Number, err)
		}
		if err := deleteBranch(ctx, repo, p.Repo.CloneURL, p.Token, p.branch()); err != nil {
			log.Warn("could not delete the drift branch", "err", err)
		}
		p.acted("pull_request", "closed")
		log.Info("drift pull request closed", "pr", d.Number)
		return out, nil
	}
	return out, fmt.Errorf("unknown decision %q", d.Action)
}

// commentOnce comments on an issue or pull request unless a comment of
// driftback's already carries the marker.
func (p *DriftPublisher) commentOnce(ctx context.Context, number int, mark, body string) error {
	_, err := p.Installation.CommentOnce(ctx, p.Repo.Owner, p.Repo.Name, number, body+"\n\n"+mark+"\n", mark)
	return err
}

// reportMarker identifies a target's drift issue.
func (p *DriftPublisher) reportMarker() string {
	return fmt.Sprintf("<!-- driftback:drift-report target=%s -->", p.Target.Slug())
}

// reportIssues are the target's drift issues, open and closed.
func (p *DriftPublisher) reportIssues(ctx context.Context) ([]prgen.PullRequest, error) {
	bot, err := p.Installation.botLogin(ctx)
	if err != nil {
		return nil, err
	}
	opts := &github.IssueListByRepoOptions{State: "all", Creator: bot, ListOptions: github.ListOptions{PerPage: 100}}
	var issues []prgen.PullRequest
	for {
		page, resp, err := p.Installation.gh.Issues.ListByRepo(ctx, p.Repo.Owner, p.Repo.Name, opts)
		if err != nil {
			return nil, fmt.Errorf("list drift issues: %w", err)
		}
		for _, is := range page {
			if is == nil || is.IsPullRequest() || !strings.Contains(is.GetBody(), p.reportMarker()) {
				continue
			}
			issues = append(issues, prgen.PullRequest{Number: is.GetNumber(), Open: is.GetState() == "open", Body: is.GetBody()})
		}
		if resp.NextPage == 0 {
			return issues, nil
		}
		opts.Page = resp.NextPage
	}
}

// CloseIssue closes the target's open drift issue, saying why (the drift
// dashboard shows its drift now); nothing when it has none.
func (p *DriftPublisher) CloseIssue(ctx context.Context, why string) error {
	issues, err := p.reportIssues(ctx)
	if err != nil {
		return err
	}
	for _, is := range issues {
		if !is.Open {
			continue
		}
		if err := p.commentOnce(ctx, is.Number, driftMarker("moved", ""), "Closing: "+why+"."); err != nil {
			return err
		}
		// Its body no longer carries the drift's fingerprint: closed by
		// driftback, it is no person's decision, and the drift comes
		// back to an issue if the dashboard goes.
		closed, body := "closed", "This target's drift was shown here until "+why+".\n\n"+p.reportMarker()+"\n"
		if _, _, err := p.Installation.gh.Issues.Edit(ctx, p.Repo.Owner, p.Repo.Name, is.Number, &github.IssueRequest{State: &closed, Body: &body}); err != nil {
			return fmt.Errorf("close drift issue #%d: %w", is.Number, err)
		}
		p.acted("issue", "closed")
		p.Log.Info("drift issue closed", "issue", is.Number, "reason", why)
	}
	return nil
}

// PublishIssue keeps one issue per target that describes its drift.
func (p *DriftPublisher) PublishIssue(ctx context.Context, plan *prgen.Plan) error {
	issues, err := p.reportIssues(ctx)
	if err != nil {
		return err
	}
	d := prgen.Decide(plan, issues, false)
	log := p.Log.With("decision", d.Action, "reason", d.Reason)
	title := report.DriftIssueTitle(p.Target.Name)
	body := report.DriftIssue(plan) + p.reportMarker() + "\n"
	switch d.Action {
	case prgen.ActionNothing:
		return nil
	case prgen.ActionOpen:
		is, _, err := p.Installation.gh.Issues.Create(ctx, p.Repo.Owner, p.Repo.Name, &github.IssueRequest{Title: &title, Body: &body, Labels: &p.Target.Policy.DriftLabels})
		if err != nil {
			return fmt.Errorf("open the drift issue: %w", err)
		}
		p.acted("issue", "opened")
		log.Info("drift issue opened", "issue", is.GetNumber())
	case prgen.ActionUpdate, prgen.ActionComment:
		if _, _, err := p.Installation.gh.Issues.Edit(ctx, p.Repo.Owner, p.Repo.Name, d.Number, &github.IssueRequest{Title: &title, Body: &body}); err != nil {
			return fmt.Errorf("update drift issue #%d: %w", d.Number, err)
		}
		p.acted("issue", "updated")
		log.Info("drift issue updated", "issue", d.Number)
	case prgen.ActionClose:
		if err := p.commentOnce(ctx, d.Number, driftMarker("gone", plan.Fingerprint()), "Closing: "+d.Reason+"."); err != nil {
			return err
		}
		closed := "closed"
		if _, _, err := p.Installation.gh.Issues.Edit(ctx, p.Repo.Owner, p.Repo.Name, d.Number, &github.IssueRequest{State: &closed}); err != nil {
			return fmt.Errorf("close drift issue #%d: %w", d.Number, err)
		}
		p.acted("issue", "closed")
		log.Info("drift issue closed", "issue", d.Number)
	}
	return nil
}

// alreadyOpen reports GitHub's refusal of a second open pull request from
// the same branch.
func alreadyOpen(err error) bool {
	var e *github.ErrorResponse
	if !errors.As(err, &e) || e.Response == nil || e.Response.StatusCode != http.StatusUnprocessableEntity {
		return false
	}
	if strings.Contains(e.Message, "already exists") {
		return true
	}
	for _, x := range e.Errors {
		if strings.Contains(x.Message, "already exists") {
			return true
		}
	}
	return false
}

func (p *DriftPublisher) acted(kind, action string) {
	if p.Acted != nil {
		p.Acted(kind, action)
	}
}

// people keeps, of the logins app.yml maps the changes' people to, those
// who may read the repository: they are mentioned, asked to review and
// named as the commit's co-authors. Another is named without a mention:
// driftback never mentions someone who cannot see the pull request.
func (p *DriftPublisher) people(ctx context.Context, plan *prgen.Plan, log *slog.Logger) []string {
	access := map[string]bool{}
	var logins []string
	plan.CoAuthors = nil
	for i := range plan.Codified {
		by := plan.Codified[i].By
		if by == nil || by.Login == "" {
			continue
		}
		ok, seen := access[by.Login]
		if !seen {
			perm, _, err := p.Installation.gh.Repositories.GetPermissionLevel(ctx, p.Repo.Owner, p.Repo.Name, by.Login)
			if err != nil {
				log.Warn("a drift's author is not mentioned: their access could not be read", "login", by.Login, "err", err)
			}
			ok = err == nil && perm.GetPermission() != "" && perm.GetPermission() != "none"
			access[by.Login] = ok
			if ok {
				logins = append(logins, by.Login)
				if u, _, err := p.Installation.gh.Users.Get(ctx, by.Login); err == nil {
					plan.CoAuthors = append(plan.CoAuthors, fmt.Sprintf("%s <%d+%s@users.noreply.github.com>", by.Login, u.GetID(), by.Login))
				}
			}
		}
		if !ok {
			plan.Codified[i].By.Login = ""
		}
	}
	return logins
}

// requestReviews asks the changes' people to review their drift's pull
// request.
func (p *DriftPublisher) requestReviews(ctx context.Context, number int, logins []string, log *slog.Logger) {
	if len(logins) == 0 {
		return
	}
	if _, _, err := p.Installation.gh.PullRequests.RequestReviewers(ctx, p.Repo.Owner, p.Repo.Name, number, github.ReviewersRequest{Reviewers: logins}); err != nil {
		log.Warn("could not ask the drift's authors to review it", "pr", number, "err", err)
	}
}
