// Package rbac reads what RBAC objects grant: the rules of a role that grant
// more than they name, and who a binding binds to what.
package rbac

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// escalatingVerbs let a subject gain permissions it does not hold.
var escalatingVerbs = map[string]string{
	"escalate":    "escalate (grant permissions it lacks)",
	"bind":        "bind (bind roles it lacks)",
	"impersonate": "impersonate (act as other users, groups or service accounts)",
}

// RiskyGrants describes each rule of a role that grants more than it names:
// a wildcard in verbs, resources, API groups or URLs; an escalating verb;
// exec or attach into pods; the node proxy; or, in a ClusterRole, reading
// Secrets (which a ClusterRoleBinding makes cluster-wide).
func RiskyGrants(role *unstructured.Unstructured) []string {
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	clusterRole := role.GetKind() == "ClusterRole"
	var out []string
	for _, r := range rules {
		rm, _ := r.(map[string]any)
		fields := map[string][]string{}
		var parts []string
		for _, field := range []string{"verbs", "resources", "apiGroups", "nonResourceURLs"} {
			vals, _, _ := unstructured.NestedStringSlice(rm, field)
			fields[field] = vals
			if len(vals) == 0 {
				continue
			}
			shown := append([]string(nil), vals...)
			for i, v := range shown {
				if field == "apiGroups" && v == "" {
					shown[i] = `""`
				}
			}
			parts = append(parts, field+" ["+strings.Join(shown, ", ")+"]")
		}
		has := func(field string, want ...string) bool {
			for _, v := range fields[field] {
				for _, w := range want {
					if v == w {
						return true
					}
				}
			}
			return false
		}
		core := has("apiGroups", "", "*")
		var why []string
		if has("verbs", "*") || has("resources", "*") || has("apiGroups", "*") || has("nonResourceURLs", "*") {
			why = append(why, "wildcard")
		}
		for _, v := range fields["verbs"] {
			if e, ok := escalatingVerbs[v]; ok {
				why = append(why, e)
			}
		}
		if core && has("resources", "pods/exec", "pods/attach") {
			why = append(why, "exec into pods")
		}
		if core && has("resources", "nodes/proxy") {
			why = append(why, "the node proxy (the kubelet API)")
		}
		if clusterRole && core && has("resources", "secrets", "*") && has("verbs", "get", "list", "watch", "*") {
			why = append(why, "read Secrets, in every namespace when bound by a ClusterRoleBinding")
		}
		if len(why) > 0 {
			out = append(out, strings.Join(parts, " ")+" ("+strings.Join(why, "; ")+")")
		}
	}
	sort.Strings(out)
	return out
}

// ClusterRoleRef is the ClusterRole a binding binds, "" for a Role.
func ClusterRoleRef(b *unstructured.Unstructured) string {
	kind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
	name, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
	if kind != "ClusterRole" {
		return ""
	}
	return name
}

// Subjects are who a binding binds: "Kind namespace/name".
func Subjects(b *unstructured.Unstructured) []string {
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

// Escalation says what d grants that before (nil: nothing before) did not:
// the risky rules a role adds, or the subjects a binding newly binds to
// cluster-admin. n is 0 when it grants nothing more.
func Escalation(d, before *unstructured.Unstructured) (n int, grants string) {
	switch d.GetKind() {
	case "Role", "ClusterRole":
		was := map[string]bool{}
		if before != nil {
			for _, g := range RiskyGrants(before) {
				was[g] = true
			}
		}
		var added []string
		for _, g := range RiskyGrants(d) {
			if !was[g] {
				added = append(added, g)
			}
		}
		if len(added) == 0 {
			return 0, ""
		}
		rules := "1 risky rule"
		if len(added) > 1 {
			rules = fmt.Sprintf("%d risky rules", len(added))
		}
		return len(added), rules + ": " + strings.Join(added, "; ")
	case "RoleBinding", "ClusterRoleBinding":
		if ClusterRoleRef(d) != "cluster-admin" {
			return 0, ""
		}
		fresh := Subjects(d)
		if before != nil && ClusterRoleRef(before) == "cluster-admin" {
			old := map[string]bool{}
			for _, s := range Subjects(before) {
				old[s] = true
			}
			fresh = slices.DeleteFunc(fresh, func(s string) bool { return old[s] })
		}
		if len(fresh) == 0 {
			return 0, ""
		}
		return len(fresh), "cluster-admin to " + strings.Join(fresh, ", ")
	}
	return 0, ""
}
