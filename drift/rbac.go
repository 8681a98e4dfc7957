package drift

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/drift/rbac"
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
				for _, g := range rbac.RiskyGrants(l) {
					was[g] = true
				}
			}
			var added []string
			for _, g := range rbac.RiskyGrants(d) {
				if !was[g] {
					added = append(added, g)
				}
			}
			if len(added) > 0 {
				ch.Danger = append(ch.Danger, Danger{Reason: DangerRBACEscalation, Count: len(added),
					Message: fmt.Sprintf("%sgrants %s: %s", where, plural(len(added), "risky rule"), strings.Join(added, "; "))})
			}
		case "RoleBinding", "ClusterRoleBinding":
			if rbac.ClusterRoleRef(d) != "cluster-admin" {
				continue
			}
			newSubjects := rbac.Subjects(d)
			if l != nil && rbac.ClusterRoleRef(l) == "cluster-admin" {
				old := map[string]bool{}
				for _, s := range rbac.Subjects(l) {
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
