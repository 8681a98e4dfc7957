package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/internal/testfs"
	"github.com/driftback/driftback/reconcile/charts"
	"github.com/driftback/driftback/reconcile/hide"
	"github.com/driftback/driftback/render"
)

// exfiltrating are templates of a chart in a pull request that try to
// carry a Secret's value (.Values.token) out in forms no search for the
// value finds: hex, a slice, upper case, a hash, the probe's change undone,
// and a hook's name, which is listed and never compared.
const exfiltrating = `apiVersion: v1
kind: ConfigMap
metadata:
  name: innocent
data:
  hex: {{ printf "%x" .Values.token | quote }}
  slice: {{ substr 0 8 .Values.token | quote }}
  tail: {{ substr 8 24 .Values.token | quote }}
  upper: {{ upper .Values.token | quote }}
  hash: {{ sha256sum .Values.token | quote }}
  undone: {{ .Values.token | replace "-changed" "" | replace "1" "" | quote }}
  b64: {{ b64enc .Values.token | quote }}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: hook-{{ printf "%x" .Values.token | trunc 40 }}
  annotations: {"helm.sh/hook": pre-install}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: x, image: busybox}]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: plain
data: {replicas: {{ .Values.replicas | quote }}}
`

// secretForms are the ways the templates above write token.
func secretForms(token string) []string {
	sum := fmt.Sprintf("%x", sha256.Sum256([]byte(token)))
	return []string{token, hex.EncodeToString([]byte(token)), hex.EncodeToString([]byte(token))[:40], token[:8], token[8:24],
		strings.ToUpper(token), sum, base64.StdEncoding.EncodeToString([]byte(token))}
}

// TestAChartIsNeverGivenASecretsValue: a HelmRelease takes its values
// from a Secret (valuesFrom) on a real apiserver, and its chart, in the
// pull request, writes the value in every form it can: hex, slices, upper
// case, a hash, base64, the probe's change undone, a hook's name, and, in
// another release, the message of fail. None of those forms is anywhere in
// what the build returns: the chart was given stand-ins, never the value.
// The ConfigMap that uses it is hidden whole, and its data is compared
// Git against Git; the one that does not is shown as rendered.
func TestAChartIsNeverGivenASecretsValue(t *testing.T) {
	env := kubetest.New(t)
	ns := env.Namespace
	const token = "s3cr3t-Tok3n-4b9f1e77c2d0aa51"
	ctx := context.Background()
	c := clusterWith(t, env, `apiVersion: v1
kind: Secret
metadata: {name: shop-values, namespace: `+ns+`}
stringData:
  values.yaml: "token: `+token+`\nenabled: true\n"
`)
	release := func(name, chart string) string {
		return `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  chart:
    spec:
      chart: ` + chart + `
      sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}
  values: {replicas: 3}
  valuesFrom:
  - {kind: Secret, name: shop-values}
`
	}
	tree := testfs.Tree(t, map[string]string{
		"charts/leak/Chart.yaml":           "apiVersion: v2\nname: leak\nversion: 0.1.0\n",
		"charts/leak/templates/all.yaml":   exfiltrating,
		"charts/leak/templates/gated.yaml": "{{ if .Values.enabled }}apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gated}\n{{ end }}\n",
		"charts/fail/Chart.yaml":           "apiVersion: v2\nname: fail\nversion: 0.1.0\n",
		"charts/fail/templates/all.yaml":   `{{ fail (printf "no: %x" .Values.token) }}`,
		"apps/shop/kustomization.yaml":     "resources: [leak.yaml]\n",
		"apps/shop/leak.yaml":              release("leak", "./charts/leak"),
		"apps/failing/kustomization.yaml":  "resources: [fail.yaml]\n",
		"apps/failing/fail.yaml":           release("fail", "./charts/fail"),
	})
	vars := Vars{Helm: &Capabilities{KubeVersion: "1.31.4"}, Charts: &ChartAccess{Live: c}}
	r := render.New(render.Options{})
	var built []Built
	for _, path := range []string{"apps/shop", "apps/failing"} {
		tg := fluxTarget(shopKustomization(t))
		tg.Path = path
		built = append(built, Build(ctx, r, tree, tg, vars))
	}
	shop, failing := built[0], built[1]
	if len(shop.Problems) > 0 || len(shop.Releases) != 1 || shop.Releases[0].NotRendered != "" {
		t.Fatalf("the release does not render: %v %+v", shop.Problems, shop.Releases)
	}
	if len(failing.Releases) != 1 || !strings.Contains(failing.Releases[0].NotRendered, "its chart does not render: ") || !strings.Contains(failing.Releases[0].NotRendered, "no: ") {
		t.Fatalf("the failing chart: %+v %v", failing.Releases, failing.Problems)
	}
	out, err := json.Marshal(struct {
		Objects         []*unstructured.Unstructured
		Releases        []Release
		Problems, Hooks []string
	}{append(shop.Objects, failing.Objects...), append(shop.Releases, failing.Releases...), append(shop.Problems, failing.Problems...), append(shop.Hooks, failing.Hooks...)})
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range secretForms(token) {
		if strings.Contains(strings.ToLower(string(out)), strings.ToLower(form)) {
			t.Errorf("the build carries the Secret's value as %q:\n%s", form, out)
		}
	}
	if _, ok := shop.SecretObjects[hide.KeyIn("ConfigMap", ns, "innocent")]; !ok {
		t.Errorf("the ConfigMap that uses the Secret is not hidden: %v", shop.SecretObjects)
	}
	if _, ok := shop.SecretObjects[hide.KeyIn("ConfigMap", ns, "plain")]; ok {
		t.Error("the ConfigMap that uses no Secret is hidden")
	}
	if paths := shop.GitOnly[hide.KeyIn("ConfigMap", ns, "innocent")]; len(paths) != 7 {
		t.Errorf("the fields compared Git against Git: %v, want the seven data keys", paths)
	}
	// Whether it exists is the Secret's to say: not compared, and said.
	for _, o := range shop.Objects {
		if o.GetName() == "gated" {
			t.Error("an object a Secret's value decides the being of is compared")
		}
	}
	if notes := strings.Join(ReleaseNotes(nil, shop.Releases), "\n"); !strings.Contains(notes, "1 of its objects are not compared: whether they exist") {
		t.Errorf("the notes do not say an object is left out:\n%s", notes)
	}
	if !contains(shop.Hidden, token) {
		t.Error("the Secret's value is not among the values redacted from what the cluster shows")
	}

	// The cluster's ConfigMap holds the value, as helm-controller rendered
	// it: the comparison takes its data from Git, so it says nothing of
	// whether the pull request's guess is the value.
	var live []*unstructured.Unstructured
	for _, o := range shop.Objects {
		l := o.DeepCopy()
		if l.GetName() == "innocent" {
			_ = unstructured.SetNestedField(l.Object, strings.ToUpper(token), "data", "upper")
			_ = unstructured.SetNestedField(l.Object, hex.EncodeToString([]byte(token)), "data", "hex")
		}
		live = append(live, l)
	}
	opts := drift.DefaultOptions()
	opts.GitOnly = hide.GitOnlyFields(shop.GitOnly)
	target, err := drift.Compare(ctx, livestate.NewObjectReader(live), drift.Input{Path: "apps/shop", Base: shop.Objects, Head: shop.Objects, HasBase: true}, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range append(target.Changes, target.Drift...) {
		if ch.Action != drift.ActionUnchanged {
			t.Errorf("%s/%s: %s %+v, want nothing: its Secret's fields are compared Git against Git", ch.Kind, ch.Name, ch.Action, ch.Fields)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestAChartIsNeverGivenASecretsVariable: the HelmRelease's values take a
// postBuild variable that kustomize-controller substitutes from a Secret.
// The HelmRelease itself is hidden whole, as any object that uses such a
// variable; its chart is given the variable's stand-ins, so nothing it
// renders, in any form, carries the value, and its release notes name no
// value of it.
func TestAChartIsNeverGivenASecretsVariable(t *testing.T) {
	env := kubetest.New(t)
	ns := env.Namespace
	const token = "v4r-s3cr3t-77aa0e19c4b2f5d3"
	ctx := context.Background()
	c := clusterWith(t, env, "apiVersion: v1\nkind: Secret\nmetadata: {name: vars, namespace: "+ns+"}\nstringData: {TOKEN: "+token+"}\n")
	ks := varsKustomization(t, ns)
	tree := testfs.Tree(t, map[string]string{
		"charts/leak/Chart.yaml":         "apiVersion: v2\nname: leak\nversion: 0.1.0\n",
		"charts/leak/templates/all.yaml": exfiltrating,
		"apps/shop/kustomization.yaml":   "resources: [leak.yaml]\n",
		"apps/shop/leak.yaml": `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: leak, namespace: ` + ns + `}
spec:
  chart:
    spec:
      chart: ./charts/leak
      sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}
  values:
    replicas: 3
    token: ${TOKEN}
`,
	})
	tg := fluxTarget(ks)
	tg.Path = "apps/shop"
	vars := LoadFluxVariables(ctx, ks, false, c, "")
	if vars.Skip {
		t.Fatalf("the variables are not read: %s", vars.Note)
	}
	vars.Helm, vars.Charts = &Capabilities{KubeVersion: "1.31.4"}, &ChartAccess{Live: c}
	b := Build(ctx, render.New(render.Options{}), tree, tg, vars)
	if len(b.Problems) > 0 || len(b.Releases) != 1 || b.Releases[0].NotRendered != "" {
		t.Fatalf("the release does not render: %v %+v", b.Problems, b.Releases)
	}
	var fromChart []*unstructured.Unstructured
	for _, o := range b.Objects {
		if o.GetKind() != "HelmRelease" {
			fromChart = append(fromChart, o)
		}
	}
	if len(fromChart) != 2 {
		t.Fatalf("the chart rendered %d objects, want its two ConfigMaps", len(fromChart))
	}
	out, err := json.Marshal(struct {
		Objects  []*unstructured.Unstructured
		Releases []Release
	}{fromChart, b.Releases})
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range secretForms(token) {
		if strings.Contains(strings.ToLower(string(out)), strings.ToLower(form)) {
			t.Errorf("the chart's objects or release notes carry the variable's value as %q:\n%s", form, out)
		}
	}
	for key, what := range map[string]string{hide.Key("HelmRelease", "leak"): "the HelmRelease", hide.KeyIn("ConfigMap", ns, "innocent"): "the chart's ConfigMap"} {
		if _, ok := b.SecretObjects[key]; !ok {
			t.Errorf("%s, which uses the Secret, is not hidden", what)
		}
	}
}

// TestAPostBuildSecretReachesNothingAPullRequestChooses: a Flux target
// substitutes TOKEN from a Secret. Its pull request tries every other way
// to a chart or a message: a ConfigMap it builds with the variable, read
// through a HelmRelease's valuesFrom; an Argo CD Application's values; a
// HelmRepository's address; a HelmRelease named with a slice of it. None
// carries any form of the value, and a HelmRelease is named as Git writes
// it. And a guess written in place of the variable reads the same, right
// or wrong: the field is compared Git against Git.
func TestAPostBuildSecretReachesNothingAPullRequestChooses(t *testing.T) {
	env := kubetest.New(t)
	ns := env.Namespace
	const token = "pb-s3cr3t-9a8b7c6d5e4f3a2b"
	ctx := context.Background()
	c := clusterWith(t, env,
		"apiVersion: v1\nkind: Secret\nmetadata: {name: vars, namespace: "+ns+"}\nstringData: {TOKEN: "+token+"}\n",
		// What kustomize-controller applied: the value substituted.
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-token, namespace: "+ns+"}\ndata: {token: "+token+"}\n")
	ks := varsKustomization(t, ns)
	configMap := func(value string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-token, namespace: " + ns + "}\ndata: {token: '" + value + "'}\n"
	}
	release := func(name, chart string, extra string) string {
		return `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: '` + name + `', namespace: ` + ns + `}
spec:
  chart:
    spec:
      chart: ` + chart + `
      sourceRef: ` + extra + `
  values: {replicas: 3}
`
	}
	files := map[string]string{
		"charts/leak/Chart.yaml":         "apiVersion: v2\nname: leak\nversion: 0.1.0\n",
		"charts/leak/templates/all.yaml": exfiltrating,
		"apps/shop/kustomization.yaml":   "resources: [cm.yaml, releases.yaml, app.yaml]\n",
		"apps/shop/cm.yaml":              configMap("${TOKEN}"),
		"apps/shop/releases.yaml": release("reader", "./charts/leak", "{kind: GitRepository, name: flux-system, namespace: flux-system}") +
			"  valuesFrom:\n  - {kind: ConfigMap, name: from-token, valuesKey: token, targetPath: token}\n---\n" +
			release("x-${TOKEN:0:8}", "leak", "{kind: HelmRepository, name: vault}") + "---\n" +
			"apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: vault, namespace: " + ns + "}\nspec: {url: 'https://charts.example.com/${TOKEN:0:8}'}\n",
		"apps/shop/app.yaml": `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: app, namespace: argocd}
spec:
  source:
    repoURL: https://charts.example.com/stable
    chart: leak
    targetRevision: 0.1.0
    helm: {values: "token: ${TOKEN}"}
  destination: {server: "https://kubernetes.default.svc", namespace: app}
`,
	}
	tg := fluxTarget(ks)
	tg.Path = "apps/shop"
	vars := LoadFluxVariables(ctx, ks, false, c, "")
	if vars.Skip {
		t.Fatalf("the variables are not read: %s", vars.Note)
	}
	vars.Helm = &Capabilities{KubeVersion: "1.31.4"}
	vars.Charts = &ChartAccess{Live: c, Fetcher: charts.New(charts.Options{}), Trust: charts.NewTrust([]string{"https://charts.example.com"})}
	r := render.New(render.Options{})
	base := Build(ctx, r, testfs.Tree(t, files), tg, vars)
	if len(base.Problems) > 0 {
		t.Fatalf("the target does not build: %v", base.Problems)
	}
	var fromCharts []*unstructured.Unstructured
	for _, o := range base.Objects {
		if _, hidden := base.SecretObjects[hide.Key(o.GetKind(), o.GetName())]; !hidden {
			fromCharts = append(fromCharts, o)
		}
	}
	notes := ReleaseNotes(nil, base.Releases)
	out, err := json.Marshal(struct {
		Objects []*unstructured.Unstructured
		Notes   []string
	}{fromCharts, notes})
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range append(secretForms(token), token[:8]) {
		if strings.Contains(strings.ToLower(string(out)), strings.ToLower(form)) {
			t.Errorf("what is shown carries the variable's value as %q:\n%s", form, out)
		}
	}
	joined := strings.Join(notes, "\n")
	for _, want := range []string{
		"HelmRelease/" + ns + "/x-${TOKEN:0:8} is compared as an object; its chart is not rendered: HelmRepository " + ns + "/vault uses a variable from a Secret",
		"Application/argocd/app is compared as an object; its chart is not rendered: its source uses a variable from a Secret",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("the notes do not say %q:\n%s", want, joined)
		}
	}

	// A guess in place of the variable: right or wrong, the same answer.
	live := []*unstructured.Unstructured{docOf(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-token, namespace: "+ns+"}\ndata: {token: "+token+"}\n", 0)}
	changed := func(guess string) int {
		t.Helper()
		files["apps/shop/cm.yaml"] = configMap(guess)
		head := Build(ctx, r, testfs.Tree(t, files), tg, vars)
		gitOnly := maps.Clone(base.GitOnly)
		maps.Copy(gitOnly, head.GitOnly)
		opts := drift.DefaultOptions()
		opts.GitOnly = hide.GitOnlyFields(gitOnly)
		target, err := drift.Compare(ctx, livestate.NewObjectReader(live), drift.Input{Path: tg.Path, Base: base.Objects, Head: head.Objects, HasBase: true}, opts)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ch := range append(target.Changes, target.PR...) {
			if ch.Kind == "ConfigMap" && ch.Name == "from-token" {
				n += len(ch.Fields)
			}
		}
		return n
	}
	if right, wrong := changed(token), changed("wrong-guess-0000"); right != wrong || right == 0 {
		t.Errorf("the right guess changes %d fields, a wrong one %d: want the same, the Git change", right, wrong)
	}
}

// TestValuesFromIsBoundedBeforeHelmParsesIt: a targetPath of list
// indexes, or more sources than any release needs, is refused before
// Helm's parser allocates for it.
func TestValuesFromIsBoundedBeforeHelmParsesIt(t *testing.T) {
	refs := []meta.ValuesReference{{Kind: "ConfigMap", Name: "x", TargetPath: "a" + strings.Repeat("[65535]", 29)}}
	if why := boundedValuesFrom(refs); !strings.Contains(why, "list index 65535") {
		t.Errorf("a targetPath of list indexes: %q", why)
	}
	if why := boundedValuesFrom(make([]meta.ValuesReference, 65)); !strings.Contains(why, "65 sources") {
		t.Errorf("65 sources: %q", why)
	}
	if why := boundedValuesFrom([]meta.ValuesReference{{Kind: "ConfigMap", Name: "x", TargetPath: "env[0].value"}}); why != "" {
		t.Errorf("an ordinary targetPath: %q", why)
	}
}

// clusterWith creates objs on the test's apiserver and returns a client of
// it, as the product's build is given one.
func clusterWith(t *testing.T, env *kubetest.Env, objs ...string) client.Client {
	t.Helper()
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, y := range objs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(context.Background(), u); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// TestAnEncryptedValuesSourceIsNamedAsSuch: a HelmRelease takes its values
// from a Secret the same target makes from a SOPS-encrypted file, not yet
// in the cluster. Its chart is not rendered, and the note says why in
// those words, not as a Secret that is merely missing.
func TestAnEncryptedValuesSourceIsNamedAsSuch(t *testing.T) {
	env := kubetest.New(t)
	ns := env.Namespace
	c := clusterWith(t, env)
	tree := testfs.Tree(t, map[string]string{
		"charts/leak/Chart.yaml":         "apiVersion: v2\nname: leak\nversion: 0.1.0\n",
		"charts/leak/templates/all.yaml": exfiltrating,
		"apps/shop/kustomization.yaml":   "resources: [values.sops.yaml, release.yaml]\n",
		"apps/shop/values.sops.yaml": `apiVersion: v1
kind: Secret
metadata: {name: shop-values, namespace: ` + ns + `}
stringData: {values.yaml: "ENC[AES256_GCM,data:3q2+7w==,type:str]"}
sops: {mac: "ENC[AES256_GCM,data:abc=,type:str]", version: 3.9.0}
`,
		"apps/shop/release.yaml": `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: shop, namespace: ` + ns + `}
spec:
  chart:
    spec:
      chart: ./charts/leak
      sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}
  valuesFrom:
  - {kind: Secret, name: shop-values}
`,
	})
	tg := fluxTarget(shopKustomization(t))
	tg.Path = "apps/shop"
	b := Build(context.Background(), render.New(render.Options{}), tree, tg, Vars{Helm: &Capabilities{KubeVersion: "1.31.4"}, Charts: &ChartAccess{Live: c}})
	if len(b.Releases) != 1 || !strings.Contains(b.Releases[0].NotRendered, "this target makes from a SOPS-encrypted file") {
		t.Errorf("releases %+v, problems %v: want the chart not rendered, its Secret named as the target's own and encrypted", b.Releases, b.Problems)
	}
}

// varsKustomization is the Kustomization of apps/shop in ns that
// substitutes the variables of Secret vars.
func varsKustomization(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	return docOf(t, `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: shop, namespace: `+ns+`}
spec:
  path: ./apps/shop
  sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}
  postBuild:
    substituteFrom:
    - {kind: Secret, name: vars}
`, 0)
}
