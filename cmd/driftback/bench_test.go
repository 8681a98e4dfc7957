package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/render"
)

const (
	fleetOverlays = 100
	fleetScaled   = 10
)

// fleetBase is the shared base of every overlay: 19 namespaced objects of 10
// kinds; each overlay adds its Namespace, so the repository renders 2,000
// objects of 11 kinds in 100 namespaces.
var fleetBase = map[string]string{
	"kustomization.yaml": "resources:\n- sa.yaml\n- config.yaml\n- secret.yaml\n- service.yaml\n- deploy.yaml\n- rbac.yaml\n- netpol.yaml\n- pdb.yaml\n- cron.yaml\n",
	"sa.yaml":            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: app\n",
	"config.yaml":        configMaps(5),
	"secret.yaml":        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\ntype: Opaque\ndata:\n  user: YXBw\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: tls\ntype: Opaque\ndata:\n  key: c2VjcmV0\n",
	"service.yaml":       "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector: {app: web}\n  ports:\n  - {name: http, port: 80, targetPort: 8080, protocol: TCP}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: worker\nspec:\n  clusterIP: None\n  selector: {app: worker}\n  ports:\n  - {name: metrics, port: 9090, protocol: TCP}\n",
	"deploy.yaml":        deployment("web", 3) + "---\n" + deployment("worker", 2),
	"rbac.yaml":          "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: reader\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get, list]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: leases\nrules:\n- apiGroups: [coordination.k8s.io]\n  resources: [leases]\n  verbs: [get, update]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: reader\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}\nsubjects:\n- {kind: ServiceAccount, name: app}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: leases\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: leases}\nsubjects:\n- {kind: ServiceAccount, name: app}\n",
	"netpol.yaml":        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: web\nspec:\n  podSelector: {matchLabels: {app: web}}\n  ingress:\n  - ports:\n    - {port: 8080, protocol: TCP}\n",
	"pdb.yaml":           "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\nspec:\n  minAvailable: 1\n  selector: {matchLabels: {app: web}}\n",
	"cron.yaml":          "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: cleanup\nspec:\n  schedule: \"0 3 * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers:\n          - name: cleanup\n            image: registry.example.com/cleanup:1.0.0\n",
}

func configMaps(n int) string {
	var docs []string
	for i := range n {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings-%d\ndata:\n  level: info\n  size: \"%d\"\n", i, i))
	}
	return strings.Join(docs, "---\n")
}

func deployment(name string, replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: %[2]d
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      serviceAccountName: app
      containers:
      - name: main
        image: registry.example.com/%[1]s:1.0.0
        ports:
        - {containerPort: 8080, protocol: TCP}
        resources:
          requests: {cpu: 100m, memory: 64Mi}
`, name, replicas)
}

// fleet is a repository of 100 overlays applied to the test apiserver by
// the GitOps applier, with 10 Deployments scaled by hand.
type fleet struct {
	repo       string
	paths      []string
	kubeconfig string
	manifests  string // every rendered object, one YAML stream
	// changed is the repository with one label changed on every object.
	changed string
}

func newFleet(b *testing.B) *fleet {
	b.Helper()
	env := kubetest.New(b)
	dir := b.TempDir()
	f := &fleet{repo: filepath.Join(dir, "repo")}
	files := map[string]string{}
	for name, content := range fleetBase {
		files["base/"+name] = content
	}
	for i := range fleetOverlays {
		ns := fmt.Sprintf("%s-%03d", env.Namespace, i)
		path := fmt.Sprintf("tenants/t%03d", i)
		files[path+"/kustomization.yaml"] = "namespace: " + ns + "\nlabels:\n- pairs: {tenant: t" + fmt.Sprintf("%03d", i) + "}\nresources:\n- namespace.yaml\n- ../../base\n"
		files[path+"/namespace.yaml"] = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n"
		f.paths = append(f.paths, path)
	}
	writeTree(b, f.repo, files)

	tree, err := render.DirTree(f.repo)
	if err != nil {
		b.Fatal(err)
	}
	res, err := render.New(render.DefaultOptions()).Render(context.Background(), tree, f.paths)
	if err != nil {
		b.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	var stream bytes.Buffer
	for _, o := range res.Overlays {
		if len(o.Problems) > 0 {
			b.Fatalf("%s: %v", o.Path, o.Problems)
		}
		got, err := o.Objects()
		if err != nil {
			b.Fatal(err)
		}
		objs = append(objs, got...)
		for _, u := range got {
			y, err := yaml.Marshal(u.Object)
			if err != nil {
				b.Fatal(err)
			}
			stream.WriteString("---\n")
			stream.Write(y)
		}
	}
	if len(objs) != 2000 {
		b.Fatalf("the repository renders %d objects, want 2,000", len(objs))
	}
	f.manifests = filepath.Join(dir, "all.yaml")
	if err := os.WriteFile(f.manifests, stream.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}

	// Namespaces first, then everything else, as the applier does.
	var nss, rest []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			nss = append(nss, o)
		} else {
			rest = append(rest, o)
		}
	}
	inParallel(b, len(nss), func(i int) { kubetest.Apply(b, env.Setup, "kustomize-controller", nss[i]) })
	inParallel(b, len(rest), func(i int) { kubetest.Apply(b, env.Setup, "kustomize-controller", rest[i]) })
	for i := range fleetScaled {
		ns := fmt.Sprintf("%s-%03d", env.Namespace, i*fleetOverlays/fleetScaled)
		if _, err := env.Client.AppsV1().Deployments(ns).Patch(context.Background(), "web", types.MergePatchType,
			[]byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{FieldManager: "kubectl"}, "scale"); err != nil {
			b.Fatal(err)
		}
	}

	installAdmissionRules(b, env, nss)

	f.kubeconfig = writeKubeconfig(b, env, filepath.Join(dir, "kubeconfig"))
	// The same repository with one label changed on every object: a
	// change that every one of the 2,000 objects goes through admission
	// for.
	for name, content := range files {
		if strings.HasSuffix(name, "kustomization.yaml") {
			files[name] = strings.Replace(content, "pairs: {tenant:", "pairs: {release: \"2\", tenant:", 1)
		}
	}
	f.changed = filepath.Join(dir, "changed")
	writeTree(b, f.changed, files)
	return f
}

// installAdmissionRules gives the fleet's cluster the admission rules a
// platform team sets: each namespace enforcing Pod Security baseline and
// warning at restricted, with a ResourceQuota (its status as the quota
// controller keeps it) and a LimitRange; three ValidatingAdmissionPolicies
// on workloads, pods and ConfigMaps, one reading a parameter.
func installAdmissionRules(b *testing.B, env *kubetest.Env, nss []*unstructured.Unstructured) {
	b.Helper()
	ctx := context.Background()
	inParallel(b, len(nss), func(i int) {
		name := nss[i].GetName()
		n, err := env.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		n.Labels["pod-security.kubernetes.io/enforce"], n.Labels["pod-security.kubernetes.io/warn"] = "baseline", "restricted"
		if _, err := env.Client.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "compute", Namespace: name},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse("40"), "requests.cpu": resource.MustParse("8"), "count/configmaps": resource.MustParse("50")}}}
		if q, err = env.Client.CoreV1().ResourceQuotas(name).Create(ctx, q, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		q.Status.Hard = q.Spec.Hard
		q.Status.Used = corev1.ResourceList{"pods": resource.MustParse("5"), "requests.cpu": resource.MustParse("500m"), "count/configmaps": resource.MustParse("5")}
		if _, err := env.Client.CoreV1().ResourceQuotas(name).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: name},
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{"cpu": resource.MustParse("2")},
				Default: corev1.ResourceList{"cpu": resource.MustParse("200m")}, DefaultRequest: corev1.ResourceList{"cpu": resource.MustParse("100m")}}}}}
		if _, err := env.Client.CoreV1().LimitRanges(name).Create(ctx, lr, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	})
	policy := func(name, resources, validation, params, paramRef string) []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, y := range []string{`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: ` + name + `}
spec:
  failurePolicy: Fail
` + params + `  matchConstraints:
    resourceRules:
    - {apiGroups: ["*"], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: [` + resources + `]}
  validations:
  - expression: "` + validation + `"
    message: "` + name + `"
`, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: ` + name + `}
spec:
  policyName: ` + name + `
  validationActions: [Deny]
` + paramRef} {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
				b.Fatal(err)
			}
			out = append(out, u)
		}
		return out
	}
	var rules []*unstructured.Unstructured
	rules = append(rules, policy("bench-replicas", "deployments", "object.spec.replicas <= 10", "", "")...)
	rules = append(rules, policy("bench-pinned", "pods", "object.spec.containers.all(c, !c.image.endsWith(':latest'))", "", "")...)
	rules = append(rules, policy("bench-level", "configmaps", "!has(object.data.level) || object.data.level in params.data.levels.split(',')",
		"  paramKind: {apiVersion: v1, kind: ConfigMap}\n", "  paramRef: {name: levels, namespace: "+env.Namespace+", parameterNotFoundAction: Deny}\n")...)
	kubetest.Apply(b, env.Setup, "platform", rules...)
	if _, err := env.Client.CoreV1().ConfigMaps(env.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "levels"}, Data: map[string]string{"levels": "debug,info,warn"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}

func inParallel(b *testing.B, n int, f func(int)) {
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// BenchmarkDiffFleet runs `driftback diff --kubeconfig` over a repository of
// 100 overlays (2,000 objects of 11 kinds in 100 namespaces) as a user runs
// it: the command's own client settings, rendering included. It reports the
// requests the command made to the apiserver. The kubectl sub-benchmark is
// the baseline: `kubectl diff --server-side` of the same 2,000 objects on
// the same apiserver (kubectl from `make bench`, on PATH).
func BenchmarkDiffFleet(b *testing.B) {
	f := newFleet(b)
	b.Run("driftback", func(b *testing.B) { f.diff(b, f.repo, fleetScaled) })
	// A change to every object: each of the 2,000 goes through the
	// cluster's admission rules (drift/admission), then the same without
	// those checks, their cost the difference.
	b.Run("driftback-every-object-changed", func(b *testing.B) { f.diff(b, f.changed, 2000) })
	b.Run("driftback-every-object-changed-without-admission-checks", func(b *testing.B) {
		admissionChecks = false
		defer func() { admissionChecks = true }()
		f.diff(b, f.changed, 2000)
	})
	b.Run("kubectl-diff-server-side", func(b *testing.B) {
		kubectl, err := exec.LookPath("kubectl")
		if err != nil {
			b.Skip("kubectl is not on PATH: `make bench` builds it; the baseline is not measured")
		}
		cmd := func(extra ...string) *exec.Cmd {
			args := append([]string{"diff", "--server-side", "--force-conflicts", "--field-manager", "kustomize-controller",
				"--kubeconfig", f.kubeconfig, "-f", f.manifests}, extra...)
			return exec.Command(kubectl, args...)
		}
		for b.Loop() {
			// Exit 1 is kubectl diff's "differences found", as here.
			out, err := cmd().CombinedOutput()
			var ee *exec.ExitError
			if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
				b.Fatalf("kubectl diff: %v\n%.2000s", err, out)
			}
		}
		// Its requests, counted from its own request log in one more run.
		b.StopTimer()
		out, _ := cmd("-v=6").CombinedOutput()
		b.ReportMetric(float64(strings.Count(string(out), `"Response"`)), "requests/op")
	})
}

// diff runs driftback diff of the fleet's repository against head, as the
// command runs, and checks that wantUpdates objects would change.
func (f *fleet) diff(b *testing.B, head string, wantUpdates int) {
	var requests atomic.Int64
	wrapKubeTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			requests.Add(1)
			return rt.RoundTrip(r)
		})
	}
	defer func() { wrapKubeTransport = nil }()
	args := []string{"diff", "--base", f.repo, "--head", head, "--kubeconfig", f.kubeconfig, "--format", "json"}
	for _, p := range f.paths {
		args = append(args, "--path", p)
	}
	var out, errOut bytes.Buffer
	for b.Loop() {
		out.Reset()
		errOut.Reset()
		if code := run(args, &out, &errOut); code != exitChanges {
			b.Fatalf("exit %d: %s", code, errOut.String())
		}
	}
	b.Logf("the last run's progress:\n%s", errOut.String())
	var rep drift.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		b.Fatal(err)
	}
	updates, findings := 0, 0
	for _, t := range rep.Targets {
		if t.LiveError != "" || len(t.Errors) > 0 {
			b.Fatalf("%s: %s %v", t.Path, t.LiveError, t.Errors)
		}
		for _, ch := range t.Changes {
			if ch.Action == drift.ActionUpdate {
				updates++
			}
			for _, d := range ch.Danger {
				if d.Reason == drift.DangerAdmissionWarning || d.Reason == drift.DangerAdmissionRefused || d.Reason == drift.DangerPodsRefused {
					findings++
				}
			}
		}
	}
	if updates != wantUpdates {
		b.Fatalf("%d objects would change, want %d", updates, wantUpdates)
	}
	// Every workload's pods run as root: restricted, the level warned
	// of, says so of each changed one.
	if admissionChecks && findings == 0 {
		b.Fatal("no admission finding: the checks did not run")
	}
	b.ReportMetric(float64(findings), "admission-findings")
	b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/op")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
