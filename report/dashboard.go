package report

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/driftback/driftback/report/valuediff"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The drift dashboard is one issue per repository that shows what differs
// from Git now, per target. Each target's part is a block between two
// hidden markers, written by the replica that watches the target's
// cluster; a replica rewrites its own clusters' blocks and keeps the others
// as they are, so several replicas share one issue. Checkboxes carry a
// hidden marker that names what ticking them asks for.

// DashboardTitle is the drift dashboard issue's title.
const DashboardTitle = "driftback: drift dashboard"

// DashboardMarker is the hidden line that identifies the dashboard issue.
const DashboardMarker = "<!-- driftback:drift-dashboard -->"

// MaxIssueBody is GitHub's limit on an issue's body, in characters.
const MaxIssueBody = 65536

// dashboardBudget is what the dashboard may use of MaxIssueBody: bytes
// count at least as many as characters, and a margin is kept for the header.
const dashboardBudget = 60000

// maxRows is how many changes of one target are listed in full.
const maxRows = 20

// ChangeState is where a live change stands.
type ChangeState string

// The states of a live change.
const (
	// StateWaiting: it must stay for the quiet period (Until) before it is
	// proposed.
	StateWaiting ChangeState = "waiting"
	// StateProposed: the target's drift pull request (Number) proposes it.
	StateProposed ChangeState = "proposed"
	// StateListed: the drift pull request (Number) lists it for a person
	// (a Secret, a deletion, a field no strategy can write: Why).
	StateListed ChangeState = "listed"
	// StateReported: the target's policy is codify: report.
	StateReported ChangeState = "reported"
	// StateCannot: it cannot be written back (Why).
	StateCannot ChangeState = "cannot"
	// StateAutoscaled: an autoscaler owns the field (Why).
	StateAutoscaled ChangeState = "autoscaled"
	// StateFight: two writers keep changing the field back and forth (Why).
	StateFight ChangeState = "fight"
	// StateDeclined: a person closed the pull request (Number) that
	// proposed it.
	StateDeclined ChangeState = "declined"
)

// DashboardChange is one live change of a target: a field, or a whole
// object created or deleted live.
type DashboardChange struct {
	// ID names the change and its live value across checks: the same
	// change seen again has the same ID.
	ID     string
	Object string
	// Field is the field's path; "" for a whole object.
	Field string
	// Git and Live are the values as shown, already hidden where they
	// must be; "" for absent.
	Git, Live string
	// By is the field manager that made the change, At when.
	By string
	At *time.Time
	// Since is when driftback first saw the change with this value.
	Since time.Time
	State ChangeState
	// Until is when a waiting change will have stayed its quiet period.
	Until time.Time
	// Number is the drift pull request that proposes, lists or declined it.
	Number int
	// Why says why it cannot be written back, who owns it or who fights.
	Why string
	// Asked says a person ticked "propose now" and it is being acted on.
	Asked bool
}

// DashboardDeclined is a drift pull request a person closed without merging,
// whose drift is still live.
type DashboardDeclined struct {
	Number int
	// Asked says a person ticked "propose again" and it is being acted on.
	Asked bool
}

// DashboardTarget is one target's part of the dashboard, or one source
// driftback does not compare.
type DashboardTarget struct {
	// Key is unique among the repository's targets: the target's drift key.
	Key     string
	Name    string
	Cluster string
	Path    string
	// NotCompared says why the target is not compared now (suspended,
	// not rendered, its render or cluster read failed); the rest is then
	// empty.
	NotCompared string
	Changes     []DashboardChange
	Declined    []DashboardDeclined
	// Open is the target's open drift pull request, 0 for none.
	Open int
	// Source says this is a reconciler's source driftback does not render,
	// not a target: there is nothing to check again.
	Source bool
	// Checked is when the target was last compared; zero for unknown.
	Checked time.Time
	// Fate says what its reconciler does with live changes if nobody acts;
	// empty when unknown.
	Fate string
	// Reconciler, when set, says the target's reconciler fails or has
	// stalled: the cluster differs from Git because Git is not applied, so
	// the target is not compared and nothing is proposed.
	Reconciler *DashboardReconciler
}

// DashboardReconciler is a reconciler that is not applying Git.
type DashboardReconciler struct {
	// State is "failing" (it says so) or "stalled" (it is silent).
	State string
	// Why is in the reconciler's own words, or what was seen.
	Why string
	// Since is when it began; zero when unknown.
	Since time.Time
}

// checkedText says when a target was last compared: " · checked 2026-12-05
// 14:02 UTC", or "" when unknown.
func checkedText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return " · checked " + t.UTC().Format("2006-01-02 15:04 UTC")
}

// checkedTimes finds the check times in a dashboard's body.
var checkedTimes = regexp.MustCompile(` · checked \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC`)

// DashboardSameButChecked says whether two bodies differ only in when
// their targets were checked: the issue need not be edited for that at
// every check.
func DashboardSameButChecked(a, b string) bool {
	return checkedTimes.ReplaceAllString(a, "") == checkedTimes.ReplaceAllString(b, "")
}

// differs says the target has something to show besides a clean check.
func (t *DashboardTarget) differs() bool {
	return len(t.Changes) > 0 || len(t.Declined) > 0 || t.Open != 0
}

// Tick kinds: what a checkbox asks for.
const (
	TickProposeNow   = "propose-now"
	TickProposeAgain = "propose-again"
	TickCheck        = "check"
)

// Tick is one checkbox of the dashboard.
type Tick struct {
	Kind   string
	Target string
	// Item is the change's ID (propose-now) or the pull request's number
	// (propose-again); "" for a target's check.
	Item    string
	Checked bool
}

// Key names what the box asks for, whoever ticks it.
func (t Tick) Key() string { return t.Kind + " " + t.Target + " " + t.Item }

func tickMarker(kind, target, item string) string {
	if item != "" {
		return fmt.Sprintf("<!-- driftback:tick %s target=%s item=%s -->", kind, target, markerValue(item))
	}
	return fmt.Sprintf("<!-- driftback:tick %s target=%s -->", kind, target)
}

// tickLine matches a checkbox driftback wrote: the marker ends the line.
// Text from Git or the cluster never holds "<!--" (noMarker), so only
// driftback, or a person who can edit the issue, writes one.
var tickLine = regexp.MustCompile(`^\s*[-*] \[([ xX])\] .*<!-- driftback:tick (propose-now|propose-again|check) target=([A-Za-z0-9._/-]+)(?: item=([A-Za-z0-9._/-]+))? -->\s*$`)

// DashboardTicks reads the checkboxes of a dashboard's body.
func DashboardTicks(body string) []Tick {
	var out []Tick
	for _, l := range strings.Split(body, "\n") {
		m := tickLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		out = append(out, Tick{Kind: m[2], Target: m[3], Item: m[4], Checked: m[1] != " "})
	}
	return out
}

// NewlyTicked are the boxes ticked in after that were not ticked in before:
// what an edit of the dashboard asks for.
func NewlyTicked(before, after string) []Tick {
	was := map[string]bool{}
	for _, t := range DashboardTicks(before) {
		if t.Checked {
			was[t.Key()] = true
		}
	}
	var out []Tick
	seen := map[string]bool{}
	for _, t := range DashboardTicks(after) {
		if t.Checked && !was[t.Key()] && !seen[t.Key()] {
			seen[t.Key()] = true
			out = append(out, t)
		}
	}
	return out
}

// Untick clears the given boxes in body (a person without write permission
// ticked them).
func Untick(body string, ticks []Tick) string {
	clear := map[string]bool{}
	for _, t := range ticks {
		clear[t.Key()] = true
	}
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		m := tickLine.FindStringSubmatchIndex(l)
		if m == nil {
			continue
		}
		t := Tick{Kind: l[m[4]:m[5]], Target: l[m[6]:m[7]]}
		if m[8] >= 0 {
			t.Item = l[m[8]:m[9]]
		}
		if clear[t.Key()] {
			lines[i] = l[:m[2]] + " " + l[m[3]:]
		}
	}
	return strings.Join(lines, "\n")
}

// markerValue is s if it can stand in a marker as it is, or a hash of it.
func markerValue(s string) string {
	if markerSafe.MatchString(s) {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return "h-" + hex.EncodeToString(h[:8])
}

var markerSafe = regexp.MustCompile(`^[A-Za-z0-9._/-]{1,200}$`)

// DashboardKey is the key a dashboard block of a target, or of a source,
// is found by: name made safe for a marker.
func DashboardKey(name string) string { return markerValue(name) }

// blockBegin and blockEnd frame one part of a target. counts are its
// numbers for the summary: changes, waiting, proposed, declined.
var (
	blockBegin = regexp.MustCompile(`^<!-- driftback:dashboard-target key=([A-Za-z0-9._/-]+) cluster=([A-Za-z0-9._/-]+) group=(stalled|differs|declined|open|notcompared|clean) counts=(\d+),(\d+),(\d+),(\d+) -->$`)
	blockEnd   = regexp.MustCompile(`^<!-- driftback:dashboard-end -->$`)
)

// The groups of the dashboard, in the order it shows them.
const (
	groupStalled     = "stalled"
	groupDiffers     = "differs"
	groupDeclined    = "declined"
	groupOpen        = "open"
	groupNotCompared = "notcompared"
	groupClean       = "clean"
)

// dashboardBlock is one part of a target as it stands in the body.
type dashboardBlock struct {
	key, cluster, group string
	// changes, waiting, proposed and declined are the target's counts.
	changes, waiting, proposed, declined int
	text                                 string
}

func (b dashboardBlock) String() string {
	return fmt.Sprintf("<!-- driftback:dashboard-target key=%s cluster=%s group=%s counts=%d,%d,%d,%d -->\n%s<!-- driftback:dashboard-end -->\n",
		b.key, b.cluster, b.group, b.changes, b.waiting, b.proposed, b.declined, b.text)
}

// parseBlocks reads the targets' parts of a dashboard's body.
func parseBlocks(body string) []dashboardBlock {
	var out []dashboardBlock
	var cur *dashboardBlock
	var text strings.Builder
	for _, l := range strings.Split(body, "\n") {
		if m := blockBegin.FindStringSubmatch(l); m != nil {
			cur = &dashboardBlock{key: m[1], cluster: m[2], group: m[3]}
			cur.changes, _ = strconv.Atoi(m[4])
			cur.waiting, _ = strconv.Atoi(m[5])
			cur.proposed, _ = strconv.Atoi(m[6])
			cur.declined, _ = strconv.Atoi(m[7])
			text.Reset()
			continue
		}
		if cur == nil {
			continue
		}
		if blockEnd.MatchString(l) {
			cur.text = text.String()
			out = append(out, *cur)
			cur = nil
			continue
		}
		text.WriteString(l + "\n")
	}
	return out
}

// detail is how much of a target's changes its block shows.
type detail int

const (
	detailFull  detail = iota // every change, up to maxRows
	detailShort               // the first five changes
	detailLine                // one line of counts
)

// blocks renders a target's parts: its changes, its declined pull
// requests, its open one; or why it is not compared; or, when it matches
// Git, an empty part that counts it.
func (t *DashboardTarget) blocks(d detail) []dashboardBlock {
	b := dashboardBlock{key: markerValue(t.Key), cluster: markerValue(t.Cluster), changes: len(t.Changes), declined: len(t.Declined)}
	for _, c := range t.Changes {
		switch c.State {
		case StateWaiting:
			b.waiting++
		case StateProposed, StateListed:
			b.proposed++
		}
	}
	where := fmt.Sprintf("%s · cluster %s · %s", text(t.Name), text(t.Cluster), code(t.Path))
	// A check asked for is done by the check that writes this part: its
	// box is shown unticked again.
	check := checkbox(false, "check again now", tickMarker(TickCheck, b.key, ""))
	if r := t.Reconciler; r != nil {
		b.group = groupStalled
		since := ""
		if !r.Since.IsZero() {
			since = " since " + r.Since.UTC().Format("2006-01-02 15:04 UTC")
		}
		b.text = fmt.Sprintf("- **%s**: its reconciler is **%s**%s: %s%s\n  %s\n", where, text(r.State), since, text(valuediff.Cut(r.Why)), checkedText(t.Checked), check)
		return []dashboardBlock{b}
	}
	if t.NotCompared != "" {
		b.group = groupNotCompared
		b.text = fmt.Sprintf("- **%s**: %s%s\n", where, text(t.NotCompared), checkedText(t.Checked))
		if !t.Source {
			b.text += "  " + check + "\n"
		}
		return []dashboardBlock{b}
	}
	if !t.differs() {
		b.group = groupClean
		return []dashboardBlock{b}
	}
	var out []dashboardBlock
	part := func(group, text string) {
		p := dashboardBlock{key: b.key, cluster: b.cluster, group: group, text: text}
		if group == groupDiffers {
			p.changes, p.waiting, p.proposed, p.declined = b.changes, b.waiting, b.proposed, b.declined
		}
		out = append(out, p)
	}
	var s strings.Builder
	switch {
	case len(t.Changes) == 0:
	case d == detailLine:
		fmt.Fprintf(&s, "- %s: %s%s\n", where, changeCounts(b), checkedText(t.Checked))
	default:
		rows := maxRows
		if d == detailShort {
			rows = 5
		}
		fmt.Fprintf(&s, "<details><summary>%s · cluster %s · %s: %s%s</summary>\n\n", html(t.Name), html(t.Cluster), htmlCode(t.Path), changeCounts(b), checkedText(t.Checked))
		s.WriteString("| State | Object | Field | Git | Live | Changed |\n|---|---|---|---|---|---|\n")
		var boxes []string
		for i, c := range t.Changes {
			if i == rows {
				break
			}
			fmt.Fprintf(&s, "| %s | %s | %s | %s | %s | %s |\n", stateCell(c), textCell(c.Object), fieldCell(c.Field), valueCell(c.Git), valueCell(c.Live),
				changedCell(c))
			if c.State == StateWaiting {
				boxes = append(boxes, checkbox(c.Asked, "propose now: "+text(c.Object)+" "+code(orWhole(c.Field)), tickMarker(TickProposeNow, b.key, c.ID)))
			}
		}
		if len(t.Changes) > rows {
			fmt.Fprintf(&s, "\n… and %d more changes; the drift pull request and the logs list them all.\n", len(t.Changes)-rows)
		}
		if t.Fate != "" {
			s.WriteString("\n" + text(t.Fate) + "\n")
		}
		s.WriteString("\n" + strings.Join(append(boxes, check), "\n") + "\n\n</details>\n")
	}
	if s.Len() > 0 {
		part(groupDiffers, s.String())
	} else {
		// Nothing live differs, but a pull request stands: counted, and
		// the target can still be checked again.
		part(groupDiffers, fmt.Sprintf("- %s: no live change now%s\n  %s\n", where, checkedText(t.Checked), check))
	}
	for _, dcl := range t.Declined {
		part(groupDeclined, fmt.Sprintf("- %s: #%d was closed without merging, and its drift is still live\n  %s\n", where, dcl.Number,
			checkbox(dcl.Asked, "propose it again", tickMarker(TickProposeAgain, b.key, strconv.Itoa(dcl.Number)))))
	}
	if t.Open != 0 {
		part(groupOpen, fmt.Sprintf("- #%d: %s\n", t.Open, where))
	}
	return out
}

func orWhole(field string) string {
	if field == "" {
		return "(whole object)"
	}
	return field
}

func checkbox(checked bool, label, marker string) string {
	box := "[ ]"
	if checked {
		box = "[x]"
		label += " (asked; driftback is on it)"
	}
	return "- " + box + " " + label + " " + marker
}

func changeCounts(b dashboardBlock) string {
	parts := []string{plural(b.changes, "change")}
	if b.waiting > 0 {
		parts = append(parts, fmt.Sprintf("%d waiting", b.waiting))
	}
	if b.proposed > 0 {
		parts = append(parts, fmt.Sprintf("%d proposed", b.proposed))
	}
	if b.declined > 0 {
		parts = append(parts, fmt.Sprintf("%d declined", b.declined))
	}
	return strings.Join(parts, ", ")
}

func fieldCell(f string) string {
	if f == "" {
		return "(whole object)"
	}
	return cell(f)
}

// valueCell shows a value in a table cell, cut; a multi-line value keeps
// its first lines, one under the other.
func valueCell(v string) string {
	if v == "" {
		return "(absent)"
	}
	if !strings.Contains(strings.TrimSuffix(v, "\n"), "\n") {
		return cell(truncateRunes(v, 80))
	}
	return codeLines(firstLines(v, 4, 80))
}

// firstLines keeps a multi-line value's first n lines, each cut at width
// characters, saying how many more there are.
func firstLines(v string, n, width int) string {
	lines := strings.Split(strings.TrimSuffix(v, "\n"), "\n")
	var out []string
	for _, l := range lines[:min(len(lines), n)] {
		out = append(out, truncateRunes(l, width))
	}
	if len(lines) > n {
		out = append(out, fmt.Sprintf("… %d more lines", len(lines)-n))
	}
	return strings.Join(out, "\n")
}

// changedCell says who made a change and when, one time: the manager's
// last write when it is not later than driftback first saw the value (the
// write that made it), else when driftback first saw it (the manager wrote
// again since, maybe another field).
func changedCell(c DashboardChange) string {
	when := c.Since
	if c.At != nil && !c.At.IsZero() && c.At.Before(when) {
		when = *c.At
	}
	by := "(unknown)"
	if c.By != "" {
		by = textCell(c.By)
	}
	return by + ", " + when.UTC().Format("2006-01-02 15:04 UTC")
}

func stateCell(c DashboardChange) string {
	switch c.State {
	case StateWaiting:
		return "waiting until " + c.Until.UTC().Format("15:04 UTC")
	case StateProposed:
		return fmt.Sprintf("proposed in #%d", c.Number)
	case StateListed:
		return fmt.Sprintf("listed in #%d: ", c.Number) + textCell(c.Why)
	case StateReported:
		return "reported (codify: report)"
	case StateCannot:
		return "cannot be written back: " + textCell(c.Why)
	case StateAutoscaled:
		return "owned by an autoscaler: " + textCell(c.Why)
	case StateFight:
		return "fought over: " + textCell(c.Why)
	case StateDeclined:
		return fmt.Sprintf("declined in #%d", c.Number)
	}
	return textCell(string(c.State))
}

// Dashboard is the dashboard's body: the blocks of cluster's targets
// replaced by targets, the other clusters' blocks kept from body as they
// are, except those of clusters not in keep (gone from app.yml). The
// largest targets are shown in less detail until the body fits GitHub's
// limit. shows says the body has anything to show: a target that differs
// or one not compared.
func Dashboard(body, cluster string, targets []DashboardTarget, keep map[string]bool) (out string, shows bool) {
	c := markerValue(cluster)
	var others []dashboardBlock
	for _, b := range parseBlocks(body) {
		if b.cluster != c && keep[b.cluster] {
			others = append(others, b)
		}
	}
	ts := append([]DashboardTarget(nil), targets...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Key < ts[j].Key })
	levels := make([]detail, len(ts))
	sizes := make([]int, len(ts))
	total := size(others)
	for i := range ts {
		sizes[i] = size(ts[i].blocks(levels[i]))
		total += sizes[i]
	}
	for total > dashboardBudget {
		// Show the largest of this cluster's targets in less detail.
		i := -1
		for j := range ts {
			if levels[j] < detailLine && (i < 0 || sizes[j] > sizes[i]) {
				i = j
			}
		}
		if i < 0 {
			break
		}
		levels[i]++
		n := size(ts[i].blocks(levels[i]))
		total += n - sizes[i]
		sizes[i] = n
	}
	blocks := others
	for i := range ts {
		blocks = append(blocks, ts[i].blocks(levels[i])...)
	}
	if total > dashboardBudget {
		// Even one line per target is too much: the rest are counted.
		blocks = fit(blocks, c)
	}
	return compose(blocks)
}

// headerSize is what the dashboard's text around the blocks takes at most.
const headerSize = 2000

func size(blocks []dashboardBlock) int {
	n := 0
	for _, b := range blocks {
		n += len(b.String())
	}
	return n
}

// fit drops the cluster's blocks beyond the budget, counting them in one
// line.
func fit(blocks []dashboardBlock, cluster string) []dashboardBlock {
	var out []dashboardBlock
	n := headerSize + 500
	dropped, changes := 0, 0
	for _, b := range blocks {
		if b.cluster == cluster && n+len(b.String()) > dashboardBudget {
			if b.group != groupClean {
				dropped++
				changes += b.changes
			}
			continue
		}
		n += len(b.String())
		out = append(out, b)
	}
	if dropped > 0 {
		out = append(out, dashboardBlock{key: "more", cluster: cluster, group: groupDiffers, changes: changes,
			text: fmt.Sprintf("- … and %d more parts on cluster %s (%s): too many to list here; `driftback targets` and the logs list them.\n", dropped, text(cluster), plural(changes, "change"))})
	}
	return out
}

// compose writes the body around the blocks, by group.
func compose(blocks []dashboardBlock) (string, bool) {
	sort.SliceStable(blocks, func(i, j int) bool {
		if blocks[i].cluster != blocks[j].cluster {
			return blocks[i].cluster < blocks[j].cluster
		}
		return blocks[i].key < blocks[j].key
	})
	by := map[string][]dashboardBlock{}
	total := dashboardBlock{}
	for _, b := range blocks {
		by[b.group] = append(by[b.group], b)
		total.changes += b.changes
		total.waiting += b.waiting
		total.proposed += b.proposed
		total.declined += b.declined
	}
	var s strings.Builder
	s.WriteString("What differs in the cluster from Git now, per target. driftback keeps this issue current. " +
		"Tick a box to act (people with write permission on the repository); close the issue to stop its updates.\n\n")
	if n := len(by[groupStalled]); n > 0 {
		if n == 1 {
			s.WriteString("**1 target's reconciler is not applying Git.** ")
		} else {
			fmt.Fprintf(&s, "**%d targets' reconcilers are not applying Git.** ", n)
		}
	}
	differ := len(by[groupDiffers])
	if differ == 0 {
		s.WriteString("**Every compared target matches Git.**")
	} else {
		verb := " differ"
		if differ == 1 {
			verb = " differs"
		}
		fmt.Fprintf(&s, "**%s%s from Git**: %s.", plural(differ, "target"), verb, changeCounts(total))
	}
	match := " match"
	if len(by[groupClean]) == 1 {
		match = " matches"
	}
	fmt.Fprintf(&s, " %s not compared; %s%s Git.\n\n", plural(len(by[groupNotCompared]), "target"), plural(len(by[groupClean]), "target"), match)
	for _, g := range []struct{ group, title, says string }{
		{groupStalled, "Reconciler not applying Git", "These targets' reconcilers fail or have stopped: the cluster differs from Git because Git is not applied, " +
			"so nothing of them is proposed as drift. Fix the reconciler; every check looks again, and **check again now** looks at once."},
		{groupDiffers, "Differs from Git now", "Each live change waits its quiet period, then its target's drift pull request proposes it. " +
			"Tick **propose now** to propose a waiting change at once, **check again now** to compare a target with Git at once."},
		{groupDeclined, "Declined", "A drift pull request closed without merging is not proposed again on its own. " +
			"Tick **propose it again** to open a new one for the drift still live."},
		{groupOpen, "Open drift pull requests", "Merging one writes its live changes into Git; closing it declines them."},
		{groupNotCompared, "Not compared", "Nothing is known of these targets' drift until the cause is fixed; then tick **check again now**."},
	} {
		if len(by[g.group]) == 0 {
			continue
		}
		s.WriteString("## " + g.title + "\n\n" + g.says + "\n\n")
		for _, b := range by[g.group] {
			s.WriteString(b.String())
		}
		s.WriteString("\n")
	}
	for _, b := range by[groupClean] {
		s.WriteString(b.String())
	}
	s.WriteString(DashboardMarker + "\n")
	return s.String(), differ > 0 || len(by[groupNotCompared]) > 0 || len(by[groupStalled]) > 0
}

// A request is how driftback records, in a comment of its own on the
// dashboard, a box ticked by a person with write permission: a comment only
// driftback can write, so no edit of the issue's body can forge one.
var requestMarker = regexp.MustCompile(`(?m)^<!-- driftback:dashboard-request (propose-now|propose-again|check) target=([A-Za-z0-9._/-]+)(?: item=([A-Za-z0-9._/-]+))? by=([A-Za-z0-9._/\[\]-]+) edit=([A-Za-z0-9._:-]+) -->$`)

// DashboardRequest is the comment that records a tick: who asked for what;
// edit names the edit of the issue the tick came with, so the same edit
// delivered again finds its comment there.
func DashboardRequest(t Tick, by, edit string) (body, marker string) {
	item := ""
	if t.Item != "" {
		item = " item=" + markerValue(t.Item)
	}
	marker = fmt.Sprintf("<!-- driftback:dashboard-request %s target=%s%s by=%s edit=%s -->", t.Kind, markerValue(t.Target), item, markerValue(by), markerValue(edit))
	var what string
	switch t.Kind {
	case TickProposeNow:
		what = "propose a waiting change of target " + code(t.Target) + " now, before its quiet period ends"
	case TickProposeAgain:
		what = "propose the drift of target " + code(t.Target) + " again, which #" + strconv.Itoa(atoi(t.Item)) + " proposed before it was closed"
	default:
		what = "check target " + code(t.Target) + " again now"
	}
	return code(by) + " asked driftback to " + what + ".\n\n" + marker + "\n", marker
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// ParseDashboardRequest reads a request comment of driftback's.
func ParseDashboardRequest(body string) (t Tick, by string, ok bool) {
	m := requestMarker.FindStringSubmatch(body)
	if m == nil {
		return Tick{}, "", false
	}
	return Tick{Kind: m[1], Target: m[2], Item: m[3], Checked: true}, m[4], true
}

// DashboardRefused is the note on a tick by someone without write
// permission, whose box was unticked again.
func DashboardRefused(by, edit string) (body, marker string) {
	marker = fmt.Sprintf("<!-- driftback:dashboard-refused by=%s edit=%s -->", markerValue(by), markerValue(edit))
	return code(by) + " ticked a box of this dashboard, but acting on it needs write permission on the repository: the box was unticked again, and nothing was done.\n\n" + marker + "\n", marker
}
