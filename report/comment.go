// Package report writes what driftback found as GitHub-flavoured Markdown:
// the pull-request comment, check runs, drift pull requests and issues, and
// commit messages. It is the one place text from Git, the cluster or GitHub
// becomes Markdown, and only through the functions of md.go.
package report

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/report/prediction"
	"github.com/driftback/driftback/report/valuediff"
)

// MaxCommentSize is GitHub's limit on the body of a comment.
const MaxCommentSize = 65536

// CommentOptions shape the pull-request comment.
type CommentOptions struct {
	// Limit is the size of one part; 0 means MaxCommentSize less room for a
	// marker and footer that the caller adds (1,024 characters).
	Limit int
	// Failing lists the targets whose check fails on dangers: the verdict
	// says so, the dangers that fail are marked, and the comment ends with
	// what to do next.
	Failing []Failing
	// Checked is true when check runs judge the pull request: a verdict
	// without failing targets then says that no danger fails a check.
	Checked bool
}

// FailingName is how Failing.Target names t: its name, else its path (a
// target of the command line has none).
func FailingName(t drift.Target) string {
	if t.Name != "" {
		return t.Name
	}
	return t.Path
}

// Failing is a target whose check fails on dangers its policy names.
type Failing struct {
	// Target names the target; Reasons are "reason (count)", On the
	// reasons themselves.
	Target   string
	Reasons  []string
	On       []drift.DangerReason
	AckLabel string
}

// Comment renders the report as a pull-request comment: a summary table,
// then dangers, then each target with each affected object once, every
// changed field tagged with what it is to the pull request, then what to do
// next when a check fails. A report over the limit is split into numbered
// parts at block boundaries; no part breaks a code fence or a details block.
func Comment(r *drift.Report, opts CommentOptions) []string {
	limit := opts.Limit
	if limit <= 0 {
		limit = MaxCommentSize - 1024
	}
	blocks := markdownBlocks(r, opts)
	if n := nextSteps(opts.Failing); n != "" {
		blocks = append(blocks, n)
	}
	return pack(blocks, limit)
}

// markdownBlocks renders the report as self-contained blocks, in order.
func markdownBlocks(r *drift.Report, opts CommentOptions) []string {
	var blocks []string
	var b strings.Builder
	b.WriteString("## driftback: what merging this pull request does to the cluster\n\n")
	groups := groupTargets(r)
	dangers := listDangers(r, opts.Failing, groups)
	b.WriteString(verdict(r, opts, dangers) + "\n\n")
	if r.Compared != nil && r.Compared.Note != "" {
		b.WriteString("> ⚠️ " + text(r.Compared.Note) + "\n\n")
	}
	b.WriteString(summaryTable(r, groups))
	blocks = append(blocks, b.String())

	if len(r.Errors) > 0 {
		var e strings.Builder
		e.WriteString("### ❌ Errors\n\n")
		for _, msg := range r.Errors {
			e.WriteString("- " + text(msg) + "\n")
		}
		blocks = append(blocks, e.String())
	}
	if u := unreadSection(r, groups); u != "" {
		blocks = append(blocks, u)
	}

	if len(r.NotRendered) > 0 {
		var e strings.Builder
		e.WriteString("### Not rendered\n\n")
		for _, n := range r.NotRendered {
			where := code(n.Source)
			if n.Path != "" {
				where += " (" + code(n.Path) + ")"
			}
			if n.Cluster != "" {
				where += " on cluster " + code(n.Cluster)
			}
			e.WriteString("- " + where + ": not rendered: " + text(n.Reason) + "\n")
		}
		blocks = append(blocks, e.String())
	}
	if d := dangerSection(dangers); d != "" {
		blocks = append(blocks, d)
	}
	for i, t := range r.Targets {
		if groups.grouped(i) {
			continue
		}
		title, preface := targetTitle(t), ""
		if members := groups.members[i]; len(members) > 1 {
			title = groupTitle(t, len(members)-1)
			preface = groupList(r, members)
			if namespacesDiffer(r, members) {
				preface += fmt.Sprintf("> Shown as in %s; each of the others has the same changes in its own namespace.\n\n", code(t.Path))
			}
		}
		blocks = append(blocks, targetBlocks(i, t, dangers, title, preface)...)
	}
	if p := prediction.Markers(r); p != "" {
		blocks = append(blocks, p)
	}
	return blocks
}

// unreadSection says once each reason a cluster could not be read, with
// the targets it leaves in Git only.
func unreadSection(r *drift.Report, groups targetGroups) string {
	var order []string
	targets := map[string][]string{}
	for i, t := range r.Targets {
		if t.LiveError == "" || t.LiveNotAsked || t.NotCompared != "" || groups.grouped(i) {
			continue
		}
		if _, ok := targets[t.LiveError]; !ok {
			order = append(order, t.LiveError)
		}
		targets[t.LiveError] = append(targets[t.LiveError], groupTitle(t, groups.others(i)))
	}
	if len(order) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("### ❌ The cluster could not be read\n\n")
	for _, msg := range order {
		fmt.Fprintf(&b, "- %s: %s\n", strings.Join(targets[msg], ", "), text(msg))
	}
	b.WriteString("\nWhat merging does there is shown in Git only; live changes a sync reverts are unknown (`?`).\n")
	return b.String()
}

// nextSteps says, when checks fail on dangers, how to accept them.
func nextSteps(failing []Failing) string {
	if len(failing) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("### What to do next\n\n")
	for _, f := range failingAlike(failing) {
		check := "The check of " + namesList(f.targets) + " fails"
		if len(f.targets) > 1 {
			check = "The checks of " + namesList(f.targets) + " fail"
		}
		fmt.Fprintf(&b, "- %s on %s. Once the dangers above are reviewed and wanted, add the label %s to accept them.\n",
			check, text(strings.Join(f.Reasons, ", ")), code(f.AckLabel))
	}
	b.WriteString("\nEvery new push is evaluated again.\n")
	return b.String()
}

// targetTitle names a target, its overlay and its cluster.
func targetTitle(t drift.Target) string {
	s := code(t.Path)
	if t.Name != "" && t.Name != t.Path {
		s = code(t.Name) + " (" + code(t.Path) + ")"
	}
	if t.Cluster != "" {
		s += " on cluster " + code(t.Cluster)
	}
	return s
}

// fieldCounts counts a target's told fields by kind.
func fieldCounts(t drift.Target) map[object.FieldKind]int {
	out := map[object.FieldKind]int{}
	for _, c := range t.Told() {
		for _, f := range c.Fields {
			out[f.Kind]++
		}
	}
	return out
}

func summaryTable(r *drift.Report, groups targetGroups) string {
	var b strings.Builder
	b.WriteString("| target | create | update | delete | unchanged | ⚠️ dangers | ↩️ live changes a sync reverts |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for i, t := range r.Targets {
		if groups.grouped(i) {
			continue // its group's row counts one target's changes: they are the same
		}
		if t.NotCompared != "" {
			fmt.Fprintf(&b, "| %s ❌ not compared: %s | – | – | – | – | – | – |\n", strings.ReplaceAll(targetTitle(t), "|", `\|`),
				strings.ReplaceAll(text(t.NotCompared), "|", `\|`))
			continue
		}
		counts := map[drift.Action]int{}
		dangers := 0
		for _, c := range t.Told() {
			counts[c.Action]++
			for _, d := range c.Danger {
				if !d.Before {
					dangers++
				}
			}
		}
		fields := fieldCounts(t)
		reverted := bold(fields[object.FieldOverwrites] + fields[object.FieldDrift])
		if t.LiveError != "" {
			reverted = "?" // unknown: the cluster was not read
		}
		fmt.Fprintf(&b, "| %s%s | %d | %d | %d | %d | %s | %s |\n", strings.ReplaceAll(groupTitle(t, groups.others(i)), "|", `\|`), liveMark(t),
			counts[drift.ActionCreate], counts[drift.ActionUpdate], counts[drift.ActionDelete]+counts[drift.ActionKeep], counts[drift.ActionUnchanged],
			bold(dangers), reverted)
	}
	if len(r.Targets) == 0 {
		b.WriteString("| _no overlay is affected by this change_ | | | | | | |\n")
	}
	return b.String()
}

func liveMark(t drift.Target) string {
	switch {
	case t.LiveError != "" && t.LiveNotAsked:
		return " (Git only: cluster not read)"
	case t.LiveError != "":
		return " (Git only: ❌ the cluster could not be read)"
	}
	var marks []string
	if n := len(t.OutOfScope); n > 0 {
		marks = append(marks, fmt.Sprintf("%s outside its scope", plural(n, "object")))
	}
	if n := len(t.Unread); n > 0 {
		marks = append(marks, fmt.Sprintf("❌ %s not in the live state", plural(n, "object")))
	}
	if len(marks) == 0 {
		return ""
	}
	return " (" + strings.Join(marks, ", ") + ": Git only)"
}

func bold(n int) string {
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("**%d**", n)
}

// listedDanger is one danger of the report, where it is, and its number in
// the comment's list (0 for one true before the pull request).
type listedDanger struct {
	target int
	t      drift.Target
	// others counts the targets of t's group with the same danger.
	others  int
	change  drift.Change
	danger  drift.Danger
	number  int
	failing bool
}

// dangerKey finds a listed danger from its object's block.
func dangerKey(target int, c drift.Change, reason drift.DangerReason) string {
	return fmt.Sprintf("%d|%s|%s", target, c.Ref().Key(), reason)
}

// dangerList is the report's dangers in the order a reader takes them: the
// pull request's own, most severe first, numbered; then those as true
// before it.
type dangerList struct {
	own, before []listedDanger
	at          map[string]listedDanger
}

func listDangers(r *drift.Report, failing []Failing, groups targetGroups) dangerList {
	fails := map[string]bool{}
	for _, f := range failing {
		for _, reason := range f.On {
			fails[f.Target+"|"+string(reason)] = true
		}
	}
	var l dangerList
	for i, t := range r.Targets {
		if groups.grouped(i) {
			continue // told once, by its group's first target
		}
		for _, c := range t.Told() {
			for _, d := range c.Danger {
				// It fails a check when it fails any of its group's.
				failing := false
				for _, m := range groups.members[i] {
					failing = failing || fails[FailingName(r.Targets[m])+"|"+string(d.Reason)]
				}
				ld := listedDanger{target: i, t: t, others: groups.others(i), change: c, danger: d, failing: !d.Before && failing}
				if d.Before {
					l.before = append(l.before, ld)
				} else {
					l.own = append(l.own, ld)
				}
			}
		}
	}
	sort.SliceStable(l.own, func(i, j int) bool {
		return l.own[i].danger.Reason.Severity() < l.own[j].danger.Reason.Severity()
	})
	l.at = map[string]listedDanger{}
	for i := range l.own {
		l.own[i].number = i + 1
		l.at[dangerKey(l.own[i].target, l.own[i].change, l.own[i].danger.Reason)] = l.own[i]
	}
	for _, d := range l.before {
		l.at[dangerKey(d.target, d.change, d.danger.Reason)] = d
	}
	return l
}

// severityName says, for a reader, what a danger costs.
var severityName = map[drift.Severity]string{
	drift.SeverityDataLoss:    "data lost",
	drift.SeveritySyncFails:   "the sync fails",
	drift.SeverityPodsRefused: "pods refused",
	drift.SeverityPrivilege:   "privilege",
	drift.SeverityAdvisory:    "advisory",
}

// severityCount says, after a count, what the dangers of a severity do.
var severityCount = map[drift.Severity]string{
	drift.SeverityDataLoss:    "losing data",
	drift.SeveritySyncFails:   "failing the sync",
	drift.SeverityPodsRefused: "refusing pods",
	drift.SeverityPrivilege:   "granting privilege",
	drift.SeverityAdvisory:    "advisory",
}

// verdict is the first line of the comment, of a check's summary and of the
// command line's report: whether checks fail and on what, how to accept
// that, or that nothing here is dangerous.
func verdict(r *drift.Report, opts CommentOptions, dangers dangerList) string {
	incomplete := ""
	for _, t := range r.Targets {
		// A live state that failed, or lacks kinds: what it would have
		// shown (an overwrite, a count) is unknown.
		if t.NotCompared != "" || len(t.Errors) > 0 || len(t.Unread) > 0 || (t.LiveError != "" && !t.LiveNotAsked) {
			incomplete = " Not everything was compared: see ❌ below."
			break
		}
	}
	if len(r.Errors) > 0 {
		incomplete = " Not everything was compared: see ❌ below."
	}
	if len(opts.Failing) > 0 {
		var on, labels []string
		for _, f := range failingAlike(opts.Failing) {
			on = append(on, text(strings.Join(f.Reasons, ", "))+" in "+namesList(f.targets))
			if !slices.Contains(labels, f.AckLabel) {
				labels = append(labels, f.AckLabel)
			}
		}
		var ls []string
		for _, l := range labels {
			ls = append(ls, code(l))
		}
		return fmt.Sprintf("❌ **The check fails** on %s. Review the dangers below; if they are wanted, someone with write access to the repository adds the label %s to accept them.%s",
			strings.Join(on, "; "), strings.Join(ls, " or "), incomplete)
	}
	if len(dangers.own) == 0 {
		if incomplete != "" {
			// What was not compared may hold a danger: no all-clear.
			return "⚠️ **Not everything was compared** (see ❌ below); nothing in what was is dangerous."
		}
		return "✅ **Nothing here is dangerous**: no data is lost, no sync fails, no privilege is granted."
	}
	bySeverity := map[drift.Severity]int{}
	for _, d := range dangers.own {
		bySeverity[d.danger.Reason.Severity()]++
	}
	var parts []string
	for s := drift.SeverityDataLoss; s <= drift.SeverityAdvisory; s++ {
		if n := bySeverity[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, severityCount[s]))
		}
	}
	v := fmt.Sprintf("⚠️ **%s to review**: %s", plural(len(dangers.own), "danger"), strings.Join(parts, ", "))
	if opts.Checked {
		v += "; none fails a check."
	} else {
		v += "."
	}
	return v + incomplete
}

func dangerSection(l dangerList) string {
	var b strings.Builder
	var marks []string
	if len(l.own) > 0 {
		fmt.Fprintf(&b, "### ⚠️ Dangers this pull request brings (%d)\n\n", len(l.own))
		for _, d := range l.own {
			c := d.change
			fails := ""
			if d.failing {
				fails = " ❌ **fails the check**"
			}
			fmt.Fprintf(&b, "%d. %s · **%s** %s in %s (%s)%s: %s\n", d.number, severityName[d.danger.Reason.Severity()], text(string(d.danger.Reason)),
				code(refString(c)), groupTitle(d.t, d.others), text(string(c.Action)), fails, text(d.danger.Message))
			for _, lost := range d.danger.Lost {
				b.WriteString("   - " + lostLine(lost) + "\n")
			}
			if more := d.danger.Count - len(d.danger.Lost); len(d.danger.Lost) > 0 && more > 0 {
				fmt.Fprintf(&b, "   - and %d more\n", more)
			}
			if m := LostMarker(d.danger, c); m != "" {
				marks = append(marks, m)
			}
		}
		b.WriteString("\n")
		if len(marks) > 0 {
			b.WriteString(strings.Join(marks, "\n") + "\n")
		}
	}
	if len(l.before) > 0 {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "<details><summary>Already true before this pull request (%d): not counted above</summary>\n\n", len(l.before))
		for _, d := range l.before {
			fmt.Fprintf(&b, "- **%s** %s in %s: %s\n", text(string(d.danger.Reason)), code(refString(d.change)), groupTitle(d.t, d.others), text(d.danger.Message))
		}
		b.WriteString("\n</details>\n")
	}
	return b.String()
}

// lostLine names an object a removal deletes: whether Git has it, who made
// it, what losing it costs.
func lostLine(l drift.Lost) string {
	ref := l.Kind + "/" + l.Name
	if l.Namespace != "" {
		ref = l.Kind + "/" + l.Namespace + "/" + l.Name
	}
	var says []string
	if l.InGit {
		says = append(says, "in Git")
	} else {
		says = append(says, "not in Git")
	}
	if l.CreatedBy != "" {
		says = append(says, "made by "+l.CreatedBy)
	}
	if l.Detail != "" {
		says = append(says, l.Detail)
	}
	return code(ref) + ": " + text(strings.Join(says, "; "))
}

// LostMarker records, invisibly in the comment, how many objects a removal
// deletes as measured on the cluster, so that a later pull request restoring
// the same CRD or namespace can say what did not come back. Names are
// query-escaped: nothing from Git can close the HTML comment.
func LostMarker(d drift.Danger, c drift.Change) string {
	if d.CountUnknown || (d.Reason != drift.DangerCRDRemoval && d.Reason != drift.DangerNamespaceRemoval) {
		return ""
	}
	return fmt.Sprintf("<!-- driftback:lost kind=%s name=%s count=%d -->", url.QueryEscape(c.Kind), url.QueryEscape(c.Name), d.Count)
}

// lostPattern matches a LostMarker on its own line, where driftback writes it.
var lostPattern = regexp.MustCompile(`(?m)^<!-- driftback:lost kind=([^ ]+) name=([^ ]+) count=(\d+) -->\r?$`)

// LostCount reads back a LostMarker from a comment's body.
func LostCount(body, kind, name string) (int, bool) {
	for _, m := range lostPattern.FindAllStringSubmatch(body, -1) {
		k, err1 := url.QueryUnescape(m[1])
		n, err2 := url.QueryUnescape(m[2])
		count, err3 := strconv.Atoi(m[3])
		if err1 == nil && err2 == nil && err3 == nil && k == kind && n == name {
			return count, true
		}
	}
	return 0, false
}

// revertSection says what a revert does not restore.
func revertSection(t drift.Target) string {
	if len(t.Reverts) == 0 {
		return ""
	}
	var lines []string
	for _, c := range t.Told() {
		for _, d := range c.Danger {
			if d.Reason == drift.DangerRestoreNotRollback || d.Reason == drift.DangerRollbackAcrossJob {
				lines = append(lines, fmt.Sprintf("- %s: %s", code(refString(c)), text(d.Message)))
			}
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return fmt.Sprintf("#### What this revert does not restore\n\nThis pull request reverts %s. Git goes back; these do not:\n\n%s\n\n",
		text(strings.Join(t.Reverts, "; ")), strings.Join(lines, "\n"))
}

// who says which manager set a live value, how and when: "kubectl scale,
// 2026-11-29 16:08 UTC".
func who(f object.Field) string {
	if f.Manager == "" {
		return ""
	}
	s := f.Manager
	if f.Subresource != "" {
		s += " " + f.Subresource
	}
	if f.Time != nil {
		s += ", " + f.Time.UTC().Format("2006-01-02 15:04 UTC")
	}
	return s
}

// targetBlocks tells one target under title, preface first (the list of
// the targets it stands for).
func targetBlocks(index int, t drift.Target, dangers dangerList, title, preface string) []string {
	var blocks []string
	var head strings.Builder
	fmt.Fprintf(&head, "### %s\n\n", title)
	head.WriteString(preface)
	for _, n := range t.Notes {
		fmt.Fprintf(&head, "> ℹ️ %s\n\n", text(n))
	}
	head.WriteString(revertSection(t))
	switch {
	case t.LiveError != "" && t.LiveNotAsked:
		fmt.Fprintf(&head, "> Git change only (%s): what a sync does on the cluster is not shown.\n\n", text(t.LiveError))
	case t.LiveError != "":
		head.WriteString("> ❌ The cluster could not be read (above): this shows what the pull request changes in Git only; what a sync does on the cluster is unknown.\n\n")
	}
	for _, e := range t.Errors {
		fmt.Fprintf(&head, "- ❌ not compared: %s\n", text(e))
	}
	if len(t.Errors) > 0 {
		head.WriteString("\n")
	}
	if t.NotCompared != "" {
		fmt.Fprintf(&head, "**Not compared: %s.** What merging does to this target is unknown until that is fixed.\n", text(t.NotCompared))
		return append(blocks, head.String())
	}
	what := "What a sync does after merging"
	if t.LiveError != "" {
		what = "What the pull request changes"
	}
	// What changes on the cluster, then what stays as it is live while Git
	// changes (Git takes the live value, or only the cluster differs).
	var changing, unchanged []drift.Change
	told := t.Changes // the unread are listed in their own section below
	if t.LiveError != "" {
		told = t.PR
	}
	for _, c := range told {
		switch {
		case c.Action != drift.ActionUnchanged:
			changing = append(changing, c)
		case len(c.Fields) > 0 || ownDanger(c):
			unchanged = append(unchanged, c)
		}
	}
	if len(changing) == 0 {
		fmt.Fprintf(&head, "%s: nothing.\n", what)
		blocks = append(blocks, head.String())
	} else {
		fmt.Fprintf(&head, "%s (%s):\n", what, plural(len(changing), "object"))
		blocks = append(blocks, head.String())
		for _, c := range changing {
			blocks = append(blocks, changeBlock(index, c, dangers))
		}
	}
	if len(unchanged) > 0 {
		blocks = append(blocks, fmt.Sprintf("Unchanged on the cluster, while Git changes (%s):\n", plural(len(unchanged), "object")))
		for _, c := range unchanged {
			blocks = append(blocks, changeBlock(index, c, dangers))
		}
	}
	if len(t.OutOfScope) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "#### Outside the scope of %s (%d)\n\nThese objects are compared in Git only: the cluster is not read for them, so no live value, owner or count is shown. An operator widens a target's scope with %s in app.yml.\n\n", code(t.Path), len(t.OutOfScope), code("scope:"))
		for _, c := range t.OutOfScope {
			fmt.Fprintf(&b, "- %s: %s in Git\n", code(refString(c)), text(string(c.Action)))
		}
		blocks = append(blocks, b.String())
	}
	if len(t.Unread) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "#### ❌ Not compared with the cluster (%d)\n\nNothing live is known of these objects, not even whether they exist: what a sync does to them is unknown. The dangers Git alone shows (a removal) are counted above; those only the cluster shows (a live change overwritten, what a removal holds) are not.\n\n", len(t.Unread))
		for _, c := range t.Unread {
			fmt.Fprintf(&b, "- %s: %s in Git; %s\n", code(refString(c)), text(string(c.Action)), text(c.Note))
		}
		blocks = append(blocks, b.String())
	}
	return blocks
}

// ownDanger says whether a change has a danger of the pull request's own.
func ownDanger(c drift.Change) bool {
	for _, d := range c.Danger {
		if !d.Before {
			return true
		}
	}
	return false
}

var actionIcon = map[drift.Action]string{
	drift.ActionCreate: "➕ create", drift.ActionUpdate: "✏️ update", drift.ActionDelete: "🗑️ delete",
	drift.ActionKeep: "📌 keep (leaves Git, stays in the cluster)", drift.ActionUnchanged: "＝ no change live",
}

// kindLabel names each kind of field change for a reader.
var kindLabel = map[object.FieldKind]string{
	object.FieldPR:         "changed by this PR",
	object.FieldOverwrites: "↩️ overwrites a live change",
	object.FieldCodifies:   "📝 codifies a live change",
	object.FieldDrift:      "↩️ live change a sync reverts",
}

// changeBlock renders one object once: what happens to it, its dangers, and
// each changed field with what it is to the pull request.
func changeBlock(target int, c drift.Change, dangers dangerList) string {
	var b strings.Builder
	summary := fmt.Sprintf("%s %s", actionIcon[c.Action], htmlCode(refString(c)))
	kinds := map[object.FieldKind]int{}
	for _, f := range c.Fields {
		kinds[f.Kind]++
	}
	var parts []string
	for _, k := range []object.FieldKind{object.FieldPR, object.FieldOverwrites, object.FieldCodifies, object.FieldDrift} {
		if kinds[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", kinds[k], strings.TrimLeft(kindLabel[k], "↩️📝≠ ")))
		}
	}
	if len(parts) > 0 {
		summary += ": " + html(strings.Join(parts, ", "))
	}
	if c.Why != "" && (c.Action == drift.ActionDelete || c.Action == drift.ActionKeep) {
		summary += ": " + html(c.Why)
	}
	if ownDanger(c) {
		summary += " ⚠️"
	}
	fmt.Fprintf(&b, "<details><summary>%s</summary>\n\n", summary)
	if c.KeptBy != "" {
		fmt.Fprintf(&b, "Kept by %s.\n\n", code(c.KeptBy))
	}
	for _, d := range c.Danger {
		ld := dangers.at[dangerKey(target, c, d.Reason)]
		switch {
		case d.Before:
			fmt.Fprintf(&b, "ℹ️ **%s**: already true before this pull request (see the note above).\n\n", text(string(d.Reason)))
		case ld.number > 0:
			fails := ""
			if ld.failing {
				fails = ", which fails the check"
			}
			fmt.Fprintf(&b, "⚠️ danger %d above: **%s**%s.\n\n", ld.number, text(string(d.Reason)), fails)
		}
	}
	if c.Note != "" {
		fmt.Fprintf(&b, "Note: %s\n\n", text(c.Note))
	}
	var fields []object.Field
	var keys []string
	for _, f := range c.Fields {
		if c.Secret && f.Hidden {
			keys = append(keys, secretKeyChange(f))
			continue
		}
		fields = append(fields, f)
	}
	if len(keys) > 0 {
		fmt.Fprintf(&b, "Secret keys changed: %s (values hidden)\n\n", strings.Join(keys, ", "))
	}
	var blocksAfter []string
	for _, f := range fields {
		line, block := fieldLine(c, f)
		b.WriteString(line + "\n")
		if block != "" {
			blocksAfter = append(blocksAfter, block)
		}
	}
	if len(fields) > 0 {
		b.WriteString("\n")
	}
	for _, blk := range blocksAfter {
		b.WriteString(blk + "\n")
	}
	if c.Manifest != "" {
		what := "rendered YAML"
		if c.Action == drift.ActionDelete || c.Action == drift.ActionKeep {
			what = "YAML as the base renders it"
		}
		fmt.Fprintf(&b, "<details><summary>%s</summary>\n\n%s\n</details>\n\n", what, fenced(c.Manifest, "yaml"))
	}
	b.WriteString("</details>\n")
	return b.String()
}

// secretKeyChange names a Secret's key and what happens to it, never its
// value: "`token`", "`refresh` (added)", "`old` (removed)".
func secretKeyChange(f object.Field) string {
	key := code(strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(f.Path, ".data."), ".stringData."), ".data"))
	before := f.Base
	if f.Kind == object.FieldDrift {
		before = f.Live
	}
	switch {
	case before == nil:
		return key + " (added)"
	case f.Desired == nil:
		return key + " (removed)"
	}
	return key
}

// fieldLine tells one field: Git → live for drift, Git before → after for
// the pull request's own change, with who set the live value and when. A
// multi-line string's change comes as a line diff, in a block after the
// list.
func fieldLine(c drift.Change, f object.Field) (string, string) {
	line, block := storyLine(c, f)
	if f.Autoscaler != "" {
		line += "; the replicas belong to " + text(f.Autoscaler)
	}
	return line, block
}

func storyLine(c drift.Change, f object.Field) (string, string) {
	v := func(x any) string { return code(valuediff.Cut(valueText(f, x))) }
	by := ""
	if w := who(f); w != "" {
		by = " (" + text(w) + ")"
	}
	from, to := f.Base, f.Desired
	if f.Kind == object.FieldDrift {
		from, to = f.Live, f.Desired
	}
	// A CRD's versions, a document in a string, a multi-line text: as
	// their changes, in a block after the list. A Secret's values never.
	summary, block, ok := "", "", false
	if !f.Hidden {
		summary, block, ok = valuediff.Field(c.APIVersion, c.Kind, f.Path, from, to)
	}
	if ok {
		what := fmt.Sprintf("- %s %s: %s, as a diff below", kindLabel[f.Kind], code(f.Path), text(summary))
		if f.Kind != object.FieldPR && by != "" {
			what += "; live value set by " + strings.TrimSuffix(strings.TrimPrefix(by, " ("), ")")
		}
		return what, fenced(block, "diff")
	}
	switch f.Kind {
	case object.FieldOverwrites:
		return fmt.Sprintf("- %s %s: Git %s → %s; live %s%s is replaced", kindLabel[f.Kind], code(f.Path), v(f.Base), v(f.Desired), v(f.Live), by), ""
	case object.FieldCodifies:
		return fmt.Sprintf("- %s %s: Git %s → %s, the live value%s", kindLabel[f.Kind], code(f.Path), v(f.Base), v(f.Desired), by), ""
	case object.FieldDrift:
		return fmt.Sprintf("- %s %s: a sync after merging sets it from live %s%s back to Git's %s; this pull request does not change it", kindLabel[f.Kind], code(f.Path), v(f.Live), by, v(f.Desired)), ""
	case object.FieldPR:
		line := fmt.Sprintf("- %s %s: Git %s → %s", kindLabel[f.Kind], code(f.Path), v(f.Base), v(f.Desired))
		if !reflect.DeepEqual(f.Live, f.Base) {
			// Git did not hold the live value (an object new in Git that
			// exists live): it is replaced too.
			line += fmt.Sprintf("; live %s%s", v(f.Live), by)
		}
		return line, ""
	}
	return fmt.Sprintf("- %s: %s → %s%s", code(f.Path), v(f.Live), v(f.Desired), by), ""
}

func refString(c drift.Change) string {
	if c.Namespace == "" {
		return c.Kind + "/" + c.Name
	}
	return c.Kind + "/" + c.Namespace + "/" + c.Name
}

// valueText shows a value compactly: scalars as they are, structures as JSON.
func valueText(f object.Field, v any) string {
	if f.Hidden && v != nil {
		return "(value hidden)"
	}
	switch x := v.(type) {
	case nil:
		return "(absent)"
	case string:
		b, _ := json.Marshal(x)
		return string(b)
	case map[string]any, []any:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	default:
		return fmt.Sprint(x)
	}
}

// pack joins blocks into parts of at most limit characters, breaking only
// between blocks. A block larger than a part on its own is cut at a line
// boundary and closed properly.
func pack(blocks []string, limit int) []string {
	const partHeader = "_(part %d of %d)_\n\n"
	room := limit - len(fmt.Sprintf(partHeader, 99, 99))
	var parts []string
	var cur strings.Builder
	for _, blk := range blocks {
		for _, piece := range splitBlock(blk, room) {
			if cur.Len() > 0 && cur.Len()+len(piece)+1 > room {
				parts = append(parts, cur.String())
				cur.Reset()
			}
			if cur.Len() > 0 {
				cur.WriteString("\n")
			}
			cur.WriteString(piece)
		}
	}
	if cur.Len() > 0 || len(parts) == 0 {
		parts = append(parts, cur.String())
	}
	if len(parts) > 1 {
		for i := range parts {
			parts[i] = fmt.Sprintf(partHeader, i+1, len(parts)) + parts[i]
		}
	}
	return parts
}

// splitBlock returns blk, or for a block over room, its head cut at a line
// with a note of what was left out, still a closed details block.
func splitBlock(blk string, room int) []string {
	if len(blk) <= room {
		return []string{blk}
	}
	lines := strings.Split(blk, "\n")
	var b strings.Builder
	const note = "\n_(this is too long for a comment; the rest is left out)_\n"
	const closer = "\n</details>\n"
	// A line longer than this is cut, and what follows it kept: a single
	// huge value or name never takes the lines after it along.
	longest := room / 4
	fence := ""
	depth := 0 // details blocks open, outside fences
	cut := false
	for _, l := range lines {
		if len(l) > longest {
			l = cutLine(l, longest)
		}
		if b.Len()+len(l)+len(note)+len(closer)*(depth+1)+len(fence)+2 > room {
			cut = true
			break
		}
		// Fences are ours (fenced): an opener starts with three or more
		// backticks outside a block; inside, only that fence closes it,
		// and no content line can equal it. Outside fences, text is
		// escaped, so a line opening or closing details is ours too.
		switch {
		case fence == "" && strings.HasPrefix(l, "```"):
			fence = l[:len(l)-len(strings.TrimLeft(l, "`"))]
		case fence != "" && l == fence:
			fence = ""
		case fence == "" && strings.HasPrefix(l, "<details>"):
			depth++
		case fence == "" && l == "</details>":
			depth--
		}
		b.WriteString(l + "\n")
	}
	if fence != "" {
		b.WriteString(fence + "\n")
	}
	if cut {
		b.WriteString(note)
	}
	for ; depth > 0; depth-- {
		b.WriteString(closer)
	}
	return []string{b.String()}
}

// cutLine shortens a line to about n bytes: at a character boundary, never
// inside an HTML entity or tag, with the code span and summary it opened
// closed again, and a note that it was cut.
func cutLine(l string, n int) string {
	const mark = " …(cut: too long for a comment)"
	s := l[:max(0, min(len(l), n-len(mark)-len("</code></summary>")))]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	if i := strings.LastIndexByte(s, '&'); i >= 0 && !strings.Contains(s[i:], ";") {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '<'); i >= 0 && !strings.Contains(s[i:], ">") {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '`'); i >= 0 && strings.Count(s, "`")%2 == 1 {
		s = s[:i] // a code span left open would swallow the mark
	}
	s += mark
	if strings.Count(s, "<code>") > strings.Count(s, "</code>") {
		s += "</code>"
	}
	if strings.HasPrefix(s, "<details><summary>") && !strings.Contains(s, "</summary>") {
		s += "</summary>"
	}
	return s
}

// Plural counts n of a noun in English: "1 overlay", "2 overlays".
func Plural(n int, noun string) string { return plural(n, noun) }

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
