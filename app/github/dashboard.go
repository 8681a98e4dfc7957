package github

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/driftback/driftback/report"
)

// Dashboard is a repository's drift dashboard issue as GitHub has it.
type Dashboard struct {
	// Number is the issue; 0 when the repository has none yet.
	Number int
	// Open is false once a person closed it: it is not updated until it
	// is reopened.
	Open bool
	Body string
	// Requests are the boxes people with write permission ticked, as
	// driftback recorded them, oldest first.
	Requests []Request
}

// Request is one recorded tick: what was asked, by whom and when.
type Request struct {
	report.Tick
	By string
	At time.Time
}

// requestWindow is how far back requests are read: one older than that has
// been acted on, or its change is long gone.
const requestWindow = 7 * 24 * time.Hour

// FindDashboard finds a repository's dashboard issue: driftback's own issue
// that carries the dashboard's marker (the lowest number, if a race made
// two). number, when not 0, is where it was last found.
func (i *Installation) FindDashboard(ctx context.Context, owner, name string, number int) (*Dashboard, error) {
	bot, err := i.botLogin(ctx)
	if err != nil {
		return nil, err
	}
	if number != 0 {
		is, _, err := i.gh.Issues.Get(ctx, owner, name, number)
		if err == nil && is.GetUser().GetLogin() == bot && IsDashboard(is.GetBody()) {
			return &Dashboard{Number: number, Open: is.GetState() == "open", Body: is.GetBody()}, nil
		}
	}
	var found *github.Issue
	opts := &github.IssueListByRepoOptions{State: "all", Creator: bot, ListOptions: github.ListOptions{PerPage: 100}}
	for {
		page, resp, err := i.gh.Issues.ListByRepo(ctx, owner, name, opts)
		if err != nil {
			return nil, fmt.Errorf("list driftback's issues: %w", err)
		}
		for _, is := range page {
			if is == nil || is.IsPullRequest() || !IsDashboard(is.GetBody()) {
				continue
			}
			if found == nil || is.GetNumber() < found.GetNumber() {
				found = is
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if found == nil {
		return &Dashboard{}, nil
	}
	return &Dashboard{Number: found.GetNumber(), Open: found.GetState() == "open", Body: found.GetBody()}, nil
}

// IsDashboard says a body ends with the dashboard's marker, where driftback
// writes it.
func IsDashboard(body string) bool {
	return strings.HasSuffix(strings.TrimRight(body, "\n"), report.DashboardMarker)
}

// ReadRequests reads the requests recorded on the dashboard in the last
// week: driftback's own comments, whatever anyone else writes.
func (i *Installation) ReadRequests(ctx context.Context, owner, name string, d *Dashboard, now time.Time) error {
	d.Requests = nil
	if d.Number == 0 {
		return nil
	}
	bot, err := i.botLogin(ctx)
	if err != nil {
		return err
	}
	since := now.Add(-requestWindow)
	opts := &github.IssueListCommentsOptions{Since: &since, ListOptions: github.ListOptions{PerPage: 100}}
	for {
		cs, resp, err := i.gh.Issues.ListComments(ctx, owner, name, d.Number, opts)
		if err != nil {
			return fmt.Errorf("read the dashboard's requests: %w", err)
		}
		for _, c := range cs {
			if c.GetUser().GetLogin() != bot {
				continue
			}
			if t, by, ok := report.ParseDashboardRequest(c.GetBody()); ok {
				d.Requests = append(d.Requests, Request{Tick: t, By: by, At: c.GetCreatedAt().Time})
			}
		}
		if resp.NextPage == 0 {
			return nil
		}
		opts.Page = resp.NextPage
	}
}

// WriteDashboard opens the dashboard with body, or edits it when its body
// differs; a closed dashboard is left alone. It returns the dashboard as
// written.
func (i *Installation) WriteDashboard(ctx context.Context, owner, name string, d *Dashboard, body string, labels []string) (*Dashboard, error) {
	switch {
	case d.Number == 0:
		title := report.DashboardTitle
		req := &github.IssueRequest{Title: &title, Body: &body}
		if len(labels) > 0 {
			req.Labels = &labels // GitHub refuses "labels": null
		}
		is, _, err := i.gh.Issues.Create(ctx, owner, name, req)
		if err != nil {
			return d, fmt.Errorf("open the drift dashboard: %w", err)
		}
		created := &Dashboard{Number: is.GetNumber(), Open: true, Body: body, Requests: d.Requests}
		// Replicas that watch different clusters may open it at the same
		// moment: the oldest stays, a younger one is closed at once.
		first, err := i.FindDashboard(ctx, owner, name, 0)
		if err != nil || first.Number == 0 || first.Number >= created.Number {
			return created, nil
		}
		closed, dup := "closed", fmt.Sprintf("A duplicate of #%d, the drift dashboard, opened at the same moment.", first.Number)
		if _, _, err := i.gh.Issues.Edit(ctx, owner, name, created.Number, &github.IssueRequest{State: &closed, Body: &dup}); err != nil {
			return created, fmt.Errorf("close the duplicate drift dashboard #%d: %w", created.Number, err)
		}
		// The older one is left as the other replica wrote it: this
		// body was merged with none, and would drop its parts. The next
		// look merges both into it.
		first.Requests = d.Requests
		return first, nil
	case !d.Open || d.Body == body:
		return d, nil
	}
	if _, _, err := i.gh.Issues.Edit(ctx, owner, name, d.Number, &github.IssueRequest{Body: &body}); err != nil {
		return d, fmt.Errorf("update the drift dashboard #%d: %w", d.Number, err)
	}
	out := *d
	out.Body = body
	return &out, nil
}

// CommentOnce comments on an issue unless a comment of driftback's already
// carries the marker: the same event delivered twice comments once.
func (i *Installation) CommentOnce(ctx context.Context, owner, name string, number int, body, marker string) (bool, error) {
	bot, err := i.botLogin(ctx)
	if err != nil {
		return false, err
	}
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		cs, resp, err := i.gh.Issues.ListComments(ctx, owner, name, number, opts)
		if err != nil {
			return false, fmt.Errorf("list comments: %w", err)
		}
		for _, c := range cs {
			if c.GetUser().GetLogin() == bot && strings.Contains(c.GetBody(), marker) {
				return false, nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if _, _, err := i.gh.Issues.CreateComment(ctx, owner, name, number, &github.IssueComment{Body: &body}); err != nil {
		return false, fmt.Errorf("comment on #%d: %w", number, err)
	}
	return true, nil
}
