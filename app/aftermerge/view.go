package aftermerge

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/driftback/driftback/report/markdown"
	"github.com/driftback/driftback/report/valuediff"
)

// sectionMarker starts what the pull request's comment says after the merge.
const sectionMarker = "<!-- driftback:after-merge -->"

// maxSectionTargets bounds the targets the comment lists; the deployments
// have them all.
const maxSectionTargets = 50

// view is what the pull request's comment says of a merge: one row per
// target, written again when a target's state changes (not at every new
// description, which the deployment carries).
type view struct {
	mu    sync.Mutex
	rows  map[string]row // by environment
	shown map[string]string
	// writing serializes the comment's edits: each writes the rows as
	// they are when it starts, so the last edit has the latest.
	writing sync.Mutex
}

type row struct{ state, description string }

func newView() *view { return &view{rows: map[string]row{}, shown: map[string]string{}} }

// set records a target's state; changed says the comment should be written.
func (v *view) set(env, state, description string) (changed bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rows[env] = row{state, description}
	if v.shown[env] == state {
		return false
	}
	v.shown[env] = state
	return true
}

// write writes the rows as they are now with edit, one edit at a time.
func (v *view) write(edit func(section string) error) error {
	v.writing.Lock()
	defer v.writing.Unlock()
	v.mu.Lock()
	section := v.section()
	v.mu.Unlock()
	return edit(section)
}

// section renders the rows: hostile text (the reconciler's words, pods'
// messages) only through the Markdown writer.
func (v *view) section() string {
	envs := make([]string, 0, len(v.rows))
	for e := range v.rows {
		envs = append(envs, e)
	}
	sort.Strings(envs)
	var b strings.Builder
	b.WriteString("### After the merge\n\n| target | state |\n|---|---|\n")
	for i, e := range envs {
		if i == maxSectionTargets {
			fmt.Fprintf(&b, "\n… and %d more targets: their GitHub Deployments say how each went.\n", len(envs)-i)
			break
		}
		r := v.rows[e]
		word := map[string]string{"in_progress": "in progress", "success": "**live**", "failure": "**failed**"}[r.state]
		fmt.Fprintf(&b, "| %s | %s: %s |\n", markdown.Cell(e), word, markdown.TextCell(valuediff.Cut(r.description)))
	}
	return b.String()
}
