package app

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-github/v60/github"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/app/aftermerge"
	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/internal/githubfake"
	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/render"
)

// TestAMergeIsFollowedUntilLiveOrFailed: three pull requests merged into
// the production overlay, each followed as a GitHub Deployment to
// "test/prod" while the test writes what kustomize-controller and the
// deployment controller would: one the Kustomization fails to build (the
// deployment fails with its words), one applied whose pods cannot pull
// their image (it fails once the rollout's bound passes, naming the pod's
// reason), one applied and ready (live). Each deployment's status is
// written when what it says changes, never again for nothing.
func TestAMergeIsFollowedUntilLiveOrFailed(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, time.Hour, nil)
	d.discoverFlux(nil)
	ns := d.env.Namespace
	d.apply(fluxKustomization(ns, "prod", "deploy/prod"))
	d.discovered("deploy/prod")
	d.run()
	deps := d.srv.App.followDeps(context.Background())
	deps.Every, deps.Rollout = 100*time.Millisecond, 3*time.Second
	d.srv.App.follow = aftermerge.New(deps)
	d.waitFor("the drift loop to run the cluster", func() bool { return d.srv.App.drift.Watcher("test") != nil })
	dyn := dynamic.NewForConfigOrDie(d.env.Setup)

	base := d.main
	merge := func(number int, tag string, reviewed bool) plumbing.Hash {
		t.Helper()
		sha := d.commit(base, map[string]any{"deploy/prod/kustomization.yaml": strings.Replace(driftRepo["deploy/prod/kustomization.yaml"].(string), `newTag: "1.0.0"`, `newTag: "`+tag+`"`, 1)})
		if reviewed {
			d.openPR(number, base, sha, nil)
			if code := d.deliver("pull_request", fmt.Sprintf("opened-%d", number), prPayload("opened", number, sha.String())); code != http.StatusAccepted {
				t.Fatalf("opened: %d", code)
			}
			eventually(t, func() bool { return len(d.gh.Comments(fullName, number)) > 0 }, "the review's comment")
		}
		d.push(map[string]plumbing.Hash{"refs/heads/main": sha})
		if code := d.deliver("pull_request", fmt.Sprintf("merged-%d", number), mergedPayload(number, sha, base)); code != http.StatusAccepted {
			t.Fatalf("closed: %d", code)
		}
		base = sha
		return sha
	}
	kustomization := func(attempted, applied plumbing.Hash, ready, reason, message string) {
		t.Helper()
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: prod, namespace: `+ns+`}
status:
  lastAttemptedRevision: main@sha1:`+attempted.String()+`
  lastAppliedRevision: main@sha1:`+applied.String()+`
  conditions: [{type: Ready, status: "`+ready+`", reason: `+reason+`, message: "`+message+`", lastTransitionTime: "`+time.Now().UTC().Format(time.RFC3339)+`"}]`), &u.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(discover.FluxKustomizations).Namespace(ns).ApplyStatus(context.Background(), "prod", u,
			metav1.ApplyOptions{FieldManager: "kustomize-controller", Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	// applyAsFlux applies the overlay at a commit as kustomize-controller
	// does, with its labels.
	applyAsFlux := func(commit plumbing.Hash) {
		t.Helper()
		tree, err := render.GitTree(d.local, commit.String())
		if err != nil {
			t.Fatal(err)
		}
		res, err := render.New(render.DefaultOptions()).Render(context.Background(), tree, []string{"deploy/prod"})
		if err != nil {
			t.Fatal(err)
		}
		objs, err := res.Overlays[0].Objects()
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			l := o.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			l["kustomize.toolkit.fluxcd.io/name"], l["kustomize.toolkit.fluxcd.io/namespace"] = "prod", ns
			o.SetLabels(l)
		}
		kubetest.Apply(t, d.env.Config, "kustomize-controller", objs...)
	}
	// rollout writes the web Deployment's status as its controller does:
	// ready pods of the two wanted, and the Progressing condition.
	rollout := func(ready int64) {
		t.Helper()
		dep, err := d.env.Client.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dep.Status.ObservedGeneration = dep.Generation
		dep.Status.Replicas, dep.Status.UpdatedReplicas = 2, 2
		dep.Status.ReadyReplicas, dep.Status.AvailableReplicas = int32(ready), int32(ready)
		dep.Status.Conditions = nil
		if ready == 2 {
			dep.Status.Conditions = []appsv1.DeploymentCondition{
				{Type: "Available", Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: "Progressing", Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
			}
		}
		if _, err := d.env.Client.AppsV1().Deployments(ns).UpdateStatus(context.Background(), dep, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deployment := func(sha plumbing.Hash) (githubfake.Deployment, bool) {
		for _, dp := range d.gh.Deployments(fullName) {
			if dp.SHA == sha.String() {
				return dp, true
			}
		}
		return githubfake.Deployment{}, false
	}
	says := func(sha plumbing.Hash, state, text string) githubfake.Deployment {
		t.Helper()
		var last githubfake.Deployment
		eventually(t, func() bool {
			dp, ok := deployment(sha)
			last = dp
			if !ok || len(dp.Statuses) == 0 {
				return false
			}
			s := dp.Statuses[len(dp.Statuses)-1]
			return s.State == state && strings.Contains(s.Description, text)
		}, "deployment of "+sha.String()[:7]+" "+state+" saying "+text, func() string { return fmt.Sprintf("%+v", last) })
		return last
	}

	// 1. The build fails.
	first := merge(11, "1.1.0", false)
	dp := says(first, "in_progress", "Waiting for Kustomization "+ns+"/prod to apply "+first.String()[:7])
	if dp.Environment != "test/prod" {
		t.Errorf("environment %q, want test/prod", dp.Environment)
	}
	kustomization(first, d.main, "False", "BuildFailed", "kustomize build failed: accumulating resources")
	says(first, "failure", "failed to apply "+first.String()[:7]+": BuildFailed: kustomize build failed")

	// 2. Applied; its pods cannot pull their image.
	second := merge(12, "1.2.0", false)
	says(second, "in_progress", "Waiting for")
	applyAsFlux(second)
	rollout(0)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-7f9c-x2k4q", Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example.com/web:1.2.0"}}}}
	if pod, err := d.env.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	} else {
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Image: "registry.example.com/web:1.2.0",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "registry.example.com/web:1.2.0"`}}}}
		if _, err := d.env.Client.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kustomization(second, second, "True", "ReconciliationSucceeded", "Applied revision: main@sha1:"+second.String())
	dp = says(second, "failure", "Deployment/"+ns+"/web not ready 3s after the apply")
	if last := dp.Statuses[len(dp.Statuses)-1].Description; !strings.Contains(last, "ImagePullBackOff") {
		t.Errorf("the failure does not say why the pods wait: %q", last)
	}

	// 3. Applied and ready.
	third := merge(13, "1.3.0", true)
	says(third, "in_progress", "Waiting for")
	applyAsFlux(third)
	rollout(0)
	kustomization(third, third, "True", "ReconciliationSucceeded", "Applied revision: main@sha1:"+third.String())
	says(third, "in_progress", "Applied "+third.String()[:7]+"; waiting for the workloads it changed")
	rollout(2)
	dp = says(third, "success", "Live on test at ")
	if !strings.Contains(dp.Statuses[len(dp.Statuses)-1].Description, "1/1 workloads ready, 2/2 pods") {
		t.Errorf("success does not count the workloads: %+v", dp.Statuses)
	}
	for i := 1; i < len(dp.Statuses); i++ {
		if dp.Statuses[i].State == dp.Statuses[i-1].State && dp.Statuses[i].Description == dp.Statuses[i-1].Description {
			t.Errorf("a status written again for nothing: %+v", dp.Statuses)
		}
	}
	// The review's comment says it too, where reviewers look.
	eventually(t, func() bool {
		body := d.gh.Comments(fullName, 13)[0].Body
		return strings.Contains(body, "### After the merge") && strings.Contains(body, "| `test/prod` | **live**: Live on test at ")
	}, "the comment to say the merge is live", func() string { return d.gh.Comments(fullName, 13)[0].Body })
	// What the review predicted is what the reconciler did: measured.
	if body := d.gh.Comments(fullName, 13)[0].Body; !strings.Contains(body, "1/1 workloads ready, 2/2 pods; as predicted (") {
		t.Errorf("the comment does not say the prediction held:\n%s", body)
	}
	if body := d.gh.Comments(fullName, 13)[0].Body; strings.Count(body, "### After the merge") != 1 {
		t.Errorf("the comment says what merging did more than once:\n%s", body)
	}
	if n := len(d.gh.Deployments(fullName)); n != 3 {
		t.Errorf("%d deployments, want one per merge", n)
	}

	// The same merge delivered again (GitHub redelivers) writes nothing:
	// its deployment has ended.
	statuses := len(dp.Statuses)
	if code := d.deliver("pull_request", "merged-13-again", mergedPayload(13, third, third)); code != http.StatusAccepted {
		t.Fatalf("closed again: %d", code)
	}
	d.waitFor("the redelivery's work to end", d.queueIdle)
	if dp, _ := deployment(third); len(dp.Statuses) != statuses || len(d.gh.Deployments(fullName)) != 3 {
		t.Errorf("a redelivered merge wrote again: %+v", d.gh.Deployments(fullName))
	}

	// An App without Deployments: write still says it in the comment. The
	// reconciler says it applied the merge, yet the Deployment the review
	// predicted would change did not: a miss, named and counted.
	d.gh.Deny("POST", "/repos/"+fullName+"/deployments")
	fourth := merge(14, "1.4.0", true)
	kustomization(fourth, fourth, "True", "ReconciliationSucceeded", "Applied revision: main@sha1:"+fourth.String())
	eventually(t, func() bool {
		return strings.Contains(d.gh.Comments(fullName, 14)[0].Body, "| `test/prod` | **live**: Live on test at ")
	}, "the comment to say the merge is live without a deployment", func() string { return d.gh.Comments(fullName, 14)[0].Body })
	if body := d.gh.Comments(fullName, 14)[0].Body; !strings.Contains(body, "prediction missed predicted but unchanged: Deployment/"+ns+"/web") {
		t.Errorf("the comment does not name the prediction's miss:\n%s", body)
	}
	if n := counter(t, d.srv.Metrics, "driftback_prediction_objects_total", map[string]string{"outcome": "unchanged"}); n < 1 {
		t.Errorf("driftback_prediction_objects_total{outcome=unchanged} = %v, want the miss counted", n)
	}
	if _, ok := deployment(fourth); ok {
		t.Error("a deployment GitHub refused exists")
	}
}

// TestAMergeIsFollowedThroughArgoCD: the production overlay is an Argo CD
// Application's. A merge it syncs and whose health it reports Healthy is
// live only once the controller compared the cluster with the merge after
// the sync; one whose sync fails says Argo CD's words.
func TestAMergeIsFollowedThroughArgoCD(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, time.Hour, nil)
	d.stop()
	ns := d.env.Namespace
	cl := d.cfg.Clusters["test"]
	cl.Discover = &config.Discover{ArgoCD: true, Namespaces: []string{ns}, ArgoCDNamespace: ns}
	d.cfg.Clusters["test"] = cl
	d.start()
	kubetest.InstallCRDs(t, d.env, kubetest.ReconcilerCRDs(t)...)
	kubetest.ArgoCDDefaultProject(t, d.env, ns)
	host, _, _ := strings.Cut(string(discover.HostOf(d.gh.URL())), ":")
	application := func(status string) {
		t.Helper()
		d.apply(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: prod, namespace: NS}
spec:
  project: default
  source: {repoURL: 'https://` + host + `/acme/gitops', path: deploy/prod}
  destination: {server: https://kubernetes.default.svc, namespace: NS}
  syncPolicy: {automated: {}}
` + status)
	}
	application("")
	d.discovered("deploy/prod")
	d.run()
	deps := d.srv.App.followDeps(context.Background())
	deps.Every, deps.Rollout = 100*time.Millisecond, 3*time.Second
	d.srv.App.follow = aftermerge.New(deps)
	d.waitFor("the drift loop to run the cluster", func() bool { return d.srv.App.drift.Watcher("test") != nil })

	base := d.main
	merge := func(number int, tag string) plumbing.Hash {
		t.Helper()
		sha := d.commit(base, map[string]any{"deploy/prod/kustomization.yaml": strings.Replace(driftRepo["deploy/prod/kustomization.yaml"].(string), `newTag: "1.0.0"`, `newTag: "`+tag+`"`, 1)})
		d.push(map[string]plumbing.Hash{"refs/heads/main": sha})
		if code := d.deliver("pull_request", fmt.Sprintf("merged-%d", number), mergedPayload(number, sha, base)); code != http.StatusAccepted {
			t.Fatalf("closed: %d", code)
		}
		base = sha
		return sha
	}
	latest := func(sha plumbing.Hash) githubfake.DeploymentStatus {
		for _, dp := range d.gh.Deployments(fullName) {
			if dp.SHA == sha.String() && len(dp.Statuses) > 0 {
				return dp.Statuses[len(dp.Statuses)-1]
			}
		}
		return githubfake.DeploymentStatus{}
	}
	says := func(sha plumbing.Hash, state, text string) {
		t.Helper()
		eventually(t, func() bool { s := latest(sha); return s.State == state && strings.Contains(s.Description, text) },
			"deployment of "+sha.String()[:7]+" "+state+" saying "+text, func() string { return fmt.Sprintf("%+v", latest(sha)) })
	}
	at := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339) }

	// Synced, but the health is still of the commit before: not live yet.
	first := merge(21, "2.0.0")
	says(first, "in_progress", "Waiting for Application "+ns+"/prod to apply")
	application(`status:
  reconciledAt: "` + at(-time.Minute) + `"
  sync: {status: Synced, revision: ` + first.String() + `}
  health: {status: Healthy}
  operationState: {operation: {sync: {revision: ` + first.String() + `}}, phase: Succeeded, startedAt: "` + at(-2*time.Second) + `", finishedAt: "` + at(0) + `", syncResult: {revision: ` + first.String() + `}}`)
	says(first, "in_progress", "Applied "+first.String()[:7])
	time.Sleep(500 * time.Millisecond) // several looks
	if s := latest(first); s.State != "in_progress" {
		t.Fatalf("live before Argo CD compared the cluster with the merge: %+v", s)
	}
	// Compared after the sync: live.
	application(`status:
  reconciledAt: "` + at(time.Minute) + `"
  sync: {status: Synced, revision: ` + first.String() + `}
  health: {status: Healthy}
  operationState: {operation: {sync: {revision: ` + first.String() + `}}, phase: Succeeded, startedAt: "` + at(-2*time.Second) + `", finishedAt: "` + at(0) + `", syncResult: {revision: ` + first.String() + `}}`)
	says(first, "success", "Live on test at ")

	// The sync fails.
	second := merge(22, "2.1.0")
	says(second, "in_progress", "Waiting for")
	application(`status:
  reconciledAt: "` + at(0) + `"
  sync: {status: OutOfSync, revision: ` + second.String() + `}
  operationState: {operation: {sync: {revision: ` + second.String() + `}}, phase: Failed, message: "one or more objects failed to apply, reason: admission webhook denied the request", startedAt: "` + at(0) + `", finishedAt: "` + at(0) + `"}`)
	says(second, "failure", "/prod failed to apply "+second.String()[:7]+": its sync ended failed: one or more objects")
}

// mergedPayload is GitHub's event for a pull request merged as merge into
// main, whose base was base.
func mergedPayload(number int, merge, base plumbing.Hash) *github.PullRequestEvent {
	ev := prPayload("closed", number, merge.String())
	ev.PullRequest.Merged, ev.PullRequest.MergeCommitSHA = github.Bool(true), github.String(merge.String())
	ev.PullRequest.Base = &github.PullRequestBranch{SHA: github.String(base.String()), Ref: github.String("main")}
	ev.PullRequest.MergedAt = &github.Timestamp{Time: time.Now()}
	return ev
}
