package drift

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rbacDangers flags creates and updates that newly grant cluster-admin or
// wildcard verbs, resources or API groups.
func rbacDangers(changes []Change, desired, liveObjs map[string]*unstructured.Unstructured) {
	for i := range changes {
		ch := &changes[i]
		if ch.Action != ActionCreate && ch.Action != ActionUpdate {
			continue
		}
		ref := ch.Ref()
		if ref.Group != "rbac.authorization.k8s.io" {
			continue
		}
		d := desired[ref.Key()]
		if d == nil {
			continue
		}
		l := liveObjs[ref.Key()]
		switch ref.Kind {
		case "Role", "ClusterRole":
			now := wildcards(d)
			before := map[string]bool{}
			if l != nil {
				for _, w := range wildcards(l) {
					before[w] = true
				}
			}
			var added []string
			for _, w := range now {
				if !before[w] {
					added = append(added, w)
				}
			}
			if len(added) > 0 {
				ch.Danger = append(ch.Danger, Danger{Reason: DangerRBACEscalation, Count: len(added),
					Message: fmt.Sprintf("grants wildcard access in %s: %s", plural(len(added), "rule"), strings.Join(added, "; "))})
			}
		case "RoleBinding", "ClusterRoleBinding":
			if roleRefName(d) != "cluster-admin" {
				continue
			}
			newSubjects := subjects(d)
			if l != nil && roleRefName(l) == "cluster-admin" {
				old := map[string]bool{}
				for _, s := range subjects(l) {
					old[s] = true
				}
				var fresh []string
				for _, s := range newSubjects {
					if !old[s] {
						fresh = append(fresh, s)
					}
				}
				newSubjects = fresh
			}
			if len(newSubjects) > 0 {
				ch.Danger = append(ch.Danger, Danger{Reason: DangerRBACEscalation, Count: len(newSubjects),
					Message: fmt.Sprintf("grants cluster-admin to %s", strings.Join(newSubjects, ", "))})
			}
		}
	}
}

// wildcards describes each rule that holds "*" in its verbs, resources, API
// groups or non-resource URLs.
func wildcards(role *unstructured.Unstructured) []string {
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	var out []string
	for _, r := range rules {
		rm, _ := r.(map[string]any)
		wild := false
		var parts []string
		for _, field := range []string{"verbs", "resources", "apiGroups", "nonResourceURLs"} {
			vals, _, _ := unstructured.NestedStringSlice(rm, field)
			if len(vals) == 0 {
				continue
			}
			for i, v := range vals {
				if v == "*" {
					wild = true
				}
				if field == "apiGroups" && v == "" {
					vals[i] = `""`
				}
			}
			parts = append(parts, field+" ["+strings.Join(vals, ", ")+"]")
		}
		if wild {
			out = append(out, strings.Join(parts, " "))
		}
	}
	sort.Strings(out)
	return out
}

func roleRefName(b *unstructured.Unstructured) string {
	kind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
	name, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
	if kind != "ClusterRole" {
		return ""
	}
	return name
}

func subjects(b *unstructured.Unstructured) []string {
	subs, _, _ := unstructured.NestedSlice(b.Object, "subjects")
	var out []string
	for _, s := range subs {
		sm, _ := s.(map[string]any)
		kind, _ := sm["kind"].(string)
		name, _ := sm["name"].(string)
		ns, _ := sm["namespace"].(string)
		if ns != "" {
			name = ns + "/" + name
		}
		out = append(out, kind+" "+name)
	}
	return out
}
