package drift

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rbacDangers flags creates and updates of RBAC objects that newly grant
// what amounts to more power: wildcards, escalate, bind or impersonate,
// exec into pods, the node proxy, Secrets read cluster-wide, or
// cluster-admin to a subject. before holds the objects compared with: the
// live ones for the live impact, the base render for the pull request's own
// change in Git.
func rbacDangers(changes []Change, desired, before map[string]*unstructured.Unstructured, where string) {
	for i := range changes {
		ch := &changes[i]
		if ch.Action != ActionCreate && ch.Action != ActionUpdate {
			continue
		}
		ref := ch.Ref()
		if ref.Group != "rbac.authorization.k8s.io" || hasDanger(ch, DangerRBACEscalation) {
			continue
		}
		d := desired[ref.Key()]
		if d == nil {
			continue
		}
		l := before[ref.Key()]
		switch ref.Kind {
		case "Role", "ClusterRole":
			was := map[string]bool{}
			if l != nil {
				for _, g := range riskyGrants(l) {
					was[g] = true
				}
			}
			var added []string
			for _, g := range riskyGrants(d) {
				if !was[g] {
					added = append(added, g)
				}
			}
			if len(added) > 0 {
				ch.Danger = append(ch.Danger, Danger{Reason: DangerRBACEscalation, Count: len(added),
					Message: fmt.Sprintf("%sgrants %s: %s", where, plural(len(added), "risky rule"), strings.Join(added, "; "))})
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
					Message: fmt.Sprintf("%sgrants cluster-admin to %s", where, strings.Join(newSubjects, ", "))})
			}
		}
	}
}

func hasDanger(ch *Change, reason DangerReason) bool {
	for _, d := range ch.Danger {
		if d.Reason == reason {
			return true
		}
	}
	return false
}

// escalatingVerbs let a subject gain permissions it does not hold.
var escalatingVerbs = map[string]string{
	"escalate":    "escalate (grant permissions it lacks)",
	"bind":        "bind (bind roles it lacks)",
	"impersonate": "impersonate (act as other users, groups or service accounts)",
}

// riskyGrants describes each rule of a role that grants more than it names:
// a wildcard in verbs, resources, API groups or URLs; an escalating verb;
// exec or attach into pods; the node proxy; or, in a ClusterRole, reading
// Secrets (which a ClusterRoleBinding makes cluster-wide).
func riskyGrants(role *unstructured.Unstructured) []string {
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
