package admission

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

// PodSecurity is the PodSecurity admission plugin's configuration
// (PodSecurityConfiguration: defaults and exemptions).
type PodSecurity struct {
	// Defaults apply where a namespace carries no label; the zero value is
	// privileged at the latest version for each mode.
	Defaults psapi.Policy
	// Exempt namespaces, runtime classes and users are never checked.
	ExemptNamespaces, ExemptRuntimeClasses, ExemptUsers []string
}

// psEvaluators are the plugin's evaluators with the checks kube-apiserver
// enables, by the cluster's release: "latest" is that release's checks.
var psEvaluators sync.Map // "1.30" or "" → policy.Evaluator

// psEvaluator is the evaluator of the cluster's release (its version
// "v1.30.2"; empty: the library's own).
func psEvaluator(kubeVersion string) (policy.Evaluator, error) {
	var emulate *psapi.Version
	key := ""
	// A build without its version ("v0.0.0-master") says nothing.
	if v, err := version.ParseGeneric(kubeVersion); err == nil && v.Major() >= 1 {
		mm := psapi.MajorMinorVersion(int(v.Major()), int(v.Minor()))
		emulate, key = &mm, mm.String()
	}
	if e, ok := psEvaluators.Load(key); ok {
		return e.(policy.Evaluator), nil
	}
	e, err := policy.NewEvaluator(policy.DefaultChecks(), emulate)
	if err != nil {
		return nil, err
	}
	psEvaluators.Store(key, e)
	return e, nil
}

// nsPolicy is the Pod Security policy of a namespace, as the plugin reads
// it from the namespace's labels: an unreadable enforce label enforces
// restricted, as the plugin does.
func (c *checker) nsPolicy(ns *corev1.Namespace) psapi.Policy {
	defaults := c.opts.PodSecurity.Defaults
	for _, lv := range []*psapi.LevelVersion{&defaults.Enforce, &defaults.Audit, &defaults.Warn} {
		if lv.Level == "" {
			lv.Level = psapi.LevelPrivileged
		}
		if lv.Version == (psapi.Version{}) {
			lv.Version = psapi.LatestVersion()
		}
	}
	var labels map[string]string
	if ns != nil {
		labels = ns.Labels
	}
	p, _ := psapi.PolicyToEvaluate(labels, defaults)
	return p
}

// podSecurity evaluates the pods of a workload (or a Pod) in the namespace
// ns as the PodSecurity plugin does at their creation: a pod that enforce
// refuses is a finding of refused; warn and audit levels are warnings, when
// enforce lets the pod in.
func (c *checker) podSecurity(p *pods, ns *corev1.Namespace, refused drift.DangerReason) []finding {
	ps := c.opts.PodSecurity
	if ns == nil || slices.Contains(ps.ExemptNamespaces, ns.Name) ||
		(p.pod.Spec.RuntimeClassName != nil && slices.Contains(ps.ExemptRuntimeClasses, *p.pod.Spec.RuntimeClassName)) ||
		(p.creator != nil && slices.Contains(ps.ExemptUsers, p.creator.GetName())) {
		return nil
	}
	ev, err := psEvaluator(c.opts.KubeVersion)
	if err != nil {
		c.problem("Pod Security could not be evaluated: %v", err)
		return nil
	}
	pol := c.nsPolicy(ns)
	evaluate := func(lv psapi.LevelVersion) policy.AggregateCheckResult {
		return policy.AggregateCheckResults(ev.EvaluatePod(lv, &p.pod.ObjectMeta, &p.pod.Spec))
	}
	if r := evaluate(pol.Enforce); !r.Allowed {
		return []finding{{reason: refused, rule: "pod-security enforce " + pol.Enforce.String(),
			message: fmt.Sprintf("violates PodSecurity %q (enforced in namespace %s): %s", pol.Enforce.String(), ns.Name, r.ForbiddenDetail())}}
	}
	var out []finding
	for _, m := range []struct {
		mode string
		lv   psapi.LevelVersion
	}{{"warn", pol.Warn}, {"audit", pol.Audit}} {
		if m.mode == "audit" && m.lv == pol.Warn {
			continue // said once, as warn
		}
		if r := evaluate(m.lv); !r.Allowed {
			out = append(out, finding{reason: drift.DangerAdmissionWarning, rule: "pod-security " + m.mode + " " + m.lv.String(),
				message: fmt.Sprintf("would violate PodSecurity %q (%s in namespace %s): %s", m.lv.String(), m.mode, ns.Name, r.ForbiddenDetail())})
		}
	}
	return out
}

// workloadKinds are the live kinds whose pods a namespace's Pod Security
// level applies to on their next creation.
var workloadKinds = []struct{ group, kind string }{
	{"apps", "Deployment"}, {"apps", "StatefulSet"}, {"apps", "DaemonSet"}, {"apps", "ReplicaSet"},
	{"", "ReplicationController"}, {"batch", "CronJob"}, {"batch", "Job"}, {"", "Pod"},
}

// checkTightened names, on a Namespace whose Pod Security enforce level the
// sync raises, the running workloads of the namespace whose pods the new
// level refuses: they run until their pods are next created (a rollout, an
// eviction, a lost node), then never start. Workloads the sync changes are
// checked on their own, under the new level.
func (c *checker) checkTightened(name string) {
	ch := c.change("", "Namespace", "", name)
	before, after := c.liveNS[name], c.namespaces[name]
	if ch == nil || before == nil || after == nil {
		return
	}
	was, will := c.nsPolicy(before).Enforce, c.nsPolicy(after).Enforce
	newer := will.Version != was.Version && (will.Version.Latest() || (!was.Version.Latest() && was.Version.Older(will.Version)))
	if psapi.CompareLevels(will.Level, was.Level) <= 0 && (will.Level != was.Level || will.Level == psapi.LevelPrivileged || !newer) {
		return
	}
	changing := map[string]bool{}
	for _, o := range c.changed {
		changing[o.ref.Key()] = true
	}
	var lost []drift.Lost
	count := 0
	for _, wk := range workloadKinds {
		gk := schemaGK(wk.group, wk.kind)
		if _, ok := c.kinds[gk]; !ok {
			continue
		}
		objs, err := c.scoped.List(c.ctx, gk, name, nil)
		if err != nil {
			c.problem("which running workloads the new Pod Security level of namespace %s refuses could not be read: %v", name, err)
			return
		}
		for _, o := range objs {
			if len(o.GetOwnerReferences()) > 0 || changing[object.RefOf(o).Key()] {
				continue // its owner is checked, or the sync changes it
			}
			p, err := podsOf(o)
			if err != nil || p == nil {
				continue
			}
			fs := c.podSecurity(p, after, drift.DangerPodsRefused)
			if len(fs) == 0 || fs[0].reason != drift.DangerPodsRefused {
				continue
			}
			count++
			if len(lost) < drift.MaxLost {
				ev, _ := psEvaluator(c.opts.KubeVersion)
				r := policy.AggregateCheckResults(ev.EvaluatePod(will, &p.pod.ObjectMeta, &p.pod.Spec))
				detail := r.ForbiddenReason()
				lost = append(lost, drift.Lost{Kind: o.GetKind(), Namespace: name, Name: o.GetName(),
					InGit: c.head[object.RefOf(o).Key()] != nil || c.base[object.RefOf(o).Key()] != nil, Detail: detail})
			}
		}
	}
	if count == 0 {
		return
	}
	c.danger(ch.at, drift.Danger{Reason: drift.DangerPodsRefused, Count: count, Lost: lost,
		Message: fmt.Sprintf("raises Pod Security enforce from %q to %q: the pods of %s running here are refused when next created (a rollout, an eviction, a lost node)",
			was.String(), will.String(), plural(count, "workload"))})
}

// change finds a changed object by kind, namespace and name.
func (c *checker) change(group, kind, namespace, name string) *changed {
	for _, ch := range c.changed {
		if ch.ref.Group == group && ch.ref.Kind == kind && ch.ref.Namespace == namespace && ch.ref.Name == name {
			return ch
		}
	}
	return nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// namespaceOf reads a Namespace object into its Go type, with the label
// the apiserver gives every namespace: kubernetes.io/metadata.name.
func namespaceOf(u *unstructured.Unstructured) *corev1.Namespace {
	ns := &corev1.Namespace{}
	ns.Name, ns.Annotations = u.GetName(), u.GetAnnotations()
	ns.Labels = map[string]string{}
	maps.Copy(ns.Labels, u.GetLabels())
	ns.Labels[corev1.LabelMetadataName] = u.GetName()
	return ns
}

// ParsePodSecurity reads the PodSecurity plugin's configuration as its
// PodSecurityConfiguration writes it: defaults by mode ("enforce",
// "enforce-version", "audit", "audit-version", "warn", "warn-version"),
// and exempt namespaces, runtime classes and users.
func ParsePodSecurity(defaults map[string]string, namespaces, runtimeClasses, users []string) (PodSecurity, error) {
	labels := map[string]string{}
	for k, v := range defaults {
		switch k {
		case "enforce", "enforce-version", "audit", "audit-version", "warn", "warn-version":
			labels["pod-security.kubernetes.io/"+k] = v
		default:
			return PodSecurity{}, fmt.Errorf("defaults: %q is not one of enforce, enforce-version, audit, audit-version, warn, warn-version", k)
		}
	}
	privileged := psapi.LevelVersion{Level: psapi.LevelPrivileged, Version: psapi.LatestVersion()}
	p, errs := psapi.PolicyToEvaluate(labels, psapi.Policy{Enforce: privileged, Audit: privileged, Warn: privileged})
	if len(errs) > 0 {
		return PodSecurity{}, fmt.Errorf("defaults: %v", errs.ToAggregate())
	}
	return PodSecurity{Defaults: p, ExemptNamespaces: namespaces, ExemptRuntimeClasses: runtimeClasses, ExemptUsers: users}, nil
}

// ReadAdmissionConfigFile reads ReadAdmissionConfig's files; an empty path
// is Kubernetes' default.
func ReadAdmissionConfigFile(path string) (PodSecurity, error) {
	if path == "" {
		return PodSecurity{}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return PodSecurity{}, err
	}
	return ReadAdmissionConfig(data)
}

// ReadAdmissionConfig reads the PodSecurity plugin's configuration from
// kube-apiserver's own files: an AdmissionConfiguration
// (--admission-control-config-file) whose PodSecurity plugin holds its
// configuration inline, or a PodSecurityConfiguration. An
// AdmissionConfiguration without the plugin is Kubernetes' default.
func ReadAdmissionConfig(data []byte) (PodSecurity, error) {
	type psConfig struct {
		Kind       string            `json:"kind"`
		Defaults   map[string]string `json:"defaults"`
		Exemptions struct {
			Usernames      []string `json:"usernames"`
			RuntimeClasses []string `json:"runtimeClasses"`
			Namespaces     []string `json:"namespaces"`
		} `json:"exemptions"`
	}
	var doc struct {
		psConfig `json:",inline"`
		Plugins  []struct {
			Name          string    `json:"name"`
			Path          string    `json:"path"`
			Configuration *psConfig `json:"configuration"`
		} `json:"plugins"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return PodSecurity{}, err
	}
	c := &doc.psConfig
	switch doc.Kind {
	case "PodSecurityConfiguration":
	case "AdmissionConfiguration":
		c = nil
		for _, p := range doc.Plugins {
			if p.Name != "PodSecurity" {
				continue
			}
			if p.Configuration == nil {
				return PodSecurity{}, fmt.Errorf("its PodSecurity plugin's configuration is in %q: give that file", p.Path)
			}
			c = p.Configuration
		}
		if c == nil {
			return PodSecurity{}, nil
		}
	default:
		return PodSecurity{}, fmt.Errorf("kind %q is neither AdmissionConfiguration nor PodSecurityConfiguration", doc.Kind)
	}
	return ParsePodSecurity(c.Defaults, c.Exemptions.Namespaces, c.Exemptions.RuntimeClasses, c.Exemptions.Usernames)
}
