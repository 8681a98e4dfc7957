package github

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/driftback/driftback/report"
)

// The sticky comment is found again by this hidden marker on each part.
const markerPrefix = "<!-- driftback:comment"

var markerPattern = regexp.MustCompile(`^<!-- driftback:comment part=(\d+) of=(\d+) -->`)

func marker(part, of int) string {
	return fmt.Sprintf("%s part=%d of=%d -->", markerPrefix, part, of)
}

// publishComment makes the pull request's driftback comment equal parts: the
// existing parts are edited in place, missing ones created, surplus ones
// deleted. Only comments by this App's bot user carrying the marker are ours.
// It is safe to repeat: a retry after a failure finds what the failed attempt
// created.
func publishComment(ctx context.Context, gh *github.Client, bot, owner, repo string, number int, parts []string) error {
	existing, err := ourComments(ctx, gh, bot, owner, repo, number)
	if err != nil {
		return err
	}
	for i, part := range parts {
		body := marker(i+1, len(parts)) + "\n" + part
		if i < len(existing) {
			if existing[i].GetBody() == body {
				continue
			}
			if _, _, err := gh.Issues.EditComment(ctx, owner, repo, existing[i].GetID(), &github.IssueComment{Body: &body}); err != nil {
				return fmt.Errorf("edit comment part %d: %w", i+1, err)
			}
			continue
		}
		if _, _, err := gh.Issues.CreateComment(ctx, owner, repo, number, &github.IssueComment{Body: &body}); err != nil {
			return fmt.Errorf("create comment part %d: %w", i+1, err)
		}
	}
	for _, c := range existing[min(len(parts), len(existing)):] {
		if _, err := gh.Issues.DeleteComment(ctx, owner, repo, c.GetID()); err != nil {
			return fmt.Errorf("delete surplus comment part: %w", err)
		}
	}
	return nil
}

// ourComments lists the bot's marked comments on a pull request, in part
// order (then oldest first, so a stray duplicate of a part sorts after it and
// is deleted as surplus).
func ourComments(ctx context.Context, gh *github.Client, bot, owner, repo string, number int) ([]*github.IssueComment, error) {
	var out []*github.IssueComment
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		cs, resp, err := gh.Issues.ListComments(ctx, owner, repo, number, opts)
		if err != nil {
			return nil, fmt.Errorf("list comments: %w", err)
		}
		for _, c := range cs {
			if c.GetUser().GetLogin() == bot && strings.HasPrefix(c.GetBody(), markerPrefix) {
				out = append(out, c)
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	part := func(c *github.IssueComment) int {
		m := markerPattern.FindStringSubmatch(c.GetBody())
		if m == nil {
			return 1 << 30
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	sort.SliceStable(out, func(i, j int) bool {
		pi, pj := part(out[i]), part(out[j])
		if pi != pj {
			return pi < pj
		}
		return out[i].GetID() < out[j].GetID()
	})
	// Keep one comment per part number; later duplicates become surplus.
	var uniq, dups []*github.IssueComment
	seen := map[int]bool{}
	for _, c := range out {
		if p := part(c); seen[p] {
			dups = append(dups, c)
		} else {
			seen[p] = true
			uniq = append(uniq, c)
		}
	}
	return append(uniq, dups...), nil
}

// checkApp is the App whose check runs are driftback's: by id (the App's
// own), or by slug when the id is not known (a workflow's GITHUB_TOKEN
// writes as the GitHub Actions App, whose id differs between GitHub and
// GitHub Enterprise Server).
type checkApp struct {
	id   int64
	slug string
}

// listCheckRuns returns app's check runs on sha, by name (the newest of each
// name), in as few pages as GitHub allows.
func listCheckRuns(ctx context.Context, gh *github.Client, app checkApp, owner, repo, sha string) (map[string]int64, error) {
	out := map[string]int64{}
	opts := &github.ListCheckRunsOptions{Filter: github.String("latest"), ListOptions: github.ListOptions{PerPage: 100}}
	if app.id != 0 {
		opts.AppID = github.Int64(app.id)
	}
	for {
		runs, resp, err := gh.Checks.ListCheckRunsForRef(ctx, owner, repo, sha, opts)
		if err != nil {
			return nil, fmt.Errorf("list check runs: %w", err)
		}
		for _, r := range runs.CheckRuns {
			if app.id == 0 && r.GetApp().GetSlug() != app.slug {
				continue // another App's: it cannot be updated
			}
			if _, seen := out[r.GetName()]; !seen {
				out[r.GetName()] = r.GetID()
			}
		}
		if resp == nil || resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// publishCheck updates check run id (0: creates it) on sha.
func publishCheck(ctx context.Context, gh *github.Client, owner, repo, sha string, id int64, c Check) error {
	out := &github.CheckRunOutput{Title: github.String(c.Title), Summary: github.String(truncate(c.Summary, report.MaxCheckText))}
	if c.Text != "" {
		out.Text = github.String(truncate(c.Text, report.MaxCheckText))
	}
	if id != 0 {
		_, _, err := gh.Checks.UpdateCheckRun(ctx, owner, repo, id, github.UpdateCheckRunOptions{
			Name: c.Name, Status: github.String("completed"), Conclusion: github.String(c.Conclusion), Output: out,
		})
		if err != nil {
			return fmt.Errorf("update check run %s: %w", c.Name, err)
		}
		return nil
	}
	if _, _, err := gh.Checks.CreateCheckRun(ctx, owner, repo, github.CreateCheckRunOptions{
		Name: c.Name, HeadSHA: sha, Status: github.String("completed"), Conclusion: github.String(c.Conclusion), Output: out,
	}); err != nil {
		return fmt.Errorf("create check run %s: %w", c.Name, err)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const note = "\n\n_(cut: too long for a check run; the pull-request comment has everything)_"
	cut := n - len(note)
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + note
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// Check is one check run as published.
type Check struct {
	Name       string
	Conclusion string // success, failure or neutral
	Title      string
	Summary    string
	Text       string
}
