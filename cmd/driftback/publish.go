package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/driftback/driftback/app/config"
	ghapp "github.com/driftback/driftback/app/github"
	"github.com/driftback/driftback/app/review"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/report"
	"github.com/driftback/driftback/report/jsonreport"
)

// publishFlags are the flags of diff that publish its report on a pull
// request, as the App does, from a CI job.
type publishFlags struct {
	publish  bool
	pr       int
	failOn   multiFlag
	ackLabel string
	forkLive bool
}

func addPublishFlags(fs *flag.FlagSet) *publishFlags {
	p := &publishFlags{}
	fs.BoolVar(&p.publish, "publish", false, "post or update the pull request's driftback comment and its driftback check run, as the App does: for CI (GitHub Actions: the workflow's GITHUB_TOKEN, GITHUB_REPOSITORY and its pull_request event); exit 1 then means the check fails")
	fs.IntVar(&p.pr, "pr", 0, "with --publish, the pull request `NUMBER` (default: the workflow's pull_request event)")
	fs.Var(&p.failOn, "fail-on", "with --publish, a danger that fails the check run (repeatable): "+dangerNames())
	fs.StringVar(&p.ackLabel, "ack-label", config.DefaultAckLabel, "with --publish, the pull-request `LABEL` that accepts the dangers of --fail-on, when someone with write permission applied it")
	fs.BoolVar(&p.forkLive, "fork-live", false, "with --publish, compare a fork's pull request with the cluster too (by default a fork's author is shown Git only)")
	return p
}

func dangerNames() string {
	var names []string
	for _, d := range config.KnownDangers() {
		names = append(names, string(d))
	}
	return strings.Join(names, ", ")
}

// check validates the flags.
func (p *publishFlags) check() error {
	if !p.publish {
		if p.pr != 0 || len(p.failOn) > 0 || p.forkLive {
			return errors.New("--pr, --fail-on and --fork-live go with --publish")
		}
		return nil
	}
	known := map[string]bool{}
	for _, d := range config.KnownDangers() {
		known[string(d)] = true
	}
	for _, d := range p.failOn {
		if !known[d] {
			return fmt.Errorf("--fail-on %s: not a danger; the dangers are %s", d, dangerNames())
		}
	}
	return nil
}

// pullRequestRun is the pull request a CI job publishes on.
type pullRequestRun struct {
	gh          *ghapp.Installation
	owner, name string
	pr          *ghapp.PullRequest
	log         *slog.Logger
}

// fork says whether the pull request's head comes from another repository.
func (r *pullRequestRun) fork() bool {
	return !strings.EqualFold(r.pr.HeadRepo, r.owner+"/"+r.name)
}

// openPullRequest finds the pull request to publish on, from the CI job's
// environment (GitHub Actions' variables and event) and --pr, and reads it.
func openPullRequest(ctx context.Context, p *publishFlags, getenv func(string) string, stderr io.Writer) (*pullRequestRun, error) {
	repo := getenv("GITHUB_REPOSITORY")
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" {
		return nil, errors.New("--publish: GITHUB_REPOSITORY (owner/name) is not set: run it in a GitHub Actions workflow, or set it")
	}
	number := p.pr
	if number == 0 {
		n, err := eventPullRequest(getenv("GITHUB_EVENT_NAME"), getenv("GITHUB_EVENT_PATH"))
		if err != nil {
			return nil, err
		}
		number = n
	}
	token := getenv("GITHUB_TOKEN")
	if token == "" {
		return nil, errors.New("--publish: GITHUB_TOKEN is not set: give the step `env: GITHUB_TOKEN: ${{ github.token }}` and the job `permissions: {contents: read, pull-requests: write, checks: write}`")
	}
	api := getenv("GITHUB_API_URL")
	if api == "" {
		api = "https://api.github.com"
	}
	gh, err := ghapp.WithToken(ctx, token, strings.TrimSuffix(api, "/")+"/", ghapp.RetryPolicy{})
	if err != nil {
		return nil, fmt.Errorf("--publish: %w", err)
	}
	pr, err := gh.PullRequest(ctx, owner, name, number)
	if err != nil {
		return nil, fmt.Errorf("--publish: pull request #%d of %s: %w", number, repo, err)
	}
	return &pullRequestRun{gh: gh, owner: owner, name: name, pr: pr, log: slog.New(slog.NewTextHandler(stderr, nil))}, nil
}

// eventPullRequest reads the pull request's number from the workflow's
// event: pull_request or pull_request_target.
func eventPullRequest(event, path string) (int, error) {
	switch event {
	case "pull_request", "pull_request_target":
	case "":
		return 0, errors.New("--publish: no pull request: give --pr NUMBER, or run on a pull_request event")
	default:
		return 0, fmt.Errorf("--publish: the workflow runs on %s, not on a pull request: give --pr NUMBER, or run on pull_request", event)
	}
	body, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("--publish: read the workflow's event (GITHUB_EVENT_PATH): %w", err)
	}
	ev, err := ghapp.ParseEvent("pull_request", body)
	if err != nil {
		return 0, fmt.Errorf("--publish: the workflow's event %s: %w", path, err)
	}
	pr, ok := ev.(*ghapp.PullRequestEvent)
	if !ok || pr.Number == 0 {
		return 0, fmt.Errorf("--publish: the workflow's event %s names no pull request", path)
	}
	return pr.Number, nil
}

// judged is a report as the App would publish it: the comment's parts and
// the check run, judged by the flags' policy.
type judged struct {
	parts []string
	check ghapp.Check
}

// judge decides the comment and the check run of rep on the pull request
// (reading who applied the acknowledgement label), writing nothing.
func (r *pullRequestRun) judge(ctx context.Context, rep *drift.Report, p *publishFlags, now time.Time) (judged, error) {
	policy := config.Policy{AckLabel: p.ackLabel}
	for _, d := range p.failOn {
		policy.FailOn = append(policy.FailOn, drift.DangerReason(d))
	}
	labels := map[string]bool{}
	for _, l := range r.pr.Labels {
		labels[l] = true
	}
	labels, err := r.gh.WritersLabels(ctx, r.owner, r.name, r.pr.Number, labels, []string{p.ackLabel}, r.log)
	if err != nil {
		return judged{}, err
	}
	var checks []review.CheckResult
	for i := range rep.Targets {
		t := &rep.Targets[i]
		checks = append(checks, review.Judge(report.FailingName(*t), t, policy, labels))
	}
	for _, e := range rep.Errors {
		if !inSomeTarget(rep, e) {
			checks = append(checks, review.CheckResult{Name: "driftback / errors", Conclusion: "failure", Title: "The comparison failed", Summary: report.RenderProblemsSummary([]string{e})})
		}
	}
	agg := review.Aggregate(checks)
	parts := report.Comment(rep, report.CommentOptions{Failing: review.Failing(checks), Checked: true})
	compared := drift.Compared{Head: r.pr.HeadSHA}
	if rep.Compared != nil {
		compared = *rep.Compared
	}
	parts[len(parts)-1] += "\n" + report.Footer(compared, now)
	return judged{parts: parts, check: ghapp.Check{Name: agg.Name, Conclusion: agg.Conclusion, Title: agg.Title, Summary: agg.Summary}}, nil
}

// publish writes what judge decided on the pull request as the App does:
// the comment, edited in place and split when long, and the driftback
// check run on the head commit.
func (r *pullRequestRun) publish(ctx context.Context, j judged) error {
	if err := r.gh.PublishComment(ctx, r.owner, r.name, r.pr.Number, j.parts); err != nil {
		return err
	}
	if err := r.gh.PublishChecks(ctx, r.owner, r.name, r.pr.HeadSHA, []ghapp.Check{j.check}); err != nil {
		return fmt.Errorf("%w (GitHub lets only an App's token, such as a workflow's GITHUB_TOKEN with checks: write, write check runs)", err)
	}
	return nil
}

// maxStepSummary is what GitHub shows of a step's summary (1 MiB).
const maxStepSummary = 1 << 20

// toWorkflow gives the workflow what a later step can use, when it runs in
// GitHub Actions: the comment in the step summary ($GITHUB_STEP_SUMMARY),
// and the outputs ($GITHUB_OUTPUT) verdict, conclusion, dangers, create,
// update, delete, complete and report (reportFile, "" when none).
func toWorkflow(getenv func(string) string, rep *drift.Report, j judged, reportFile string) error {
	if path := getenv("GITHUB_STEP_SUMMARY"); path != "" {
		body := strings.Join(j.parts, "\n")
		if len(body) > maxStepSummary {
			body = strings.ToValidUTF8(body[:maxStepSummary-200], "") + "\n\n… cut: the step summary holds 1 MiB; the whole report is in the comment, or with --report-file.\n"
		}
		if err := appendFile(path, body+"\n"); err != nil {
			return fmt.Errorf("the step summary: %w", err)
		}
	}
	path := getenv("GITHUB_OUTPUT")
	if path == "" {
		return nil
	}
	sum := jsonreport.Summarize(rep)
	var b strings.Builder
	for _, kv := range [][2]string{
		{"verdict", sum.Verdict}, {"conclusion", j.check.Conclusion}, {"complete", strconv.FormatBool(sum.Complete)},
		{"dangers", strconv.Itoa(sum.Total.Dangers)}, {"create", strconv.Itoa(sum.Total.Create)},
		{"update", strconv.Itoa(sum.Total.Update)}, {"delete", strconv.Itoa(sum.Total.Delete)}, {"report", reportFile},
	} {
		fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
	}
	if err := appendFile(path, b.String()); err != nil {
		return fmt.Errorf("the step's outputs: %w", err)
	}
	return nil
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readOnlyHint is said when the workflow's token may not write to the pull
// request: a fork's pull_request event gives a read-only token.
func readOnlyHint(number int, conclusion string) string {
	return fmt.Sprintf("driftback: this workflow's token may not write to pull request #%d (a fork's pull_request event gives a read-only token): the report is in the step summary, and the driftback check would be %s. The driftback App publishes on forks' pull requests; a workflow on pull_request_target that checks out the fork's head, and nothing else of it runs, can too (docs/ci.md)", number, conclusion)
}

// inSomeTarget says whether an error of the report is also a target's, so
// that the check counts it once.
func inSomeTarget(rep *drift.Report, e string) bool {
	for _, t := range rep.Targets {
		for _, te := range t.Errors {
			if te == e {
				return true
			}
		}
	}
	return false
}

// publishExit is diff's exit status after publishing: 2 for an error, 1
// when the check fails, else 0 (changes alone do not fail a CI job).
func publishExit(rep *drift.Report, conclusion string) int {
	switch {
	case len(rep.Errors) > 0:
		return exitError
	case conclusion == "failure":
		return exitChanges
	}
	return exitOK
}
