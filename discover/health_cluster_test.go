package discover_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/internal/kubetest"
)

// fluxTarget is a GitRepository and a Kustomization of it (interval 10m:
// a bound of 20 minutes).
const fluxTarget = `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: NS}
spec: {interval: 1m, url: "https://github.com/acme/gitops.git", ref: {branch: main}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: NS}
spec: {interval: 10m, path: ./apps, prune: true, sourceRef: {kind: GitRepository, name: fleet}}
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop, namespace: NS}
spec:
  project: default
  source: {repoURL: "https://github.com/acme/gitops.git", path: apps/shop}
  destination: {server: https://kubernetes.default.svc}
  syncPolicy: {automated: {}}
`

// TestAReconcilerThatFailsOrStallsIsSaid: the state of a Kustomization and
// an Application is read from the status their controllers write (written
// here as kustomize-controller and argocd-application-controller write
// it), and from the controllers' own workloads: applying, failing in the
// reconciler's own words, or stalled when it is silent for longer than its
// bound.
func TestAReconcilerThatFailsOrStallsIsSaid(t *testing.T) {
	env := kubetest.New(t)
	kubetest.InstallCRDs(t, env, kubetest.ReconcilerCRDs(t)...)
	kubetest.ArgoCDDefaultProject(t, env, env.Namespace)
	applyAll(t, env, fluxTarget)
	w, err := discover.NewWatcher(env.Config, discover.Options{Flux: true, ArgoCD: true, Namespaces: []string{env.Namespace},
		Settings: discover.Settings{On: "prod", Host: "github.com", ArgoCDNamespace: env.Namespace}, Recheck: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	ns := env.Namespace
	found := waitFound(t, w, 2)
	ks, app := found["Kustomization "+ns+"/apps"], found["Application "+ns+"/shop"]
	dyn := dynamic.NewForConfigOrDie(env.Setup)
	now := time.Now().UTC().Truncate(time.Second)
	ago := func(d time.Duration) string { return now.Add(-d).Format(time.RFC3339) }

	setStatus := func(gvr schema.GroupVersionResource, kind, name, status string) {
		t.Helper()
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(status), &u.Object); err != nil {
			t.Fatal(err)
		}
		u.SetAPIVersion(gvr.GroupVersion().String())
		u.SetKind(kind)
		u.SetName(name)
		u.SetNamespace(ns)
		if _, err := dyn.Resource(gvr).Namespace(ns).ApplyStatus(ctx, name, u, metav1.ApplyOptions{FieldManager: "controller", Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	source := func(revision string, fetched time.Duration, ready string) {
		setStatus(discover.FluxGitRepositories, "GitRepository", "fleet", `status:
  artifact: {revision: "`+revision+`", lastUpdateTime: "`+ago(fetched)+`", path: p, url: u, digest: "sha256:0"}
  conditions: [{type: Ready, status: "`+ready+`", reason: GitOperationFailed, message: "authentication required", lastTransitionTime: "`+ago(fetched)+`"}]`)
	}
	kustomization := func(ready, reason, message, applied string, reconciled time.Duration) {
		setStatus(discover.FluxKustomizations, "Kustomization", "apps", `status:
  observedGeneration: 1
  lastAppliedRevision: "`+applied+`"
  conditions: [{type: Ready, status: "`+ready+`", reason: `+reason+`, message: "`+message+`", lastTransitionTime: "`+ago(3*time.Hour)+`"}]
  history: [{digest: "sha256:1", firstReconciled: "`+ago(48*time.Hour)+`", lastReconciled: "`+ago(reconciled)+`", lastReconciledDuration: 1s, lastReconciledStatus: `+reason+`, totalReconciliations: 9}]`)
	}
	application := func(status string) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(strings.ReplaceAll(fluxTarget[strings.Index(fluxTarget, "apiVersion: argoproj.io"):], "NS", ns)+status), &u.Object); err != nil {
			t.Fatal(err)
		}
		kubetest.Apply(t, env.Setup, "argocd-application-controller", u) // Applications keep status in the object
	}
	// health waits until the watcher reads what was written last.
	health := func(f *discover.Found, want discover.HealthState, why string) discover.Health {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			h := w.Health(f, now)
			if h.State == want && strings.Contains(h.Why, why) {
				return h
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v, want %s saying %q", f.Object, h, want, why)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Applied, reconciled a minute ago.
	source("main@sha1:bbb", time.Hour, "True")
	kustomization("True", "ReconciliationSucceeded", "Applied revision: main@sha1:bbb", "main@sha1:bbb", time.Minute)
	if h := health(ks, discover.HealthApplying, ""); h.Applied != "main@sha1:bbb" || h.Behind != 0 || h.Bound != 20*time.Minute {
		t.Errorf("applying: %+v", h)
	}
	// It says it fails.
	kustomization("False", "BuildFailed", "kustomize build failed: accumulating resources", "main@sha1:aaa", time.Minute)
	if h := health(ks, discover.HealthFailing, "BuildFailed: kustomize build failed"); !h.Since.Equal(now.Add(-3 * time.Hour)) {
		t.Errorf("failing since %v, want the Ready condition's transition", h.Since)
	}
	// Its source fails: new commits are never fetched.
	source("main@sha1:bbb", time.Hour, "False")
	health(ks, discover.HealthFailing, "cannot be fetched: GitOperationFailed: authentication required")
	// Silent: the source's newest revision waits two hours, over the bound.
	source("main@sha1:ccc", 2*time.Hour, "True")
	kustomization("True", "ReconciliationSucceeded", "Applied revision: main@sha1:bbb", "main@sha1:bbb", time.Minute)
	if h := health(ks, discover.HealthStalled, "has not applied main@sha1:ccc, fetched 120m ago (it last applied main@sha1:bbb)"); h.Behind != 2*time.Hour {
		t.Errorf("behind %v, want 2h", h.Behind)
	}
	// Within the bound it is applying, and says how long the revision waited.
	source("main@sha1:ccc", 5*time.Minute, "True")
	if h := health(ks, discover.HealthApplying, ""); h.Behind != 5*time.Minute {
		t.Errorf("behind %v within the bound, want 5m", h.Behind)
	}
	// Not reconciled for three hours.
	source("main@sha1:bbb", time.Hour, "True")
	kustomization("True", "ReconciliationSucceeded", "Applied revision: main@sha1:bbb", "main@sha1:bbb", 3*time.Hour)
	health(ks, discover.HealthStalled, "kustomize-controller has not reconciled it for 3h (its interval is 10m0s)")

	// Argo CD: applying, an error condition, a failed sync, silence.
	application("status: {reconciledAt: \"" + ago(time.Minute) + "\", sync: {status: Synced, revision: abc}, operationState: {operation: {sync: {}}, phase: Succeeded, startedAt: \"" + ago(time.Hour) + "\", syncResult: {revision: abc}}}")
	if h := health(app, discover.HealthApplying, ""); h.Applied != "abc" {
		t.Errorf("Application applying: %+v", h)
	}
	application("status: {reconciledAt: \"" + ago(time.Minute) + "\", conditions: [{type: ComparisonError, message: \"rpc error: Manifest generation error\", lastTransitionTime: \"" + ago(time.Hour) + "\"}]}")
	health(app, discover.HealthFailing, "ComparisonError: rpc error: Manifest generation error")
	application("status: {reconciledAt: \"" + ago(time.Minute) + "\", operationState: {operation: {sync: {}}, phase: Failed, message: \"one or more objects failed to apply\", startedAt: \"" + ago(time.Hour) + "\", finishedAt: \"" + ago(time.Hour) + "\"}}")
	health(app, discover.HealthFailing, "its last sync ended failed: one or more objects failed to apply")
	application("status: {reconciledAt: \"" + ago(time.Hour) + "\", sync: {status: Synced, revision: abc}}")
	health(app, discover.HealthStalled, "argocd-application-controller has not reconciled it for 60m")

	// The controller's pods: none ready for longer than the bound is a
	// stall, whatever the status says (looked at an hour from now).
	now = time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	source("main@sha1:bbb", time.Hour, "True")
	kustomization("True", "ReconciliationSucceeded", "Applied revision: main@sha1:bbb", "main@sha1:bbb", time.Minute)
	health(ks, discover.HealthApplying, "")
	kube := kubernetes.NewForConfigOrDie(env.Setup)
	one := int32(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "kustomize-controller", Namespace: ns, Labels: map[string]string{"app.kubernetes.io/component": "kustomize-controller"}},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "kc"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "kc"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "ghcr.io/fluxcd/kustomize-controller"}}}}},
	}
	if d, err = kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer kube.AppsV1().Deployments(ns).Delete(context.Background(), d.Name, metav1.DeleteOptions{})
	h := health(ks, discover.HealthStalled, "Deployment "+ns+"/kustomize-controller has had no ready pod for")
	if !strings.HasSuffix(h.Why, "(1 wanted)") {
		t.Errorf("the controller's stall does not say how many pods it wants: %q", h.Why)
	}
	d.Status.Replicas, d.Status.ReadyReplicas = 1, 1
	if _, err := kube.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	health(ks, discover.HealthApplying, "")
}
