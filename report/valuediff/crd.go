package valuediff

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// A CustomResourceDefinition's versions are one atomic list, so a change
// to its schema is one field holding every version's whole schema. It is
// shown as what a reviewer asks of a CRD upgrade: which properties each
// version gains, loses or changes, by path, and whether a removal from the
// version objects are stored at drops their data.

// crdChange is one change of a CRD version.
type crdChange struct {
	version string
	// storage marks the version objects are stored at (after the change).
	storage bool
	line    string // "+ spec.timeout: string"
	// drops marks a removal from the storage version's schema.
	drops bool
}

// crdDiff compares the two versions lists of a CRD's .spec.versions; ok
// is false for another field, or lists that are not of named versions.
func crdDiff(apiVersion, kind, path string, from, to any) (changes []crdChange, reworded int, ok bool) {
	if kind != "CustomResourceDefinition" || !strings.HasPrefix(apiVersion, "apiextensions.k8s.io/") || path != ".spec.versions" {
		return nil, 0, false
	}
	a, okA := versionsByName(from)
	b, okB := versionsByName(to)
	if !okA || !okB {
		return nil, 0, false
	}
	names := map[string]bool{}
	for n := range a {
		names[n] = true
	}
	for n := range b {
		names[n] = true
	}
	order := make([]string, 0, len(names))
	for n := range names {
		order = append(order, n)
	}
	sort.Strings(order)
	for _, n := range order {
		va, inA := a[n]
		vb, inB := b[n]
		storage := inB && vb["storage"] == true
		switch {
		case !inA:
			changes = append(changes, crdChange{version: n, storage: storage, line: "+ version " + n + " (added)"})
			continue
		case !inB:
			changes = append(changes, crdChange{version: n, line: "- version " + n + " (removed: no longer served; the apiserver refuses it while the CRD's status.storedVersions lists it)", drops: va["storage"] == true})
			continue
		}
		// The version's own settings: served, storage, deprecated, ...
		keys := map[string]bool{}
		for k := range va {
			keys[k] = true
		}
		for k := range vb {
			keys[k] = true
		}
		var settings []string
		for k := range keys {
			if k != "name" && k != "schema" {
				settings = append(settings, k)
			}
		}
		sort.Strings(settings)
		for _, k := range settings {
			if !docEqual(va[k], vb[k]) {
				changes = append(changes, crdChange{version: n, storage: storage, line: "± " + k + ": " + docValueOrAbsent(va[k]) + " → " + docValueOrAbsent(vb[k])})
			}
		}
		sa, _ := nested(va, "schema", "openAPIV3Schema").(map[string]any)
		sb, _ := nested(vb, "schema", "openAPIV3Schema").(map[string]any)
		w := schemaWalk{version: n, storage: storage, dropsOnRemove: storage && va["storage"] == true}
		w.walk("", sa, sb)
		changes = append(changes, w.changes...)
		reworded += w.reworded
	}
	return changes, reworded, true
}

func versionsByName(v any) (map[string]map[string]any, bool) {
	if v == nil {
		return map[string]map[string]any{}, true
	}
	l, ok := v.([]any)
	if !ok {
		return nil, false
	}
	m := make(map[string]map[string]any, len(l))
	for _, it := range l {
		ver, ok := it.(map[string]any)
		if !ok {
			return nil, false
		}
		n, ok := ver["name"].(string)
		if !ok || n == "" {
			return nil, false
		}
		m[n] = ver
	}
	return m, true
}

func nested(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

// schemaWalk compares two OpenAPI schemas of one version property by
// property.
type schemaWalk struct {
	version       string
	storage       bool
	dropsOnRemove bool
	changes       []crdChange
	reworded      int
}

// structural are the keywords that hold other properties' schemas.
var structural = map[string]bool{"properties": true, "items": true, "additionalProperties": true, "description": true, "required": true}

func (w *schemaWalk) add(line string, drops bool) {
	w.changes = append(w.changes, crdChange{version: w.version, storage: w.storage, line: line, drops: drops})
}

func (w *schemaWalk) walk(path string, a, b map[string]any) {
	if a == nil && b == nil {
		return
	}
	if !docEqual(a["description"], b["description"]) && a != nil && b != nil {
		w.reworded++
	}
	// The property's own keywords: type, format, enum, default, bounds,
	// x-kubernetes-* (list types, CEL rules, preserve-unknown-fields).
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var own []string
	for k := range keys {
		if !structural[k] {
			own = append(own, k)
		}
	}
	sort.Strings(own)
	for _, k := range own {
		if !docEqual(a[k], b[k]) {
			w.add("± "+propertyPath(path)+": "+k+" "+docValueOrAbsent(a[k])+" → "+docValueOrAbsent(b[k]), false)
		}
	}
	// Required properties.
	ra, rb := stringSet(a["required"]), stringSet(b["required"])
	for _, n := range slices.Sorted(maps.Keys(rb)) {
		if !ra[n] {
			w.add("± "+propertyPath(join(path, n))+": now required", false)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(ra)) {
		if !rb[n] {
			w.add("± "+propertyPath(join(path, n))+": no longer required", false)
		}
	}
	pa, _ := a["properties"].(map[string]any)
	pb, _ := b["properties"].(map[string]any)
	names := map[string]bool{}
	for n := range pa {
		names[n] = true
	}
	for n := range pb {
		names[n] = true
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		if path == "" && (n == "apiVersion" || n == "kind" || n == "metadata") {
			continue
		}
		xa, inA := pa[n].(map[string]any)
		xb, inB := pb[n].(map[string]any)
		p := join(path, n)
		switch {
		case !inA && inB:
			w.add("+ "+propertyPath(p)+": "+schemaType(xb), false)
		case inA && !inB:
			line := "- " + propertyPath(p) + ": " + schemaType(xa)
			if w.dropsOnRemove {
				line += " (drops its data from stored objects as they are written)"
			}
			w.add(line, w.dropsOnRemove)
		default:
			w.walk(p, xa, xb)
		}
	}
	ia, _ := a["items"].(map[string]any)
	ib, _ := b["items"].(map[string]any)
	w.walk(path+"[]", ia, ib)
	aa, _ := a["additionalProperties"].(map[string]any)
	ab, _ := b["additionalProperties"].(map[string]any)
	w.walk(path+"{}", aa, ab)
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + docKey("", name)
}

func propertyPath(p string) string {
	if p == "" {
		return "(the root)"
	}
	return Cut(p)
}

// schemaType names a property's type: "string", "array of object".
func schemaType(s map[string]any) string {
	t, _ := s["type"].(string)
	if t == "array" {
		if it, ok := s["items"].(map[string]any); ok {
			return "array of " + schemaType(it)
		}
	}
	if t == "" {
		if s["x-kubernetes-int-or-string"] == true {
			return "int or string"
		}
		if s["x-kubernetes-preserve-unknown-fields"] == true {
			return "any"
		}
		return "untyped"
	}
	return t
}

func docValueOrAbsent(v any) string {
	if v == nil {
		return "(absent)"
	}
	return docValue(v)
}

func stringSet(v any) map[string]bool {
	m := map[string]bool{}
	l, _ := v.([]any)
	for _, x := range l {
		if s, ok := x.(string); ok {
			m[s] = true
		}
	}
	return m
}

// crdSummary counts a CRD's changes: "CRD schema: 2 properties added in
// v1; 1 removed from v1, the storage version, dropping stored data".
func crdSummary(changes []crdChange, reworded int) string {
	added, removed, changed, drops := 0, 0, 0, 0
	versions := map[string]bool{}
	for _, c := range changes {
		versions[c.version] = true
		switch c.line[0] {
		case '+':
			added++
		case '-':
			removed++
		default:
			changed++
		}
		if c.drops {
			drops++
		}
	}
	var parts []string
	if added > 0 {
		parts = append(parts, fmt.Sprintf("%d added", added))
	}
	if removed > 0 {
		parts = append(parts, fmt.Sprintf("%d removed", removed))
	}
	if changed > 0 {
		parts = append(parts, fmt.Sprintf("%d changed", changed))
	}
	if len(parts) == 0 {
		parts = append(parts, "no property changed")
	}
	s := "CRD schema in " + strings.Join(slices.Sorted(maps.Keys(versions)), ", ") + ": " + strings.Join(parts, ", ")
	if len(versions) == 0 {
		s = "CRD schema: " + strings.Join(parts, ", ")
	}
	if drops > 0 {
		s += fmt.Sprintf(" (%s from the storage version drop%s stored data)", plural(drops, "removal"), map[bool]string{true: "s", false: ""}[drops == 1])
	}
	if reworded > 0 {
		s += fmt.Sprintf("; %s reworded", plural(reworded, "description"))
	}
	return s
}

// crdBlock shows the changes version by version.
func crdBlock(changes []crdChange) string {
	var b strings.Builder
	version := "\x00"
	for i, c := range changes {
		if i == maxDocPaths {
			fmt.Fprintf(&b, "@@ and %s more @@\n", plural(len(changes)-maxDocPaths, "change"))
			break
		}
		if c.version != version {
			version = c.version
			storage := ""
			if c.storage {
				storage = " (storage version)"
			}
			fmt.Fprintf(&b, "@@ %s%s @@\n", Cut(c.version), storage)
		}
		b.WriteString(c.line + "\n")
	}
	return b.String()
}
