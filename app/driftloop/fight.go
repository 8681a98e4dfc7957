package driftloop

import (
	"context"
	"reflect"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/prgen"
)

// fieldWatch is a field the drift loop saw in drift, and the hands it went
// through since: a person's change that stays has one; two writers that
// fight leave it going back and forth.
type fieldWatch struct {
	ref   object.Ref
	field object.Field
	hands []hand
	// since is when the field was first seen in drift.
	since time.Time
}

// hiddenValue stands for the value of a field whose values are never shown.
const hiddenValue = "(hidden)"

type hand struct {
	manager string
	value   any
	at      time.Time
}

// followFields records who holds each field now: the fields in drift as the
// comparison attributes them, and those seen in drift before as the live
// objects say (the reconciler took them back, or someone else did). It
// returns the fields in a fight, by change key, and their reports.
func (d *DriftLoop) followFields(ctx context.Context, w *livestate.Watcher, st *targetState, t targets.Target, changes []drift.Change, now time.Time) (map[string]bool, []prgen.Fight) {
	if st.fields == nil {
		st.fields = map[string]*fieldWatch{}
	}
	window := t.Policy.FightWindow
	// The live objects say when each writer last wrote: a change of hands
	// between two looks is read from them, however seldom the loop looks.
	var refs []object.Ref
	seen := map[string]bool{}
	for _, ch := range changes {
		if k := ch.Ref().Key(); ch.Action == drift.ActionUpdate && !seen[k] {
			seen[k] = true
			refs = append(refs, ch.Ref())
		}
	}
	for _, fw := range st.fields {
		if k := fw.ref.Key(); !seen[k] {
			seen[k] = true
			refs = append(refs, fw.ref)
		}
	}
	var live map[string]*unstructured.Unstructured
	if len(refs) > 0 {
		// A failed read observes what the comparison says: the next check
		// reads the rest.
		live, _ = w.Get(ctx, refs)
	}
	current := map[string]bool{}
	for _, ch := range changes {
		if ch.Action != drift.ActionUpdate {
			continue
		}
		for _, f := range ch.Fields {
			if f.Manager == "" {
				continue
			}
			k := ch.Ref().Key() + " " + f.Path
			current[k] = true
			fw := st.fields[k]
			if fw == nil {
				fw = &fieldWatch{ref: ch.Ref(), field: f, since: now}
				st.fields[k] = fw
			}
			fw.observeDrift(f, live[ch.Ref().Key()], now, window)
		}
	}
	for k, fw := range st.fields {
		if current[k] {
			continue
		}
		if o := live[fw.ref.Key()]; o != nil {
			held := object.Attribute(o, fw.field)
			value := held.Live
			if fw.field.Hidden || (fw.ref.Group == "" && fw.ref.Kind == "Secret") {
				// Read from the live object, not the hidden comparison:
				// who holds it counts, its value is never kept.
				value = hiddenValue
			}
			fw.observe(held.Manager, value, writtenAt(held.Time, now), window)
		}
		// Settled: nothing changed hands within the window.
		if last := fw.hands[len(fw.hands)-1]; now.Sub(last.at) > window {
			delete(st.fields, k)
		}
	}
	fighting := map[string]bool{}
	var out []prgen.Fight
	for k, fw := range st.fields {
		if f, ok := fw.fight(window); ok {
			fighting[k] = true
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Object != out[j].Object {
			return out[i].Object < out[j].Object
		}
		return out[i].Path < out[j].Path
	})
	return fighting, out
}

// observeDrift adds a look at the field in drift, f, on the live object o
// (nil when it could not be read): the hand that holds it, when it wrote
// it, and before that the applier's, when o records that it wrote between
// the last hand seen and this one (it took the field back, and lost it
// again, between two looks).
func (fw *fieldWatch) observeDrift(f object.Field, o *unstructured.Unstructured, now time.Time, window time.Duration) {
	at := writtenAt(f.Time, now)
	if applier, took := applierWrote(o); applier != "" && applier != f.Manager && len(fw.hands) > 0 {
		// Strictly after the last hand: the object records seconds, and a
		// write in the same second as the last hand is not known to be after.
		if last := fw.hands[len(fw.hands)-1]; last.manager == f.Manager && took.After(last.at) && !took.After(at) {
			fw.observe(applier, f.Desired, took, window)
		}
	}
	fw.observe(f.Manager, f.Live, at, window)
}

// writtenAt is when a field's holder last wrote it, as the object records
// it; now when it does not.
func writtenAt(t *time.Time, now time.Time) time.Time {
	if t == nil || t.IsZero() {
		return now
	}
	return *t
}

// applierWrote names the GitOps applier among o's writers that applies
// server-side (each of its applies takes every field it sets back, with
// force: Flux's controllers) and when it last wrote o: "" when none is.
// A client-side apply (Argo CD's default) patches only what Git changed,
// so its writes say nothing of a field it did not change.
func applierWrote(o *unstructured.Unstructured) (string, time.Time) {
	if o == nil {
		return "", time.Time{}
	}
	var name string
	var at time.Time
	for _, e := range o.GetManagedFields() {
		if e.Subresource != "" || e.Time == nil || e.Operation != metav1.ManagedFieldsOperationApply || !isApplier(e.Manager) {
			continue
		}
		if e.Time.After(at) {
			name, at = e.Manager, e.Time.Time
		}
	}
	return name, at
}

// observe adds a change of hands or of value; hands older than the window
// go, the latest always stays.
func (fw *fieldWatch) observe(manager string, value any, at time.Time, window time.Duration) {
	if manager == "" {
		return
	}
	if n := len(fw.hands); n == 0 || fw.hands[n-1].manager != manager || !reflect.DeepEqual(fw.hands[n-1].value, value) {
		fw.hands = append(fw.hands, hand{manager: manager, value: value, at: at})
	}
	keep := 0
	for keep < len(fw.hands)-1 && at.Sub(fw.hands[keep].at) > window {
		keep++
	}
	fw.hands = fw.hands[keep:]
}

// fight: within the window the field changed hands at least three times,
// between the same two managers only.
func (fw *fieldWatch) fight(window time.Duration) (prgen.Fight, bool) {
	managers := map[string]bool{}
	last := map[string]any{}
	changes := 0
	for i, h := range fw.hands {
		managers[h.manager] = true
		last[h.manager] = h.value
		if i > 0 && fw.hands[i-1].manager != h.manager {
			changes++
		}
	}
	if len(managers) != 2 || changes < 3 {
		return prgen.Fight{}, false
	}
	var pair []string
	for m := range managers {
		pair = append(pair, m)
	}
	sort.Slice(pair, func(i, j int) bool {
		ai, aj := isApplier(pair[i]), isApplier(pair[j])
		if ai != aj {
			return ai
		}
		return pair[i] < pair[j]
	})
	return prgen.Fight{Object: fw.ref.String(), Path: fw.field.Path, Managers: [2]string{pair[0], pair[1]}, Since: fw.since,
		Changes: changes, Window: window, Last: last}, true
}

func isApplier(m string) bool {
	for _, a := range drift.KnownAppliers {
		if a == m {
			return true
		}
	}
	return false
}

// fightKey identifies the fights of a check, for deciding whether to
// publish again.
func fightKey(fs []prgen.Fight) string {
	var b []byte
	for _, f := range fs {
		b = append(b, f.Object+" "+f.Path+" "+f.Managers[0]+","+f.Managers[1]+"\n"...)
	}
	return string(b)
}

// withoutFights drops the fields in a fight from the live changes: they are
// never proposed.
func withoutFights(changes []drift.Change, fighting map[string]bool) []drift.Change {
	if len(fighting) == 0 {
		return changes
	}
	var out []drift.Change
	for _, ch := range changes {
		var fields []object.Field
		for _, f := range ch.Fields {
			if !fighting[ch.Ref().Key()+" "+f.Path] {
				fields = append(fields, f)
			}
		}
		if len(fields) == 0 && ch.Action == drift.ActionUpdate {
			continue
		}
		ch.Fields = fields
		out = append(out, ch)
	}
	return out
}
