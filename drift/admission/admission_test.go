package admission_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/admission"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/drift/scope"
	"github.com/driftback/driftback/internal/testfs"
)

// offline checks head against a fixed set of live objects standing for the
// cluster, reading the target's objects within sc (nil: all).
func offline(t *testing.T, live, base, head []*unstructured.Unstructured, sc *scope.Scope) *drift.Target {
	t.Helper()
	inBase := map[string]bool{}
	for _, o := range base {
		inBase[object.RefOf(o).Key()] = true
	}
	tg := &drift.Target{}
	for _, o := range head {
		a := drift.ActionCreate
		if inBase[object.RefOf(o).Key()] {
			a = drift.ActionUpdate
		}
		tg.Changes = append(tg.Changes, drift.Change{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), Action: a})
	}
	admission.Check(context.Background(), livestate.NewObjectReader(live), sc, admission.Input{Base: base, Head: head}, admission.Options{Timeout: 2 * time.Second}, tg)
	return tg
}

const teamNamespace = "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n"

// policyOn is a policy on Secrets and its binding, both as a pull request
// would bring them.
func policyOn(resource, validation string, params string) []string {
	return []string{`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: probe}
spec:
  failurePolicy: Fail
` + params + `  matchConstraints:
    resourceRules:
    - {apiGroups: ["*"], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: [` + resource + `]}
  validations:
` + validation, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: probe}
spec:
  policyName: probe
  validationActions: [Deny]
`}
}

// TestAPolicyAPullRequestBringsLearnsNoSecret: a pull request cannot use a
// policy of its own as an oracle for the cluster's Secrets. Its message
// shows neither the live value (oldObject is the base's Secret, masked),
// nor the head's; a comparison of the head's guess with the live value
// reads the same whether the guess is right or wrong; a Secret is never
// read as a policy's parameter.
func TestAPolicyAPullRequestBringsLearnsNoSecret(t *testing.T) {
	secret := func(v string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: team}\ndata: {password: " + base64.StdEncoding.EncodeToString([]byte(v)) + "}\n"
	}
	live := testfs.Objects(t, teamNamespace, secret("live-s3cret"), policyOn("secrets", `  - expression: "true"`+"\n", "")[0], policyOn("secrets", "", "")[1])
	base := testfs.Objects(t, secret("old-in-git"))
	leak := `  - expression: "false"
    messageExpression: "'old=' + string(oldObject.data.password) + ' new=' + string(object.data.password)"
`
	for _, guess := range []string{"live-s3cret", "wrong"} {
		head := testfs.Objects(t, append([]string{secret(guess)}, policyOn("secrets", leak, "")...)...)
		tg := offline(t, live, base, head, nil)
		d := dangers(tg)
		got := everything(tg)
		for _, v := range []string{"live-s3cret", "old-in-git", "wrong", base64.StdEncoding.EncodeToString([]byte("live-s3cret")), base64.StdEncoding.EncodeToString([]byte("wrong"))} {
			if strings.Contains(got, v) {
				t.Errorf("guess %q: the policy's message %q shows %q", guess, got, v)
			}
		}
		if !strings.Contains(got, "old=") {
			t.Errorf("guess %q: %v; want the policy brought by the pull request to refuse the Secret", guess, d)
		}
		// The oracle: equal to the live value or not, the same answer.
		oracle := `  - expression: "object.data.password != oldObject.data.password"
`
		head = testfs.Objects(t, append([]string{secret(guess)}, policyOn("secrets", oracle, "")...)...)
		if d := dangers(offline(t, live, base, head, nil)); len(d) != 1 {
			t.Errorf("guess %q: comparing with the live value: %v; want the same refusal whatever the guess (the Git values differ)", guess, d)
		}
	}
	// A Secret as a parameter: never read, and said.
	params := "  paramKind: {apiVersion: v1, kind: Secret}\n"
	head := testfs.Objects(t, append([]string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: team}\n"},
		policyOn("configmaps", `  - expression: "params.data.password == ''"`+"\n", params)...)...)
	head[2].Object["spec"].(map[string]any)["paramRef"] = map[string]any{"name": "db", "parameterNotFoundAction": "Deny"}
	tg := offline(t, append(live, testfs.Objects(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: team}\n")...), nil, head, nil)
	if len(dangers(tg)) != 0 || !strings.Contains(strings.Join(tg.Errors, "\n"), "its parameters are Secrets, which driftback does not read for a policy") {
		t.Errorf("a Secret as a parameter: dangers %v, errors %v", dangers(tg), tg.Errors)
	}
}

// TestAPolicyAPullRequestBringsReadsWithinItsScope: the parameters of a
// policy the pull request brings are read within the target's scope; one
// elsewhere is refused and said, never read. The cluster's own policies
// read theirs wherever they are: they are the operator's.
func TestAPolicyAPullRequestBringsReadsWithinItsScope(t *testing.T) {
	params := "  paramKind: {apiVersion: v1, kind: ConfigMap}\n"
	check := `  - expression: "object.data.level == params.data.level"
    messageExpression: "'level must be ' + params.data.level"
`
	pol := policyOn("configmaps", check, params)
	served := strings.ReplaceAll(strings.Join(policyOn("secrets", `  - expression: "true"`+"\n", ""), "---\n"), "probe", "served")
	live := testfs.Objects(t, teamNamespace, "apiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: rules, namespace: other}\ndata: {level: other-teams-value}\n",
		strings.Split(served, "---\n")[0], strings.Split(served, "---\n")[1])
	binding := func(o []*unstructured.Unstructured) []*unstructured.Unstructured {
		o[len(o)-1].Object["spec"].(map[string]any)["paramRef"] = map[string]any{"name": "rules", "namespace": "other", "parameterNotFoundAction": "Deny"}
		return o
	}
	sc := &scope.Scope{Namespaces: map[string]bool{"team": true}, ClusterObjects: map[string]object.Ref{}}
	app := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: team}\ndata: {level: mine}\n"
	// The policy and its binding are outside the target's scope: compared
	// in Git only, and not among its live changes; the ConfigMap is.
	tg := offline(t, live, nil, binding(testfs.Objects(t, append([]string{app}, pol...)...)), sc)
	if len(dangers(tg)) != 0 || !strings.Contains(strings.Join(tg.Errors, "\n"), "ValidatingAdmissionPolicy probe (binding probe) could not be evaluated on ConfigMap/team/app: ConfigMap/other/rules: outside this target's scope") {
		t.Errorf("a parameter outside the scope: dangers %v, errors %v", dangers(tg), tg.Errors)
	}
	for _, e := range tg.Errors {
		if strings.Contains(e, "other-teams-value") {
			t.Errorf("an error shows the parameter: %s", e)
		}
	}
	// The same policy, live: the operator's, its parameter read.
	tg = offline(t, append(live, binding(testfs.Objects(t, pol...))...), nil, testfs.Objects(t, app), sc)
	if got := dangers(tg)["ConfigMap/app admission-refused"].Message; !strings.Contains(got, "level must be other-teams-value") || len(tg.Errors) > 0 {
		t.Errorf("the cluster's own policy: %v, errors %v", dangers(tg), tg.Errors)
	}
}

// TestWhatCannotBeEvaluatedIsSaidNotPassed: a policy asking the authorizer
// (which driftback does not ask the cluster) is an error of the check, not
// a pass and not a refusal; an expression over the apiserver's cost budget
// ends as the apiserver ends it, in bounded time.
func TestWhatCannotBeEvaluatedIsSaidNotPassed(t *testing.T) {
	app := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: team}\ndata: {level: mine}\n"
	authz := `  - expression: "authorizer.group('').resource('secrets').namespace('team').check('get').allowed()"
`
	other := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: team}\n" // the cluster serves ConfigMaps
	live := testfs.Objects(t, append([]string{teamNamespace, other}, policyOn("configmaps", authz, "")...)...)
	tg := offline(t, live, nil, testfs.Objects(t, app), nil)
	if len(dangers(tg)) != 0 || !strings.Contains(strings.Join(tg.Errors, "\n"), "ValidatingAdmissionPolicy probe (binding probe) could not be evaluated on ConfigMap/team/app") {
		t.Errorf("an authorizer check: dangers %v, errors %v", dangers(tg), tg.Errors)
	}
	costly := `  - expression: "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, [1,2,3,4,5,6,7,8,9,10].all(g, string(a+b+c+d+e+f+g).size() > 0)))))))"
`
	start := time.Now()
	tg = offline(t, testfs.Objects(t, append([]string{teamNamespace, other}, policyOn("configmaps", costly, "")...)...), nil, testfs.Objects(t, app), nil)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("an expensive expression took %s", took)
	}
	got := dangers(tg)["ConfigMap/app admission-refused"].Message
	if !strings.Contains(got, "cost") && !strings.Contains(strings.Join(tg.Errors, "\n"), "could not be evaluated") {
		t.Errorf("an expensive expression: dangers %v, errors %v", dangers(tg), tg.Errors)
	}
}

// TestWhatTheBaseAlreadyMeetsIsNotThePullRequests: a workload whose pods a
// namespace's level already refuses is marked Before when the pull request
// changes something else of it; one the pull request makes privileged is
// its own.
func TestWhatTheBaseAlreadyMeetsIsNotThePullRequests(t *testing.T) {
	ns := "apiVersion: v1\nkind: Namespace\nmetadata: {name: team, labels: {pod-security.kubernetes.io/enforce: baseline}}\n"
	dep := func(name string, replicas int, privileged bool) string {
		return strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(deployment(name, replicas, "      - {name: app, image: registry.example.com/app:1, securityContext: {privileged: PRIV}}\n"), "NS", "team"), "PRIV", map[bool]string{true: "true", false: "false"}[privileged]), "\n", "\n")
	}
	live := testfs.Objects(t, ns, dep("old", 1, true), dep("new", 1, false))
	base := testfs.Objects(t, dep("old", 1, true), dep("new", 1, false))
	head := testfs.Objects(t, dep("old", 2, true), dep("new", 1, true))
	d := dangers(offline(t, live, base, head, nil))
	if o, n := d["Deployment/old pods-refused"], d["Deployment/new pods-refused"]; !o.Before || n.Before || n.Message == "" {
		t.Errorf("old (already refused): %+v; new (made privileged): %+v", o, n)
	}
}

// TestAPartialDumpSaysWhatItDidNotCheck: a dump made without the kinds the
// rules are read from says so, rather than reading as "nothing refused".
func TestAPartialDumpSaysWhatItDidNotCheck(t *testing.T) {
	dir := t.TempDir()
	notes := checkDump(t, dir)
	for _, want := range []string{"not checked against the cluster's admission rules", "ValidatingAdmissionPolicies", "ResourceQuotas", "LimitRanges", "Namespaces (their Pod Security labels)"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q lack %q", notes, want)
		}
	}
	_ = schema.GroupKind{}
}

// TestANamespacesLabelsAreWhatTheApplyLeaves: a Namespace Git renders
// without Pod Security labels keeps those someone else set live (the
// apply leaves fields it does not own), so the level they enforce still
// refuses; a label Git set and no longer does is gone after the apply.
func TestANamespacesLabelsAreWhatTheApplyLeaves(t *testing.T) {
	privileged := strings.ReplaceAll(deployment("root", 1, "      - {name: app, image: registry.example.com/app:1, securityContext: {privileged: true}}\n"), "NS", "team")
	live := testfs.Objects(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: team, labels: {pod-security.kubernetes.io/enforce: baseline}}\n",
		strings.ReplaceAll(deployment("other", 1, restrictedContainer), "NS", "team"))
	head := testfs.Objects(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: team, labels: {owner: shop}}\n", privileged)
	if d := dangers(offline(t, live, nil, head, nil)); !strings.Contains(d["Deployment/root pods-refused"].Message, `"baseline:latest"`) {
		t.Errorf("a label set live, not in Git: %v; want baseline enforced", d)
	}
	base := testfs.Objects(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: team, labels: {pod-security.kubernetes.io/enforce: baseline}}\n")
	if d := dangers(offline(t, live, base, head, nil)); len(d) != 0 {
		t.Errorf("a label Git drops: %v; want nothing enforced", d)
	}
}

// TestAPolicyCannotCompareAGuessWithAFieldASecretSets: a field whose live
// value is a Secret's (a Flux variable from a Secret, substituted into a
// ConfigMap) is Git's value in oldObject: a policy comparing the head's
// guess with it answers the same whether the guess is the live value or
// not.
func TestAPolicyCannotCompareAGuessWithAFieldASecretSets(t *testing.T) {
	cm := func(v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: team}\ndata: {password: \"" + v + "\"}\n"
	}
	// The cluster serves policies: it has one, on Secrets.
	live := testfs.Objects(t, teamNamespace, cm("live-s3cret"), policyOn("secrets", `  - expression: "true"`+"\n", "")[0], policyOn("secrets", "", "")[1])
	base := testfs.Objects(t, cm("${PASSWORD}"))
	oracle := `  - expression: "object.data.password == oldObject.data.password"
    messageExpression: "'was ' + oldObject.data.password"
`
	gitOnly := func(o *unstructured.Unstructured) []fieldpath.Path {
		if o.GetKind() == "ConfigMap" {
			return []fieldpath.Path{fieldpath.MakePathOrDie("data", "password")}
		}
		return nil
	}
	var answers []string
	for _, guess := range []string{"live-s3cret", "wrong"} {
		head := testfs.Objects(t, append([]string{cm(guess)}, policyOn("configmaps", oracle, "")...)...)
		tg := &drift.Target{Changes: []drift.Change{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team", Name: "app", Action: drift.ActionUpdate}}}
		admission.Check(context.Background(), livestate.NewObjectReader(live), nil, admission.Input{Base: base, Head: head}, admission.Options{GitOnly: gitOnly}, tg)
		d := dangers(tg)
		if strings.Contains(everything(tg), "live-s3cret") {
			t.Errorf("the policy's message shows the live value: %v", d)
		}
		answers = append(answers, fmt.Sprint(len(d)))
	}
	if answers[0] != answers[1] || answers[0] != "1" {
		t.Errorf("the right guess and a wrong one answer %v; want both refused, compared with Git's value", answers)
	}
}

// TestADenyThatIsAlsoAuditedIsOneRefusal: a binding with Deny and Audit
// (as public policies often write it) refuses once; one with Warn and
// Audit only warns, once.
func TestADenyThatIsAlsoAuditedIsOneRefusal(t *testing.T) {
	app := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: team}\ndata: {level: mine}\n"
	for actions, want := range map[string]string{"[Deny, Audit]": "admission-refused", "[Warn, Audit]": "admission-warning"} {
		pol := policyOn("configmaps", `  - expression: "false"`+"\n", "")
		pol[1] = strings.Replace(pol[1], "validationActions: [Deny]", "validationActions: "+actions, 1)
		tg := offline(t, testfs.Objects(t, append([]string{teamNamespace, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: team}\n"}, pol...)...), nil, testfs.Objects(t, app), nil)
		if d := dangers(tg); len(d) != 1 || d["ConfigMap/app "+want].Reason == "" {
			t.Errorf("%s: %v; want one %s", actions, d, want)
		}
	}
}

// everything is every message a check gave: each danger's, each error's.
func everything(tg *drift.Target) string {
	var out []string
	for _, c := range tg.Changes {
		for _, d := range c.Danger {
			out = append(out, d.Message)
		}
	}
	return strings.Join(append(out, tg.Errors...), "\n")
}

// TestAPolicysParametersHoldNoSecret: a parameter is seen as oldObject is:
// a field whose live value is a Secret's holds Git's, and no object's
// last-applied annotation (a copy of what was applied) is seen at all.
func TestAPolicysParametersHoldNoSecret(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db\n  namespace: team\n  annotations: {kubectl.kubernetes.io/last-applied-configuration: '{\"data\":{\"password\":\"applied-s3cret\"}}'}\ndata: {password: \"%s\"}\n"
	pol := policyOn("configmaps", `  - expression: "false"
    messageExpression: "'param=' + params.data.password + ' applied=' + (has(oldObject.metadata.annotations) && 'kubectl.kubernetes.io/last-applied-configuration' in oldObject.metadata.annotations ? oldObject.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration'] : 'none')"
`, "  paramKind: {apiVersion: v1, kind: ConfigMap}\n")
	pol[1] = strings.Replace(pol[1], "validationActions: [Deny]", "validationActions: [Deny]\n  paramRef: {name: db, parameterNotFoundAction: Deny}", 1)
	served := strings.ReplaceAll(strings.Join(policyOn("secrets", `  - expression: "true"`+"\n", ""), "---\n"), "probe", "served")
	live := testfs.Objects(t, teamNamespace, fmt.Sprintf(cm, "live-s3cret"), strings.Split(served, "---\n")[0], strings.Split(served, "---\n")[1])
	base := testfs.Objects(t, fmt.Sprintf(cm, "${PASSWORD}"))
	head := testfs.Objects(t, append([]string{fmt.Sprintf(cm, "guess")}, pol...)...)
	gitOnly := func(o *unstructured.Unstructured) []fieldpath.Path {
		if o.GetKind() == "ConfigMap" && o.GetName() == "db" {
			return []fieldpath.Path{fieldpath.MakePathOrDie("data", "password")}
		}
		return nil
	}
	tg := &drift.Target{Changes: []drift.Change{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team", Name: "db", Action: drift.ActionUpdate}}}
	admission.Check(context.Background(), livestate.NewObjectReader(live), nil, admission.Input{Base: base, Head: head}, admission.Options{GitOnly: gitOnly}, tg)
	got := everything(tg)
	if !strings.Contains(got, "param=${PASSWORD} applied=none") || strings.Contains(got, "s3cret") {
		t.Errorf("what the check said: %s", got)
	}
}

// TestABindingAPullRequestBringsReadsWithinItsScope: a binding the pull
// request adds for one of the cluster's policies cannot point that
// policy's parameters outside the target's scope.
func TestABindingAPullRequestBringsReadsWithinItsScope(t *testing.T) {
	pol := policyOn("configmaps", `  - expression: "false"
    messageExpression: "'level is ' + params.data.level"
`, "  paramKind: {apiVersion: v1, kind: ConfigMap}\n")
	live := testfs.Objects(t, teamNamespace, "apiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: rules, namespace: other}\ndata: {level: other-teams-value}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: rules, namespace: team}\ndata: {level: mine}\n", pol[0], pol[1])
	binding := strings.Replace(strings.ReplaceAll(pol[1], "name: probe\n", "name: mine\n"), "validationActions: [Deny]", "validationActions: [Deny]\n  paramRef: {name: rules, namespace: other, parameterNotFoundAction: Deny}", 1)
	sc := &scope.Scope{Namespaces: map[string]bool{"team": true}, ClusterObjects: map[string]object.Ref{}}
	head := testfs.Objects(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: team}\n", binding)
	tg := &drift.Target{Changes: []drift.Change{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team", Name: "app", Action: drift.ActionCreate}}}
	admission.Check(context.Background(), livestate.NewObjectReader(live), sc, admission.Input{Head: head}, admission.Options{}, tg)
	if got := everything(tg); strings.Contains(got, "other-teams-value") || !strings.Contains(got, "outside this target's scope") {
		t.Errorf("what the check said: %s", got)
	}
}

// TestATimedOutPolicyIsNeverAPass: an evaluation cut short by its time
// bound is said, whatever the policy's failurePolicy.
func TestATimedOutPolicyIsNeverAPass(t *testing.T) {
	for _, fp := range []string{"Fail", "Ignore"} {
		pol := policyOn("configmaps", `  - expression: "object.data.size() > 0"`+"\n", "")
		pol[0] = strings.Replace(pol[0], "failurePolicy: Fail", "failurePolicy: "+fp, 1)
		live := testfs.Objects(t, append([]string{teamNamespace, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: team}\n"}, pol...)...)
		tg := &drift.Target{Changes: []drift.Change{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team", Name: "app", Action: drift.ActionCreate}}}
		admission.Check(context.Background(), livestate.NewObjectReader(live), nil, admission.Input{Head: testfs.Objects(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: team}\ndata: {a: b}\n")},
			admission.Options{Timeout: time.Nanosecond}, tg)
		if !strings.Contains(strings.Join(tg.Errors, "\n"), "could not be evaluated on ConfigMap/team/app within 1ns") {
			t.Errorf("failurePolicy %s: dangers %v, errors %v", fp, dangers(tg), tg.Errors)
		}
	}
}

// TestAQuotaCountsEveryReplica: 5,000 replicas against a quota of 2,000
// pods: 3,000 refused, counted without creating each.
func TestAQuotaCountsEveryReplica(t *testing.T) {
	quota := "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: pods, namespace: team}\nspec: {hard: {pods: \"2000\"}}\nstatus: {hard: {pods: \"2000\"}, used: {pods: \"0\"}}\n"
	live := testfs.Objects(t, teamNamespace, quota, strings.ReplaceAll(deployment("other", 1, restrictedContainer), "NS", "team"))
	head := testfs.Objects(t, strings.ReplaceAll(deployment("big", 5000, restrictedContainer), "NS", "team"))
	start := time.Now()
	d := dangers(offline(t, live, nil, head, nil))
	if got := d["Deployment/big pods-refused"]; got.Count != 3000 || !strings.Contains(got.Message, "3000 pods of its 5000 pods cannot be created: exceeded quota: pods, requested: pods=1, used: pods=2k, limited: pods=2k") {
		t.Errorf("%+v", d)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %s", took)
	}
}

// TestNamespacesAsTheAPIServerHasThem: every namespace carries
// kubernetes.io/metadata.name, a new one too, so a policy selecting by it
// matches; a Namespace whose Pod Security label cannot be read is refused,
// as the PodSecurity plugin refuses it.
func TestNamespacesAsTheAPIServerHasThem(t *testing.T) {
	pol := policyOn("configmaps", `  - expression: "false"`+"\n", "")
	pol[1] = strings.Replace(pol[1], "validationActions: [Deny]", "validationActions: [Deny]\n  matchResources:\n    namespaceSelector:\n      matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: [fresh]}]", 1)
	live := testfs.Objects(t, append([]string{teamNamespace, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: team}\n"}, pol...)...)
	head := testfs.Objects(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: fresh, labels: {pod-security.kubernetes.io/enforce: strict}}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: fresh}\n", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: team}\n")
	d := dangers(offline(t, live, nil, head, nil))
	if _, ok := d["ConfigMap/app admission-refused"]; !ok || len(d) != 2 || !strings.Contains(d["Namespace/fresh admission-refused"].Message, "PodSecurity refuses its labels") {
		t.Errorf("%v; want fresh's ConfigMap (not team's) and the Namespace refused", d)
	}
}

// TestPodSecurityLatestIsTheClustersRelease: "latest" is the checks of the
// cluster's release, not of the library's: a probe on another host is
// refused at baseline from Kubernetes 1.34 on, allowed before.
func TestPodSecurityLatestIsTheClustersRelease(t *testing.T) {
	probe := strings.ReplaceAll(deployment("probed", 1, `      - name: app
        image: registry.example.com/app:1
        livenessProbe: {httpGet: {host: metadata.example.com, path: /, port: 80}}
`), "NS", "team")
	live := testfs.Objects(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: team, labels: {pod-security.kubernetes.io/enforce: baseline}}\n",
		strings.ReplaceAll(deployment("other", 1, restrictedContainer), "NS", "team"))
	for version, refused := range map[string]bool{"v1.33.4": false, "v1.34.0": true, "": true, "v0.0.0-master+$Format:%H$": true} {
		tg := &drift.Target{Changes: []drift.Change{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "team", Name: "probed", Action: drift.ActionCreate}}}
		admission.Check(context.Background(), livestate.NewObjectReader(live), nil, admission.Input{Head: testfs.Objects(t, probe)}, admission.Options{KubeVersion: version}, tg)
		if got := len(dangers(tg)) > 0; got != refused {
			t.Errorf("cluster %q: refused %v, want %v: %v", version, got, refused, dangers(tg))
		}
	}
}

// TestADumpOfOtherNamespacesSaysSo: a dump whose index read the rules in
// other namespaces says this one's were not checked.
func TestADumpOfOtherNamespacesSaysSo(t *testing.T) {
	dir := t.TempDir()
	index := "apiVersion: driftback.io/v1\nkind: Dump\nkinds: [Namespace, ConfigMap, ResourceQuota, LimitRange, admissionregistration.k8s.io/ValidatingAdmissionPolicy, admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding]\nnamespaces: [billing]\n"
	if err := os.WriteFile(filepath.Join(dir, livestate.DumpIndexFile), []byte(index), 0o644); err != nil {
		t.Fatal(err)
	}
	if notes := checkDump(t, dir); !strings.Contains(notes, "LimitRanges of namespace team, ResourceQuotas of namespace team") {
		t.Errorf("notes %q", notes)
	}
}

// checkDump checks a ConfigMap a change creates in namespace team against
// the dump in dir, and returns what the check notes.
func checkDump(t *testing.T, dir string) string {
	t.Helper()
	dump, err := livestate.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	head := testfs.Objects(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: team}\n")
	tg := &drift.Target{Changes: []drift.Change{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team", Name: "app", Action: drift.ActionCreate}}}
	admission.Check(context.Background(), dump, nil, admission.Input{Head: head}, admission.Options{}, tg)
	return strings.Join(tg.Notes, "\n")
}
