package prgen

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Fingerprint identifies a drift by what it changes: the codified fields and
// their live values, the fields left for a person, the Secrets' changed keys
// and the deleted objects. The same drift seen again has the same fingerprint,
// whatever the time or the order it was found in.
func (p *Plan) Fingerprint() string {
	var lines []string
	for _, c := range p.Codified {
		lines = append(lines, "codify "+c.Object+" "+c.Path+" "+canonical(c.Value))
	}
	for _, m := range p.Manual {
		lines = append(lines, "manual "+m.Object+" "+m.Path+" "+canonical(m.Value))
	}
	for _, s := range p.Secrets {
		keys := append([]string(nil), s.Keys...)
		sort.Strings(keys)
		lines = append(lines, "secret "+s.Object+" "+strings.Join(keys, ","))
	}
	for _, d := range p.Deleted {
		lines = append(lines, "deleted "+d)
	}
	for _, f := range p.Fights {
		lines = append(lines, "fight "+f.Object+" "+f.Path+" "+f.Managers[0]+","+f.Managers[1])
	}
	for _, a := range p.Adopted {
		lines = append(lines, "adopt "+a.Object+" "+a.File)
	}
	for _, u := range p.Unmanaged {
		lines = append(lines, "unmanaged "+u.Object)
	}
	sort.Strings(lines)
	h := sha256.Sum256([]byte(p.Overlay + "\n" + strings.Join(lines, "\n")))
	return hex.EncodeToString(h[:8])
}

func canonical(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// fingerprintPattern matches the marker on its own line, where driftback
// writes it: the last line of the description.
var fingerprintPattern = regexp.MustCompile(`(?m)^<!-- driftback:drift fingerprint=([0-9a-f]+) -->$`)

// FingerprintMarker is the hidden line a drift pull request's or issue's
// description carries, which lets driftback find its decision again on
// GitHub.
func FingerprintMarker(p *Plan) string {
	return fmt.Sprintf("<!-- driftback:drift fingerprint=%s -->", p.Fingerprint())
}

// FingerprintOf reads the fingerprint from a pull request's description:
// the last marker line, the one driftback writes at the end. A marker
// anywhere else (inside text quoted from the cluster) is not driftback's.
func FingerprintOf(body string) string {
	ms := fingerprintPattern.FindAllStringSubmatch(strings.TrimRight(body, "\n"), -1)
	if len(ms) == 0 {
		return ""
	}
	return ms[len(ms)-1][1]
}

// PullRequest is what the decision needs to know of one of driftback's drift
// pull requests for a target (found by its branch name).
type PullRequest struct {
	Number int
	Open   bool
	Merged bool
	Body   string
}

// Action is what to do with a target's drift pull request.
type Action string

// Actions.
const (
	ActionNothing Action = "nothing" // up to date, or a person already said no
	ActionOpen    Action = "open"
	ActionUpdate  Action = "update"  // new commit on the branch, new description
	ActionComment Action = "comment" // a person pushed to the branch: say, don't overwrite
	ActionClose   Action = "close"   // the drift is gone
)

// Decision is an action on a pull request, with why.
type Decision struct {
	Action Action
	// Number is the pull request acted on; 0 for ActionOpen and ActionNothing.
	Number int
	Reason string
}

// Decide chooses what to do about a target's drift given its drift pull
// requests, open and closed, as GitHub has them: GitHub is the only state, so
// a restart or a second replica decides the same. personPushed says the open
// pull request's branch has commits driftback did not make.
func Decide(p *Plan, pulls []PullRequest, personPushed bool) Decision {
	var open *PullRequest
	for i := range pulls {
		if pulls[i].Open {
			open = &pulls[i]
			break
		}
	}
	if p.Empty() {
		if open != nil {
			return Decision{Action: ActionClose, Number: open.Number, Reason: "the cluster matches Git again"}
		}
		return Decision{Action: ActionNothing, Reason: "no drift"}
	}
	fp := p.Fingerprint()
	if open != nil && FingerprintOf(open.Body) == fp {
		return Decision{Action: ActionNothing, Number: open.Number, Reason: "the pull request already proposes this drift"}
	}
	for _, pr := range pulls {
		if pr.Open || FingerprintOf(pr.Body) != fp {
			continue
		}
		reason := fmt.Sprintf("#%d with this drift was closed without merging: a person decided against it", pr.Number)
		if pr.Merged {
			// Merged, yet the drift is still there: what it could not write
			// (a Secret, a manual edit) was already put to a person.
			reason = fmt.Sprintf("#%d with this drift was merged", pr.Number)
		}
		if open != nil && FingerprintOf(open.Body) != fp {
			// The drift went back to what was already decided: the open
			// pull request proposes values the cluster no longer has.
			return Decision{Action: ActionClose, Number: open.Number, Reason: "the drift went back to what " + reason[:strings.Index(reason, " with")] + " settled"}
		}
		return Decision{Action: ActionNothing, Number: pr.Number, Reason: reason}
	}
	switch {
	case open == nil:
		return Decision{Action: ActionOpen, Reason: "new drift"}
	case personPushed:
		return Decision{Action: ActionComment, Number: open.Number, Reason: "the drift changed, but a person pushed to the branch: it is theirs now"}
	}
	return Decision{Action: ActionUpdate, Number: open.Number, Reason: "the drift changed"}
}
