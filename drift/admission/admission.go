// Package admission says, before a change is merged, what the cluster's own
// admission will refuse of it: Pod Security Admission's namespace levels,
// ValidatingAdmissionPolicies with their bindings, ResourceQuotas and
// LimitRanges. Each rule is read from the cluster (and from the head's
// render, where the change brings its own) and evaluated with the library the
// apiserver runs: k8s.io/pod-security-admission, the apiserver's CEL policy
// validator and quota check, and kube-apiserver's LimitRanger functions.
//
// Only objects a sync creates or changes are checked, as only they reach
// admission; a workload is checked as its controller's pods will be: a pod
// built from its template, in its namespace. Nothing is written: the rules
// and the objects are read (get and list), and every message a rule gives is
// returned as text for the report's Markdown writer to escape.
package admission

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/drift/scope"
)

// Options are what a check needs beyond the cluster and the renders.
type Options struct {
	// DefaultNamespace places rendered objects that name none, as the
	// comparison placed them.
	DefaultNamespace string
	// PodSecurity is the PodSecurity plugin's own configuration, which the
	// cluster does not serve (kube-apiserver's admission configuration
	// file): its defaults and exemptions. The zero value is Kubernetes'
	// default: privileged at the latest version, nothing exempt.
	PodSecurity PodSecurity
	// Applier is who applies the change (the reconciler's service
	// account): request.userInfo for the policies of the objects it
	// applies. Nil: the Flux kustomize-controller's.
	Applier user.Info
	// GitOnly gives the fields of an object whose live value is a Secret's
	// (see drift.Options.GitOnly): a policy sees the base's value there,
	// never the live one.
	GitOnly func(*unstructured.Unstructured) []fieldpath.Path
	// Policies keeps compiled policies between checks; nil compiles anew.
	Policies *Policies
	// Timeout bounds the policy evaluation of one object; 0 is one second.
	Timeout time.Duration
	// Budget bounds one check's policy evaluations in all; 0 is 30
	// seconds. What is left when it runs out is said not checked.
	Budget time.Duration
	// KubeVersion is the cluster's version ("v1.30.2"): Pod Security's
	// "latest" is the checks of that release. Empty: the library's.
	KubeVersion string
}

// Input is the change checked: the renders at the base and at the head.
type Input struct {
	Base, Head []*unstructured.Unstructured
}

// Check adds to t's live changes what admission refuses of the objects a
// sync of in.Head creates or changes, and what a namespace's tightened Pod
// Security level will refuse of the workloads already running there:
// admission-refused (the object itself: the sync fails), pods-refused (the
// workload is applied, its pods never start) and admission-warning (warn and
// audit levels, Warn and Audit actions). A condition the base's objects
// meet too is marked Before. What could not be read or evaluated is said in
// t.Errors, never taken as allowed.
//
// live is read whole for the cluster's rules (policies and their bindings,
// the labels of the namespaces the change lands in); everything else (the
// live objects, quotas, limit ranges, the parameters of a policy the change
// brings) is read within sc.
func Check(ctx context.Context, live object.LiveReader, sc *scope.Scope, in Input, opts Options, t *drift.Target) {
	if live == nil || t.LiveError != "" || t.NotCompared != "" {
		return
	}
	c, err := newChecker(ctx, live, sc, in, opts, t)
	if err != nil {
		t.Errors = append(t.Errors, "what the cluster's admission refuses could not be checked: "+err.Error())
		return
	}
	if len(c.changed) == 0 && len(c.relabeled) == 0 {
		return
	}
	c.readRules()
	for _, ch := range c.changed {
		c.checkObject(ch)
	}
	c.checkQuotas()
	for _, ns := range c.relabeled {
		c.checkTightened(ns)
	}
	if len(c.lacks) > 0 {
		slices.Sort(c.lacks)
		t.Notes = append(t.Notes, "not checked against the cluster's admission rules: the live state does not hold its "+strings.Join(slices.Compact(c.lacks), ", ")+
			" (a dump holds only the kinds it was made of; `driftback dump` makes one with every kind a comparison needs)")
	}
	for _, p := range c.problems {
		t.Errors = append(t.Errors, p)
	}
}

// changed is one object a sync creates or changes, at the base and head.
type changed struct {
	at         int // index in t.Changes
	ref        object.Ref
	head, base *unstructured.Unstructured
	live       *unstructured.Unstructured
	create     bool
	// pods are the head's pods, as admission sees them, for the quotas.
	pods *pods
	// refused says an earlier plugin refuses the object, or its pods: the
	// quota never counts them.
	refused, podsRefused bool
}

// checker holds one check's reads.
type checker struct {
	ctx      context.Context
	deadline time.Time
	live     object.LiveReader // whole: the cluster's rules
	scoped   object.LiveReader // within the target's scope
	opts     Options
	t        *drift.Target

	kinds     map[schema.GroupKind]object.Kind
	head      map[string]*unstructured.Unstructured
	base      map[string]*unstructured.Unstructured
	changed   []*changed
	relabeled []string // namespaces whose Namespace object the sync changes

	namespaces   map[string]*corev1.Namespace // the head's labels where it renders them, else live
	liveNS       map[string]*corev1.Namespace // as live
	policies     []*vap                       // with their bindings, as after the sync
	livePolicies []*vap                       // as live
	quotas       map[string]*quotaState       // by namespace
	limits       map[string][]*corev1.LimitRange

	lacks    []string
	problems []string
	// said keeps one problem said once.
	said map[string]bool
}

func newChecker(ctx context.Context, live object.LiveReader, sc *scope.Scope, in Input, opts Options, t *drift.Target) (*checker, error) {
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	if opts.Budget == 0 {
		opts.Budget = 30 * time.Second
	}
	if opts.Applier == nil {
		opts.Applier = serviceAccount("flux-system", "kustomize-controller")
	}
	head, err := object.Place(ctx, live, in.Head, opts.DefaultNamespace)
	if err != nil {
		return nil, err
	}
	base, err := object.Place(ctx, live, in.Base, opts.DefaultNamespace)
	if err != nil {
		return nil, err
	}
	kinds, err := live.Kinds(ctx)
	if err != nil {
		return nil, err
	}
	c := &checker{ctx: ctx, deadline: time.Now().Add(opts.Budget), live: live, scoped: scope.NewReader(live, sc), opts: opts, t: t,
		kinds: map[schema.GroupKind]object.Kind{}, head: index(head), base: index(base),
		namespaces: map[string]*corev1.Namespace{}, liveNS: map[string]*corev1.Namespace{},
		quotas: map[string]*quotaState{}, limits: map[string][]*corev1.LimitRange{}, said: map[string]bool{}}
	for _, k := range kinds {
		c.kinds[k.GroupKind()] = k
	}
	var refs []object.Ref
	for i := range t.Changes {
		ch := &t.Changes[i]
		if ch.Action != drift.ActionCreate && ch.Action != drift.ActionUpdate {
			continue
		}
		ref := ch.Ref()
		h := c.head[ref.Key()]
		if h == nil {
			continue
		}
		c.changed = append(c.changed, &changed{at: i, ref: ref, head: h, base: c.base[ref.Key()], create: ch.Action == drift.ActionCreate})
		refs = append(refs, ref)
		if ref.Group == "" && ref.Kind == "Namespace" {
			c.relabeled = append(c.relabeled, ref.Name)
		}
	}
	if len(refs) > 0 {
		got, err := c.scoped.Get(ctx, refs)
		if errors.Is(err, scope.ErrOutOfScope) {
			// One by one: an object outside the scope is not compared
			// with the cluster, nor checked here.
			got, err = map[string]*unstructured.Unstructured{}, nil
			kept := c.changed[:0]
			for _, ch := range c.changed {
				one, err1 := c.scoped.Get(ctx, []object.Ref{ch.ref})
				switch {
				case errors.Is(err1, scope.ErrOutOfScope):
					continue
				case err1 != nil:
					err = err1
				}
				maps.Copy(got, one)
				kept = append(kept, ch)
			}
			c.changed = kept
		}
		if err != nil {
			return nil, fmt.Errorf("read the live objects: %w", err)
		}
		for _, ch := range c.changed {
			ch.live = got[ch.ref.Key()]
		}
	}
	return c, nil
}

// maxProblems bounds what a check says it could not check.
const maxProblems = 20

// problem says, once, what could not be checked.
func (c *checker) problem(format string, args ...any) {
	p := fmt.Sprintf(format, args...)
	if c.said[p] {
		return
	}
	c.said[p] = true
	switch n := len(c.said); {
	case n <= maxProblems:
		c.problems = append(c.problems, p)
	case n == maxProblems+1:
		c.problems = append(c.problems, "and more the cluster's admission rules could not check")
	}
}

// overBudget says the check's time is spent, once.
func (c *checker) overBudget() bool {
	if time.Now().Before(c.deadline) {
		return false
	}
	c.problem("the admission policies were evaluated for %s, the bound: what was left is not checked", c.opts.Budget)
	return true
}

// maxMessage bounds a danger's message: a rule's text is the rule
// writer's, shown as written up to here.
const maxMessage = 1024

// danger adds a danger to a change of t, once per reason and message.
func (c *checker) danger(at int, d drift.Danger) {
	ch := &c.t.Changes[at]
	for _, o := range ch.Danger {
		if o.Reason == d.Reason && o.Message == d.Message {
			return
		}
	}
	if d.Count == 0 {
		d.Count = 1
	}
	if r := []rune(d.Message); len(r) > maxMessage {
		d.Message = string(r[:maxMessage]) + "…"
	}
	ch.Danger = append(ch.Danger, d)
}

// served says the cluster serves a kind; a live state that lacks it (a
// dump made without it) is noted.
func (c *checker) served(gk schema.GroupKind, what string) bool {
	if object.Lacks(c.live, gk) != "" {
		c.lacks = append(c.lacks, what)
		return false
	}
	_, ok := c.kinds[gk]
	// A dump that read the kind and found none holds it all the same.
	return ok || object.IsPartial(c.live)
}

func index(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := make(map[string]*unstructured.Unstructured, len(objs))
	for _, o := range objs {
		out[object.RefOf(o).Key()] = o
	}
	return out
}

// serviceAccount is the user a service account's token authenticates as.
func serviceAccount(namespace, name string) user.Info {
	return &user.DefaultInfo{Name: "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
}

// ServiceAccount is the user a reconciler's service account applies as.
func ServiceAccount(namespace, name string) user.Info { return serviceAccount(namespace, name) }
