package admission

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/lru"
)

var (
	policyKind  = schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}
	bindingKind = schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}
)

// Bounds of what a change may bring: policies it adds or changes, and the
// length of each of their expressions. The cluster's own are all read.
const (
	maxHeadPolicies   = 32
	maxHeadBindings   = 64
	maxExpressionSize = 5 << 10
	maxPolicies       = 512
	// maxParams bounds the parameters a binding's selector gives one
	// evaluation.
	maxParams = 16
)

// Policies keeps compiled policies, by their spec, between checks.
type Policies struct {
	c *lru.Cache[validating.Validator]
}

// NewPolicies keeps up to 256 compiled policies.
func NewPolicies() *Policies { return &Policies{c: lru.New[validating.Validator](256)} }

// vap is a ValidatingAdmissionPolicy with its bindings, compiled.
type vap struct {
	p        *admissionregistrationv1.ValidatingAdmissionPolicy
	bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	v        validating.Validator
	// fromHead: the change brings it (new or changed): its parameters are
	// read within the target's scope, as anything else the change steers,
	// and it is compiled as the apiserver compiles a new policy.
	fromHead bool
	// headBindings are the bindings, by name, the change brings: what they
	// read is read within the target's scope too.
	headBindings map[string]bool
}

// compositionEnv is the CEL environment kube-apiserver compiles policies
// in, at its compatibility version.
var compositionEnv = sync.OnceValue(func() *environment.EnvSet {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
})

// compile compiles a policy as the ValidatingAdmissionPolicy plugin does
// (its compilePolicy): variables, match conditions, validations, audit
// annotations and message expressions. mode is StoredExpressions for a
// policy the cluster holds, NewExpressions for one a change brings, which
// the apiserver must first accept (newer CEL libraries are refused).
func compile(p *admissionregistrationv1.ValidatingAdmissionPolicy, mode environment.Type) validating.Validator {
	optional := cel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	messages := cel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil}
	fc, err := cel.NewCompositedCompiler(compositionEnv())
	if err != nil {
		return validating.NewValidator(nil, nil, nil, nil, p.Spec.FailurePolicy, err)
	}
	vars := make([]cel.NamedExpressionAccessor, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		vars[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	fc.CompileAndStoreVariables(vars, optional, mode)
	var matcher matchconditions.Matcher
	if len(p.Spec.MatchConditions) > 0 {
		conds := make([]cel.ExpressionAccessor, len(p.Spec.MatchConditions))
		for i := range p.Spec.MatchConditions {
			conds[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
		}
		matcher = matchconditions.NewMatcher(fc.CompileCondition(conds, optional, mode), p.Spec.FailurePolicy, "policy", "validate", p.Name)
	}
	validations := make([]cel.ExpressionAccessor, len(p.Spec.Validations))
	messageExprs := make([]cel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messageExprs[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	audits := make([]cel.ExpressionAccessor, len(p.Spec.AuditAnnotations))
	for i, a := range p.Spec.AuditAnnotations {
		audits[i] = &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	return validating.NewValidator(fc.CompileCondition(validations, optional, mode), matcher,
		fc.CompileCondition(audits, optional, mode),
		fc.CompileCondition(messageExprs, messages, mode), p.Spec.FailurePolicy, nil)
}

// compiled returns a policy's validator, from the cache where it holds
// the same spec.
func (ps *Policies) compiled(p *admissionregistrationv1.ValidatingAdmissionPolicy, fromHead bool) validating.Validator {
	mode := environment.StoredExpressions
	if fromHead {
		mode = environment.NewExpressions
	}
	if ps == nil {
		return compile(p, mode)
	}
	spec, _ := json.Marshal(p.Spec) // a decoded spec always marshals
	sum := sha256.Sum256(append([]byte(fmt.Sprintf("%s\x00%v\x00", p.Name, mode)), spec...))
	key := hex.EncodeToString(sum[:])
	if v, ok := ps.c.Get(key); ok {
		return v
	}
	v := compile(p, mode)
	ps.c.Add(key, v, 1)
	return v
}

// expressionsTooLarge says which expression of a policy a change brings
// is over the bound.
func expressionsTooLarge(p *admissionregistrationv1.ValidatingAdmissionPolicy) bool {
	var all []string
	for _, v := range p.Spec.Validations {
		all = append(all, v.Expression, v.MessageExpression, v.Message)
	}
	for _, v := range p.Spec.Variables {
		all = append(all, v.Expression)
	}
	for _, m := range p.Spec.MatchConditions {
		all = append(all, m.Expression)
	}
	for _, a := range p.Spec.AuditAnnotations {
		all = append(all, a.ValueExpression)
	}
	for _, e := range all {
		if len(e) > maxExpressionSize {
			return true
		}
	}
	return false
}

// readPolicies reads the cluster's policies and bindings and lays the
// head's over them: the rules as they stand after the sync (c.policies) and
// as they stand now (live).
func (c *checker) readPolicies() (after, now []*vap) {
	if !c.served(policyKind, "ValidatingAdmissionPolicies") || !c.served(bindingKind, "ValidatingAdmissionPolicyBindings") {
		return nil, nil
	}
	livePolicies, err := c.live.List(c.ctx, policyKind, "", nil)
	if err != nil {
		c.problem("the cluster's ValidatingAdmissionPolicies could not be read: %v", err)
		return nil, nil
	}
	liveBindings, err := c.live.List(c.ctx, bindingKind, "", nil)
	if err != nil {
		c.problem("the cluster's ValidatingAdmissionPolicyBindings could not be read: %v", err)
		return nil, nil
	}
	byName := func(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		m := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			m[o.GetName()] = o
		}
		return m
	}
	lp, lb := byName(livePolicies), byName(liveBindings)
	now = c.buildPolicies(lp, lb, nil, nil)
	// After the sync: the base's policies and bindings that the head drops
	// are gone, the head's are as it renders them. Those it adds or changes
	// are the change's own: what they read is read within its scope.
	ap, ab := maps.Clone(lp), maps.Clone(lb)
	headPolicy, headBinding := map[string]bool{}, map[string]bool{}
	for _, key := range sortedKeys(c.base) {
		if c.head[key] != nil {
			continue
		}
		switch r := object.RefOf(c.base[key]); r.GroupKind() {
		case policyKind:
			delete(ap, r.Name)
		case bindingKind:
			delete(ab, r.Name)
		}
	}
	for _, key := range sortedKeys(c.head) {
		o := c.head[key]
		switch r := object.RefOf(o); r.GroupKind() {
		case policyKind:
			if l := lp[r.Name]; l == nil || !sameSpec(l, o) {
				headPolicy[r.Name] = true
			}
			ap[r.Name] = o
		case bindingKind:
			if l := lb[r.Name]; l == nil || !sameSpec(l, o) {
				headBinding[r.Name] = true
			}
			ab[r.Name] = o
		}
	}
	if len(headPolicy) > maxHeadPolicies || len(headBinding) > maxHeadBindings {
		c.problem("this change brings %d ValidatingAdmissionPolicies and %d bindings: over %d and %d, they were not evaluated", len(headPolicy), len(headBinding), maxHeadPolicies, maxHeadBindings)
		return now, now
	}
	after = c.buildPolicies(ap, ab, headPolicy, headBinding)
	for _, set := range [][]*vap{now, after} {
		for _, pl := range set {
			pl.v = c.opts.Policies.compiled(pl.p, pl.fromHead)
		}
	}
	return after, now
}

// buildPolicies reads policies and bindings into their Go types, defaulted
// as the apiserver stores them, each policy with its bindings; the head's
// own are marked.
func (c *checker) buildPolicies(policies, bindings map[string]*unstructured.Unstructured, headPolicy, headBinding map[string]bool) []*vap {
	byPolicy := map[string][]*admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	for _, bn := range sortedKeys(bindings) {
		b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(bindings[bn].Object, b); err != nil {
			c.problem("ValidatingAdmissionPolicyBinding %s could not be read: %v", bn, err)
			continue
		}
		object.BuiltinScheme().Default(b) // a selector left out matches all
		byPolicy[b.Spec.PolicyName] = append(byPolicy[b.Spec.PolicyName], b)
	}
	var out []*vap
	for _, name := range sortedKeys(policies) {
		if len(byPolicy[name]) == 0 {
			continue // a policy without a binding refuses nothing
		}
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(policies[name].Object, p); err != nil {
			c.problem("ValidatingAdmissionPolicy %s could not be read: %v", name, err)
			continue
		}
		object.BuiltinScheme().Default(p)
		pl := &vap{p: p, bindings: byPolicy[name], fromHead: headPolicy[name], headBindings: headBinding}
		if pl.fromHead && expressionsTooLarge(p) {
			c.problem("ValidatingAdmissionPolicy %s that this change brings was not evaluated: an expression or message is over %d bytes", name, maxExpressionSize)
			continue
		}
		out = append(out, pl)
	}
	if len(out) > maxPolicies {
		c.problem("only the first %d of %d ValidatingAdmissionPolicies were evaluated", maxPolicies, len(out))
		out = out[:maxPolicies]
	}
	return out
}

func sameSpec(a, b *unstructured.Unstructured) bool {
	sa, _, _ := unstructured.NestedFieldNoCopy(a.Object, "spec")
	sb, _, _ := unstructured.NestedFieldNoCopy(b.Object, "spec")
	ja, _ := json.Marshal(sa)
	jb, _ := json.Marshal(sb)
	return string(ja) == string(jb)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// request is one admission request, as the apiserver would make it.
type request struct {
	obj, old  runtime.Object
	gvk       schema.GroupVersionKind
	gvr       schema.GroupVersionResource
	namespace string
	name      string
	user      user.Info
	// refused is what a Deny makes of it: admission-refused (the object)
	// or pods-refused (a workload's pods).
	refused drift.DangerReason
}

// asked stands in for the cluster's authorizer in a policy's
// expressions: driftback does not ask the cluster who may do what on a
// policy's behalf, so a decision of a policy that asked is not known.
type asked struct{ calls int }

func (a *asked) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	a.calls++
	return authorizer.DecisionNoOpinion, "", errors.New("not asked")
}

// evaluatePolicies runs a request through the policies as the plugin's
// dispatcher does: match constraints, then each matching binding with its
// parameters, each of the binding's validation actions taken. namespaces
// holds the namespaces' labels the matching reads.
func (c *checker) evaluatePolicies(policies []*vap, r request, namespaces map[string]*corev1.Namespace) []finding {
	if len(policies) == 0 {
		return nil
	}
	op := admission.Create
	var opts runtime.Object = &metav1.CreateOptions{}
	if r.old != nil {
		op, opts = admission.Update, &metav1.UpdateOptions{}
	}
	attrs := admission.NewAttributesRecord(r.obj, r.old, r.gvk, r.namespace, r.name, r.gvr, "", op, opts, false, r.user)
	matcher := generic.NewPolicyMatcher(matching.NewMatcher(nsLister(namespaces), nil))
	ifaces := admission.NewObjectInterfacesFromScheme(object.BuiltinScheme())
	var nsObj *corev1.Namespace
	if r.namespace != "" && !(r.gvk.Group == "" && r.gvk.Kind == "Namespace") {
		nsObj = namespaces[r.namespace]
	}
	var out []finding
	what := strings.TrimSuffix(object.Ref{Group: r.gvk.Group, Kind: r.gvk.Kind, Namespace: r.namespace, Name: r.name}.String(), "/")
	for _, pl := range policies {
		matches, resource, kind, err := matcher.DefinitionMatches(attrs, ifaces, validating.NewValidatingAdmissionPolicyAccessor(pl.p))
		if err != nil {
			c.problem("whether ValidatingAdmissionPolicy %s applies to %s could not be evaluated: %v", pl.p.Name, what, err)
			continue
		}
		if !matches {
			continue
		}
		for _, b := range pl.bindings {
			ok, err := matcher.BindingMatches(attrs, ifaces, validating.NewValidatingAdmissionPolicyBindingAccessor(b))
			if err != nil {
				c.problem("whether ValidatingAdmissionPolicyBinding %s applies to %s could not be evaluated: %v", b.Name, what, err)
				continue
			}
			if !ok {
				continue
			}
			params, notFound, err := c.params(pl, b, r.namespace)
			if err != nil {
				c.problem("ValidatingAdmissionPolicy %s (binding %s) could not be evaluated on %s: %v", pl.p.Name, b.Name, what, err)
				continue
			}
			rule := "policy " + pl.p.Name + " binding " + b.Name
			if notFound != "" {
				if pl.p.Spec.FailurePolicy == nil || *pl.p.Spec.FailurePolicy == admissionregistrationv1.Fail {
					out = append(out, actions(b, rule, r.refused, fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: failed to configure binding: %s", pl.p.Name, b.Name, notFound))...)
				}
				continue
			}
			va := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: kind, VersionedObject: admission.NewLazyObject(r.obj), VersionedOldObject: admission.NewLazyObject(r.old)}
			for _, param := range params {
				if c.overBudget() {
					return out
				}
				ctx, cancel := context.WithTimeout(c.ctx, c.opts.Timeout)
				authz := &asked{}
				res := pl.v.Validate(ctx, resource, va, param, nsObj, celconfig.RuntimeCELCostBudget, authz)
				timedOut := ctx.Err() != nil
				cancel()
				if authz.calls > 0 {
					c.problem("ValidatingAdmissionPolicy %s (binding %s) could not be evaluated on %s: it asks the cluster's authorizer, which driftback does not ask", pl.p.Name, b.Name, what)
					continue
				}
				if timedOut {
					// Whatever its failurePolicy: an evaluation cut short
					// says nothing of what the apiserver decides.
					c.problem("ValidatingAdmissionPolicy %s (binding %s) could not be evaluated on %s within %s", pl.p.Name, b.Name, what, c.opts.Timeout)
					continue
				}
				for _, d := range res.Decisions {
					if d.Action != validating.ActionDeny {
						continue
					}
					out = append(out, actions(b, rule, r.refused, fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", pl.p.Name, b.Name, d.Message))...)
				}
			}
		}
	}
	return out
}

// actions turns a denial into what each of the binding's validation
// actions makes of it: Deny refuses, Warn and Audit warn.
func actions(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, rule string, refused drift.DangerReason, message string) []finding {
	// Deny refuses: a warning or an audit record of the same denial says
	// nothing more.
	if slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny) {
		return []finding{{reason: refused, rule: rule, message: message}}
	}
	for _, a := range b.Spec.ValidationActions {
		if a == admissionregistrationv1.Warn || a == admissionregistrationv1.Audit {
			return []finding{{reason: drift.DangerAdmissionWarning, rule: rule + " warn", message: message + " (" + strings.ToLower(string(a)) + " only)"}}
		}
	}
	return nil
}

// params reads a binding's parameters as the plugin's CollectParams does.
// notFound says why there are none where the binding asks to deny then.
// A policy the change brings reads its parameters within the target's
// scope; a Secret is never read as a parameter.
func (c *checker) params(pl *vap, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, namespace string) (params []runtime.Object, notFound string, err error) {
	kind, ref := pl.p.Spec.ParamKind, b.Spec.ParamRef
	if kind == nil || ref == nil {
		return []runtime.Object{nil}, "", nil
	}
	gv, err := schema.ParseGroupVersion(kind.APIVersion)
	if err != nil {
		return nil, "", err
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: kind.Kind}
	if gk.Group == "" && gk.Kind == "Secret" {
		return nil, "", errors.New("its parameters are Secrets, which driftback does not read for a policy")
	}
	k, served := c.kinds[gk]
	if !served {
		return nil, "", fmt.Errorf("its parameter kind %s is not served", gk)
	}
	ns := ""
	if k.Namespaced {
		ns = namespace
		if ref.Namespace != "" {
			ns = ref.Namespace
		}
		if ns == "" {
			return nil, "", errors.New("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
		}
	} else if ref.Namespace != "" {
		return nil, "", errors.New("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
	}
	reader := c.live
	if pl.fromHead || pl.headBindings[b.Name] {
		reader = c.scoped
	}
	var found []*unstructured.Unstructured
	switch {
	case ref.Name != "" && ref.Selector != nil:
		return nil, "", errors.New("paramRef.name and paramRef.selector are mutually exclusive")
	case ref.Name != "":
		r := object.Ref{Group: gk.Group, Version: gv.Version, Kind: gk.Kind, Namespace: ns, Name: ref.Name}
		got, err := reader.Get(c.ctx, []object.Ref{r})
		if err != nil {
			return nil, "", err
		}
		if o := got[r.Key()]; o != nil {
			found = append(found, o)
		}
	case ref.Selector != nil:
		sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
		if err != nil {
			return nil, "", err
		}
		if found, err = reader.List(c.ctx, gk, ns, sel); err != nil {
			return nil, "", err
		}
	default:
		return nil, "", errors.New("one of name or selector must be provided")
	}
	if len(found) == 0 {
		if ref.ParameterNotFoundAction != nil && *ref.ParameterNotFoundAction == admissionregistrationv1.DenyAction {
			return nil, "no params found for policy binding with `Deny` parameterNotFoundAction", nil
		}
		return nil, "", nil
	}
	if len(found) > maxParams {
		c.problem("ValidatingAdmissionPolicyBinding %s selects %d parameters: only the first %d were evaluated", b.Name, len(found), maxParams)
		found = found[:maxParams]
	}
	for _, o := range found {
		// As oldObject is: no Secret's value in it.
		params = append(params, c.liveAsSeen(o, c.head[object.RefOf(o).Key()]))
	}
	return params, "", nil
}

// nsLister serves the namespaces the check knows to the policy matcher; a
// namespace it does not know has no labels.
type nsLister map[string]*corev1.Namespace

func (l nsLister) List(sel labels.Selector) ([]*corev1.Namespace, error) {
	var out []*corev1.Namespace
	for _, n := range l {
		if sel.Matches(labels.Set(n.Labels)) {
			out = append(out, n)
		}
	}
	return out, nil
}

func (l nsLister) Get(name string) (*corev1.Namespace, error) {
	if n := l[name]; n != nil {
		return n, nil
	}
	if name == "" {
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
}

var _ corelisters.NamespaceLister = nsLister(nil)
