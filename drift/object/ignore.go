package object

import (
	"path"
	"strings"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// IgnoreRule keeps fields out of a diff. An empty selector field matches
// everything; Name and Namespace may use shell globs ("web-*").
type IgnoreRule struct {
	// Group is the API group of the objects the rule applies to ("" is the
	// core group, and matches every group when Kind is empty too).
	Group string `json:"group,omitempty" yaml:"group,omitempty"`
	// Kind is the kind of the objects the rule applies to.
	Kind string `json:"kind,omitempty" yaml:"kind,omitempty"`
	// Namespace is their namespace (a shell glob).
	Namespace string `json:"namespace,omitempty" yaml:"namespace,omitempty"`
	// Name is their name (a shell glob).
	Name string `json:"name,omitempty" yaml:"name,omitempty"`
	// JSONPointers are the fields to ignore, as JSON pointers; a list item is
	// matched by its index, by key=value ("/spec/containers/name=web/image")
	// or by "*". A pointer ignores everything under it. Empty ignores the
	// whole object.
	JSONPointers []string `json:"jsonPointers,omitempty" yaml:"jsonPointers,omitempty"`
	// Managers ignore fields whose live value one of these field managers owns.
	Managers []string `json:"managers,omitempty" yaml:"managers,omitempty"`
}

// DefaultIgnoreManagers are controllers whose writes are not drift: the HPA
// (kube-controller-manager through the scale subresource), the scheduler,
// autoscalers and CA-bundle injectors. Their fields would otherwise show as
// changes on every pull request.
var DefaultIgnoreManagers = []string{
	"kube-controller-manager",
	"kube-scheduler",
	"kubelet",
	"cluster-autoscaler",
	"vpa-recommender",
	"vpa-updater",
	"vpa-admission-controller",
	"keda-operator",
	"cert-manager-cainjector",
	"linkerd-proxy-injector",
	"istio-sidecar-injector",
}

func (r IgnoreRule) selects(ref Ref) bool {
	return (r.Group == "" || r.Group == ref.Group) &&
		(r.Kind == "" || r.Kind == ref.Kind) &&
		glob(r.Namespace, ref.Namespace) && glob(r.Name, ref.Name)
}

func glob(pattern, s string) bool {
	if pattern == "" {
		return true
	}
	ok, err := path.Match(pattern, s)
	return err == nil && ok
}

// ManagerMatches reports whether manager is one of list; an entry ending in
// "*" matches by prefix.
func ManagerMatches(list []string, manager string) bool {
	for _, m := range list {
		if m == manager || (strings.HasSuffix(m, "*") && strings.HasPrefix(manager, strings.TrimSuffix(m, "*"))) {
			return true
		}
	}
	return false
}

func pointerMatches(rule string, p fieldpath.Path) bool {
	want := strings.Split(strings.Trim(rule, "/"), "/")
	got := strings.Split(strings.Trim(pointer(p), "/"), "/")
	if len(got) < len(want) {
		return false
	}
	for i, w := range want {
		w = strings.ReplaceAll(strings.ReplaceAll(w, "~1", "/"), "~0", "~")
		if w != "*" && w != got[i] {
			return false
		}
	}
	return true
}

// FilterIgnored drops the fields the ignore rules and ignored managers cover.
func FilterIgnored(ref Ref, fields []Field, rules []IgnoreRule, managers []string) []Field {
	out := fields[:0]
next:
	for _, f := range fields {
		if f.Manager != "" && ManagerMatches(managers, f.Manager) {
			continue
		}
		for _, r := range rules {
			if !r.selects(ref) {
				continue
			}
			if f.Manager != "" && ManagerMatches(r.Managers, f.Manager) {
				continue next
			}
			if len(r.JSONPointers) == 0 && len(r.Managers) == 0 {
				continue next
			}
			for _, p := range r.JSONPointers {
				if pointerMatches(p, f.path) {
					continue next
				}
			}
		}
		out = append(out, f)
	}
	return out
}
