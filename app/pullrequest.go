package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"

	"github.com/driftback/driftback/app/config"
	ghapp "github.com/driftback/driftback/app/github"
	"github.com/driftback/driftback/app/queue"
	"github.com/driftback/driftback/app/repos"
	"github.com/driftback/driftback/app/review"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/merge"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/report"
)

// pullRequest is one pull request's job as it goes through its steps.
type pullRequest struct {
	req  prRequest
	gh   *ghapp.Installation
	pr   *ghapp.PullRequest
	repo *ghapp.Repository
	git  *git.Repository
	// targets are the repository's targets, refined by its own file;
	// unrenderable its discovered sources that cannot be rendered.
	targets      []targets.Target
	unrenderable []*discover.Found
	problems     []string
	// compared are the commits the review compares: the base branch's tip
	// and what merging gives.
	compared drift.Compared
	log      *slog.Logger
}

// fork says the pull request comes from another repository. Fail closed: a
// head repository that is missing (a deleted fork) or different from the
// base is a fork.
func (p *pullRequest) fork() bool {
	return !strings.EqualFold(p.pr.HeadRepo, p.req.owner+"/"+p.req.repo)
}

// processPR compares what a pull request changes with its clusters and
// publishes the comment and check runs: read it, fetch it, find its
// targets, compare them, publish.
func (a *App) processPR(ctx context.Context, req prRequest, log *slog.Logger) error {
	p := &pullRequest{req: req, log: log}
	var err error
	if p.gh, err = a.clients.Installation(req.installation); err != nil {
		return err
	}
	if current, err := a.readPullRequest(ctx, p); err != nil || !current {
		return err
	}
	release, err := a.fetchPullRequest(ctx, p)
	if err != nil {
		return err
	}
	defer release()
	a.pullTargets(ctx, p)
	if p.pr.Draft && !review.AnyDrafts(p.targets) {
		log.Info("draft pull request skipped")
		return nil
	}
	in, err := a.reviewInput(ctx, p)
	if err != nil {
		return err
	}
	rep, checks := a.reviewer().Review(ctx, in)
	if a.compared != nil {
		a.compared(req.number, rep, checks)
	}
	return a.publishPullRequest(ctx, p, rep, checks)
}

// readPullRequest reads the pull request and its repository; current is
// false when there is nothing to do (it moved on, or closed).
func (a *App) readPullRequest(ctx context.Context, p *pullRequest) (current bool, err error) {
	req := p.req
	if p.pr, err = p.gh.PullRequest(ctx, req.owner, req.repo, req.number); err != nil {
		return false, err
	}
	if p.pr.HeadSHA != req.sha {
		p.log.Info("pull request moved on; a newer event reports it", "head", p.pr.HeadSHA)
		return false, nil
	}
	if !p.pr.Open {
		return false, nil
	}
	// GitHub computes whether a pull request merges, and its test merge,
	// in the background after a change: asked early, it answers null.
	for i := 0; p.pr.Mergeable == nil && i < len(a.mergeWaits()); i++ {
		select {
		case <-ctx.Done():
			return false, context.Cause(ctx)
		case <-time.After(a.mergeWaits()[i]):
		}
		if p.pr, err = p.gh.PullRequest(ctx, req.owner, req.repo, req.number); err != nil {
			return false, err
		}
		if p.pr.HeadSHA != req.sha {
			return false, nil
		}
	}
	p.repo, err = p.gh.Repository(ctx, req.owner, req.repo)
	return err == nil, err
}

// mergeWaits are the pauses before asking GitHub again whether a pull
// request merges, while it answers that it does not know yet.
func (a *App) mergeWaits() []time.Duration {
	if a.MergeWaits != nil {
		return a.MergeWaits
	}
	return []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
}

// fetchPullRequest brings the default branch, the pull request's head and
// the branch it merges into, into the repository cache.
func (a *App) fetchPullRequest(ctx context.Context, p *pullRequest) (release func(), err error) {
	token, err := p.gh.Token(ctx)
	if err != nil {
		return nil, fmt.Errorf("installation token: %w", err)
	}
	refs := []string{"refs/heads/" + p.repo.DefaultBranch, fmt.Sprintf("refs/pull/%d/head", p.req.number)}
	if b := p.pr.BaseRef; b != "" && b != p.repo.DefaultBranch {
		refs = append(refs, "refs/heads/"+b)
	}
	want := []string{p.pr.BaseSHA, p.pr.HeadSHA}
	if p.pr.MergeSHA != "" {
		p.git, release, err = a.cache.Fetch(ctx, p.req.owner+"/"+p.req.repo, p.repo.CloneURL, token,
			append(refs, fmt.Sprintf("refs/pull/%d/merge", p.req.number)), append(want, p.pr.MergeSHA))
		if err == nil {
			return release, nil
		}
		// GitHub may have made a newer test merge since: compare with
		// the merge base; the note says the test merge could not be read.
		p.log.Info("cannot fetch GitHub's test merge", "merge", p.pr.MergeSHA, "err", err)
	}
	p.git, release, err = a.cache.Fetch(ctx, p.req.owner+"/"+p.req.repo, p.repo.CloneURL, token, refs, want)
	return release, err
}

// pullTargets are the repository's targets, once discovery has read its
// clusters (or given up waiting), refined by the repository's own file on
// its default branch.
func (a *App) pullTargets(ctx context.Context, p *pullRequest) {
	a.targets.WaitSynced(ctx, 30*time.Second)
	p.problems = append(p.problems, a.targets.Problems()...)
	p.targets, p.unrenderable = a.targetsOf(p.req.owner + "/" + p.req.repo)
	content, err := repos.BranchFile(p.git, p.repo.DefaultBranch, config.RepoConfigPath)
	if err != nil || content == nil {
		return
	}
	if p.targets, err = targets.Refine(p.targets, content); err != nil {
		p.problems = append(p.problems, err.Error())
	}
}

// reviewInput is what the review of the pull request compares: its trees,
// its targets with globs expanded, who it comes from and the labels a
// writer applied.
func (a *App) reviewInput(ctx context.Context, p *pullRequest) (review.Input, error) {
	// What merging does: the base branch's tip against GitHub's test
	// merge, never against a head that lacks the base's newer commits.
	compared, err := merge.Choose(p.git, merge.PullRequest{Base: p.pr.BaseSHA, BaseRef: p.pr.BaseRef, Head: p.pr.HeadSHA,
		Merge: p.pr.MergeSHA, Conflicts: p.pr.Mergeable != nil && !*p.pr.Mergeable})
	if err != nil {
		return review.Input{}, err
	}
	p.compared = compared
	base, err := render.GitTreeContext(ctx, p.git, compared.Base)
	if err != nil {
		return review.Input{}, err
	}
	head, err := render.GitTreeContext(ctx, p.git, compared.Head)
	if err != nil {
		return review.Input{}, err
	}
	var tip *render.Tree
	if compared.How == drift.HowMergeBase {
		if tip, err = render.GitTreeContext(ctx, p.git, p.pr.BaseSHA); err != nil {
			return review.Input{}, err
		}
	}
	changed, err := render.Changed(base, head)
	if err != nil {
		return review.Input{}, err
	}
	// What a pull request may read from the cluster is bounded by what its
	// targets render at the tip of the branch they follow, the one the pull
	// request merges into (a pull request into a branch a target does not
	// follow does not affect it): a change cannot widen its own scope.
	branch := p.pr.BaseRef
	if branch == "" {
		branch = p.repo.DefaultBranch
	}
	scope, err := repos.BranchTree(ctx, p.git, branch)
	if err != nil {
		return review.Input{}, err
	}
	ts := targets.ExpandGlobs(p.targets, base, head)
	labels, err := a.writersLabels(ctx, p, ts)
	if err != nil {
		return review.Input{}, err
	}
	return review.Input{
		Targets: ts, Unrenderable: p.unrenderable, Problems: p.problems,
		Base: base, Head: head, Tip: tip, Scope: scope, Changed: changed, Branch: p.pr.BaseRef, DefaultBranch: p.repo.DefaultBranch,
		Fork:      p.fork(),
		ForceLive: p.req.forceLive,
		Labels:    labels,
		History:   review.History(p.git, compared.Base, p.gh.Earlier(p.req.owner, p.req.repo)),
		// The pull request's own commits: from its head back to where it
		// left its base.
		Reverts: review.Reverts(p.git, mergeBase(p), p.pr.HeadSHA, p.log),
	}, nil
}

// mergeBase is where the pull request left its base; its head when that
// cannot be read (no revert commit is then named).
func mergeBase(p *pullRequest) string {
	if p.compared.How == drift.HowMergeBase {
		return p.compared.Base
	}
	mb, err := merge.Base(p.git, p.pr.BaseSHA, p.pr.HeadSHA)
	if err != nil {
		return p.pr.HeadSHA
	}
	return mb
}

// writersLabels are the pull request's labels, those that acknowledge a
// target's dangers only when someone with write permission applied them.
func (a *App) writersLabels(ctx context.Context, p *pullRequest, ts []targets.Target) (map[string]bool, error) {
	labels := map[string]bool{}
	for _, l := range p.pr.Labels {
		labels[l] = true
	}
	var ack []string
	for _, t := range ts {
		ack = append(ack, t.Policy.AckLabel)
	}
	return p.gh.WritersLabels(ctx, p.req.owner, p.req.repo, p.req.number, labels, ack, p.log)
}

// publishPullRequest writes the comment and the check runs, under the pull
// request's lock. A pull request with nothing to say and nothing said
// before gets its checks only.
func (a *App) publishPullRequest(ctx context.Context, p *pullRequest, rep *drift.Report, checks []review.CheckResult) error {
	req := p.req
	lock := a.publishLock(req.key())
	lock.Lock()
	defer lock.Unlock()
	if errors.Is(context.Cause(ctx), queue.ErrSuperseded) {
		// A newer commit's report is coming: this one would be written
		// only to be overwritten, and spend the installation's writes.
		p.log.Info("superseded before publishing; the newer commit reports")
		return nil
	}
	published := publishedChecks(checks, p.fork())
	if p.fork() {
		ctx = ghapp.Yielding(ctx)
	}
	if len(rep.Targets) == 0 && len(rep.Errors) == 0 && len(rep.NotRendered) == 0 {
		said, err := p.gh.Commented(ctx, req.owner, req.repo, req.number)
		if err != nil {
			return err
		}
		if !said {
			// Nothing to say and nothing said before: stay quiet.
			return p.gh.PublishChecks(ctx, req.owner, req.repo, p.pr.HeadSHA, published)
		}
	}
	rep.Compared = &p.compared
	parts := report.Comment(rep, report.CommentOptions{Failing: review.Failing(checks), Checked: true})
	parts[len(parts)-1] += "\n" + report.Footer(p.compared, a.now())
	// Publishing is find-or-create by marker and by check name, so a failed
	// attempt is simply repeated: what it created is found, not duplicated.
	// Once begun it is not cancelled (by shutdown or a newer commit, which
	// waits for the lock): a comment set is never left half written.
	job := ctx
	ctx, cancel := ghapp.WithPublishBudget(ctx, a.publishTimeout())
	defer cancel()
	// The per-target check runs of a commit a newer one superseded are not
	// written: the newer commit's are coming.
	ctx = ghapp.UnlessStopped(ctx, func() bool { return errors.Is(context.Cause(job), queue.ErrSuperseded) })
	err := ghapp.RetryPublish(ctx, func() error {
		if err := p.gh.PublishComment(ctx, req.owner, req.repo, req.number, parts); err != nil {
			return err
		}
		return p.gh.PublishChecks(ctx, req.owner, req.repo, p.pr.HeadSHA, published)
	})
	// A wait longer than a worker holds on: the whole publish runs again
	// once GitHub's limit allows, so the comment is not left half written.
	if wait, ok := ghapp.RateLimitWait(err); ok {
		return &queue.RetryLater{Wait: wait, Err: err}
	}
	return err
}

// publishedChecks are the check runs a pull request gets: the aggregate,
// then one per affected target; an unaffected target's run is counted in
// the aggregate, not written (k+1 writes for k affected targets). A fork's
// pull request gets the aggregate only: its author pushes as often as they
// like, and every push must not cost the installation k+1 writes.
func publishedChecks(checks []review.CheckResult, fork bool) []ghapp.Check {
	out := []ghapp.Check{published(review.Aggregate(checks))}
	if fork {
		return out
	}
	for _, c := range checks {
		if !c.Unaffected {
			out = append(out, published(c))
		}
	}
	return out
}

// errorComment tells the pull request that driftback failed on it.
func (a *App) errorComment(ctx context.Context, req prRequest, cause error) {
	gh, err := a.clients.Installation(req.installation)
	if err != nil {
		return
	}
	body := report.ErrorComment(cause, req.sha, a.now())
	lock := a.publishLock(req.key())
	lock.Lock()
	defer lock.Unlock()
	err = gh.PublishComment(ctx, req.owner, req.repo, req.number, []string{body})
	var tooLarge *render.TooLargeError
	if err == nil && errors.As(cause, &tooLarge) {
		// Nothing of the pull request was compared: the required check
		// says so, and fails, rather than waiting for a run that never comes.
		err = gh.PublishChecks(ctx, req.owner, req.repo, req.sha, []ghapp.Check{published(review.TooLarge(tooLarge))})
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		a.log.Error("could not report the failure on the pull request", "err", err)
	}
}

// published is a check as GitHub shows it.
func published(c review.CheckResult) ghapp.Check {
	return ghapp.Check{Name: c.Name, Conclusion: c.Conclusion, Title: c.Title, Summary: c.Summary, Text: c.Text}
}
