package helm

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// ValueChanges says which values differ between a and b, by their dotted
// paths: "replicaCount 2 → 3, image.tag added: \"1.2\"". At most a few are
// named; long values are cut.
func ValueChanges(a, b map[string]any) string {
	before, after := map[string]string{}, map[string]string{}
	flattenValues("", a, before)
	flattenValues("", b, after)
	var keys []string
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	const most = 5
	var out []string
	changed := 0
	for _, k := range keys {
		x, inA := before[k]
		y, inB := after[k]
		var s string
		switch {
		case !inA:
			s = fmt.Sprintf("%s added: %s", k, y)
		case !inB:
			s = fmt.Sprintf("%s removed", k)
		case x != y:
			s = fmt.Sprintf("%s %s → %s", k, x, y)
		default:
			continue
		}
		if changed++; changed <= most {
			out = append(out, s)
		}
	}
	if changed > most {
		out = append(out, fmt.Sprintf("and %d more", changed-most))
	}
	return strings.Join(out, ", ")
}

// flattenValues writes v's leaves into out by dotted path, as JSON cut to
// a short length; a list is one leaf.
func flattenValues(prefix string, v map[string]any, out map[string]string) {
	for k, e := range v {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		if m, ok := e.(map[string]any); ok && len(m) > 0 {
			flattenValues(p, m, out)
			continue
		}
		b, _ := json.Marshal(e)
		s := string(b)
		if len(s) > 40 {
			s = s[:37] + "…"
		}
		out[p] = s
	}
}
