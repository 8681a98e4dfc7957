package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/driftback/driftback/drift"
)

// MaxCheckText is GitHub's limit on a check run's summary and on its text.
const MaxCheckText = 65535

// CheckTitle is a check run's title for a target that compared cleanly.
func CheckTitle(t *drift.Target) string {
	counts := map[drift.Action]int{}
	for _, c := range t.Changes {
		counts[c.Action]++
	}
	return fmt.Sprintf("%d to create, %d to update, %d to delete", counts[drift.ActionCreate], counts[drift.ActionUpdate], counts[drift.ActionDelete])
}

// CheckSummary is a check run's summary: the target's part of the comment,
// verdict first, cut where the comment would split. failing is set when the
// check fails on dangers.
func CheckSummary(t *drift.Target, failing *Failing) string {
	opts := CommentOptions{Limit: MaxCheckText - 512, Checked: true}
	if failing != nil {
		opts.Failing = []Failing{*failing}
	}
	parts := Comment(&drift.Report{Targets: []drift.Target{*t}}, opts)
	if len(parts) > 1 {
		return parts[0] + "\n\n_(continued in the pull-request comment)_"
	}
	return parts[0]
}

// RenderProblemsSummary lists why a target does not render.
func RenderProblemsSummary(problems []string) string {
	var b strings.Builder
	for _, p := range problems {
		b.WriteString("- " + text(p) + "\n")
	}
	return b.String()
}

// ComparisonFailedSummary says why a target could not be compared at all.
func ComparisonFailedSummary(err error) string {
	return "The comparison failed: " + text(err.Error()) + "\n"
}

// DangerousTitle is the title of a check that fails on dangers; failing
// lists them as "reason (count)".
func DangerousTitle(failing []string) string {
	return plain("Dangerous: " + strings.Join(failing, ", "))
}

// AcknowledgedTitle is the title of a check whose dangers a label accepted.
func AcknowledgedTitle(ackLabel string) string {
	return plain("Dangers acknowledged with " + ackLabel)
}

// GitOnlySummary prefixes a target's summary with why the cluster was not
// read.
func GitOnlySummary(liveErr, summary string) string {
	return text(liveErr) + "\n\n" + summary
}

// IncompleteTitle is the title of a check some of whose objects could not
// be compared; the summary lists them.
func IncompleteTitle(problems int) string {
	return fmt.Sprintf("Incomplete: %s, see the summary", plural(problems, "comparison problem"))
}

// NotComparedTitle is the title of a check whose target was not compared
// at all, and why ("it does not render").
func NotComparedTitle(why string) string {
	return plain("Not compared: " + why)
}

// OutOfScopeTitle is the title of a check some of whose objects were
// compared in Git only, being outside the target's scope.
func OutOfScopeTitle(n int) string {
	return fmt.Sprintf("%s outside the target's scope: not compared with the cluster", plural(n, "object"))
}

// ErrorComment tells a pull request driftback failed on it.
func ErrorComment(cause error, sha string, at time.Time) string {
	return fmt.Sprintf("## driftback could not check this pull request\n\n%s\n\nPush a new commit, or comment `/driftback diff <commit>` naming the head, to try again.\n\n%s",
		text(cause.Error()), Footer(drift.Compared{Head: sha}, at))
}

// TooLargeSummary is the required check's summary for a pull request whose
// commit is too large to compare.
func TooLargeSummary(cause string) string {
	return text(cause) + "\n\nNothing of this pull request was compared. A commit this large is refused so that no pull request can exhaust the server; if it is real, split it."
}

// Footer ends a comment with the commits it compares and when.
func Footer(c drift.Compared, at time.Time) string {
	return fmt.Sprintf("---\n<sub>driftback · %s · %s</sub>\n", html(comparedCommits(c)), at.UTC().Format("2006-01-02 15:04:05 UTC"))
}

// comparedCommits names the commits a report compares, and how.
func comparedCommits(c drift.Compared) string {
	branch := c.BaseRef
	if branch == "" {
		branch = "base"
	}
	switch {
	case c.How == drift.HowMerge && c.PullHead != "" && c.PullHead == c.Head:
		return fmt.Sprintf("%s %s merged with head %s (merged file by file)", branch, short(c.Base), short(c.PullHead))
	case c.How == drift.HowMerge && c.PullHead != "":
		return fmt.Sprintf("%s %s merged with head %s (test merge %s)", branch, short(c.Base), short(c.PullHead), short(c.Head))
	case c.How == drift.HowMergeBase:
		return fmt.Sprintf("head %s against the merge base %s with %s", short(c.Head), short(c.Base), branch)
	case c.Base == "":
		return "head " + short(c.Head)
	}
	return fmt.Sprintf("%s %s → head %s", branch, short(c.Base), short(c.Head))
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// DriftIssueTitle is the title of a target's drift issue.
func DriftIssueTitle(target string) string { return truncateRunes(plain("Drift in "+target), maxTitle) }

// ApproveHowTo answers a bare "/driftback diff" (or one naming a commit by
// a short SHA): live data is shown for the commit a writer names in full, so
// a push after the approval is not covered.
func ApproveHowTo(user, head string) string {
	return fmt.Sprintf("%s: to show live cluster data on this pull request, review its head and name that commit in full: %s. A push after it is not covered until approved again.\n",
		code("@"+user), code("/driftback diff "+head))
}

// ApproveStale answers a "/driftback diff <sha>" whose commit is no longer
// the head.
func ApproveStale(user, approved, head string) string {
	return fmt.Sprintf("%s: not run. The pull request's head is now %s, not %s: review it, then comment %s.\n",
		code("@"+user), code(head), code(approved), code("/driftback diff "+head))
}

// CheckRow is one affected target in the aggregate check's summary.
type CheckRow struct {
	Target, Conclusion, Title string
	// Advisory rows are of targets whose failure does not fail the sum.
	Advisory bool
}

// AggregateTitle is the title of the check run that sums up a pull request.
func AggregateTitle(affected, targets int, failing, neutral int) string {
	switch {
	case affected == 0:
		return plain(fmt.Sprintf("No target affected (of %d)", targets))
	case failing > 0:
		return plain(fmt.Sprintf("%d of %d affected targets failing", failing, affected))
	case neutral > 0:
		return plain(fmt.Sprintf("%d of %d affected targets not fully compared", neutral, affected))
	}
	return plain(fmt.Sprintf("%s affected, nothing to stop the merge", plural(affected, "target")))
}

// AggregateSummary lists the affected targets with their own checks'
// conclusions; the others are not affected.
func AggregateSummary(rows []CheckRow, unaffected int) string {
	var b strings.Builder
	if len(rows) > 0 {
		b.WriteString("| target | result | |\n|---|---|---|\n")
		advisory := false
		for _, r := range rows {
			conclusion := r.Conclusion
			if r.Advisory {
				conclusion += " (advisory)"
				advisory = true
			}
			fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(r.Target), cell(conclusion), cell(r.Title))
		}
		b.WriteString("\n")
		if advisory {
			b.WriteString("An advisory target comes from a reconciler object on a repository app.yml does not name: its failure does not fail this check.\n\n")
		}
	}
	if unaffected > 0 {
		fmt.Fprintf(&b, "%s not affected: this pull request changes nothing they render.\n", plural(unaffected, "other target"))
	}
	return b.String()
}
