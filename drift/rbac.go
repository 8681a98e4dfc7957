package drift

import (
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
		if n, grants := rbac.Escalation(d, before[ref.Key()]); n > 0 {
			ch.Danger = append(ch.Danger, Danger{Reason: DangerRBACEscalation, Count: n, Message: where + "grants " + grants})
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
