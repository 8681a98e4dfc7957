package app

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/internal/githubfake"
)

const (
	rbPVC = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: NAME}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n"
	rbCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.rollback.example.com}
spec:
  group: rollback.example.com
  names: {kind: Gizmo, plural: gizmos, singular: gizmo, listKind: GizmoList}
  scope: Namespaced
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`
	rbWeb = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: 'IMAGE'}]}\n"
)

func pvcNamed(name string) string { return strings.ReplaceAll(rbPVC, "NAME", name) }

// TestRevertSaysWhatItDoesNotRestore: Git history and the cluster say what a
// revert cannot bring back. A claim recreated next to a Released volume
// that kept its data, a claim whose volume is gone, a CRD restored after the
// commit that removed it (with the count driftback gave then), and an image
// rolled back across a Job that ran since; a brand-new claim is none of these.
func TestRevertSaysWhatItDoesNotRestore(t *testing.T) {
	t.Parallel()
	// The scope names PersistentVolume: finding the volume an earlier claim
	// left reads every volume.
	w := newWorld(t, func(c *config.Config) {
		c.Targets = []config.Target{{Name: "app", Repo: fullName, Path: "app", Cluster: "test",
			Policy: config.Policy{AckLabel: config.DefaultAckLabel}, Scope: config.TargetScope{ClusterKinds: []string{"CustomResourceDefinition.apiextensions.k8s.io", "PersistentVolume"}}}}
		c.Targets[0].Policy.DriftDefaults()
	})
	ns := w.env.Namespace
	files := map[string]any{
		"app/kustomization.yaml": "namespace: NS\nresources: [cache.yaml, data.yaml, gizmos.yaml, web.yaml]\n",
		"app/cache.yaml":         pvcNamed("cache"),
		"app/data.yaml":          pvcNamed("data"),
		"app/gizmos.yaml":        rbCRD,
		"app/web.yaml":           strings.Replace(rbWeb, "IMAGE", "registry.example.com/web:1.0", 1),
	}
	first := w.commit(plumbing.ZeroHash, files)
	upgrade := w.commit(first, map[string]any{"app/web.yaml": strings.Replace(rbWeb, "IMAGE", "registry.example.com/web:2.0", 1)})
	removal := w.commit(upgrade, map[string]any{
		"app/kustomization.yaml": "namespace: NS\nresources: [web.yaml]\n",
		"app/cache.yaml":         nil, "app/data.yaml": nil, "app/gizmos.yaml": nil,
	})
	// The pull request that removed them, and what driftback counted on it.
	w.gh.SetPull(fullName, githubfake.Pull{Number: 5, Title: "drop storage", User: "dev", HeadSHA: "feedface", BaseSHA: upgrade.String(),
		BaseRef: "main", State: "closed", Merged: true, Commits: []string{removal.String()}})
	w.gh.AddComment(fullName, 5, githubfake.Slug+"[bot]", "<!-- driftback:comment part=1 of=1 -->\n### ⚠️ Dangers (1)\n\n- **crd-removal** …\n"+
		"<!-- driftback:lost kind=CustomResourceDefinition name=gizmos.rollback.example.com count=7 -->\n")

	// The cluster now: web at 2.0 since the upgrade, a migration that ran
	// after it, the old data claim's volume kept by its Retain policy, the
	// cache claim's volume gone.
	w.apply("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: NS}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: 'registry.example.com/web:2.0'}]}\n")
	ctx := context.Background()
	w.applyJob(ctx, "migrate-db", time.Now().Add(time.Minute))
	w.applyJob(ctx, "old-backfill", time.Now().Add(-time.Hour)) // before 2.0 went live: not across it
	w.apply(`apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-data-` + ns + `}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: /tmp/data}
  claimRef: {namespace: NS, name: data, uid: 00000000-0000-0000-0000-000000000001}`)
	pv, err := w.env.Client.CoreV1().PersistentVolumes().Get(ctx, "pv-data-"+ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv.Status.Phase = "Released"
	if _, err := w.env.Client.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = w.env.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})

	// The revert: storage back, web back to 1.0; and a claim never seen.
	w.message = "Revert \"drop storage\"\n\nThis reverts commit " + removal.String() + ".\n"
	head := w.commit(removal, map[string]any{
		"app/kustomization.yaml": "namespace: NS\nresources: [cache.yaml, data.yaml, gizmos.yaml, web.yaml, scratch.yaml]\n",
		"app/cache.yaml":         pvcNamed("cache"), "app/data.yaml": pvcNamed("data"), "app/gizmos.yaml": rbCRD,
		"app/scratch.yaml": pvcNamed("scratch"),
		"app/web.yaml":     strings.Replace(rbWeb, "IMAGE", "registry.example.com/web:1.0", 1),
	})
	w.openPR(6, removal, head, nil)
	if code := w.deliver("pull_request", "d-revert", prPayload("opened", 6, head.String())); code != http.StatusAccepted {
		t.Fatalf("opened: %d", code)
	}
	w.waitChecks(head.String(), 2)
	body := w.gh.Comments(fullName, 6)[0].Body
	for _, s := range []string{
		"**restore-not-rollback** `PersistentVolumeClaim/" + ns + "/data`", "PersistentVolume pv-data-" + ns + " (Released, reclaim Retain)", "spec.volumeName",
		"**restore-not-rollback** `PersistentVolumeClaim/" + ns + "/cache`", "the claim was removed in " + removal.String()[:12], "the new claim starts empty, the old data is gone",
		"**restore-not-rollback** `CustomResourceDefinition/gizmos.rollback.example.com`", "the 7 custom resources deleted with it then",
		"**rollback-across-job** `Deployment/" + ns + "/web`", "registry.example.com/web:1.0", "migrate-db (completed ",
		"#### What this revert does not restore", "This pull request reverts Revert \"drop storage\"",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the comment does not say %q:\n%s", s, body)
		}
	}
	if strings.Contains(body, "old-backfill") {
		t.Errorf("a Job that completed before the live image was set is said to be crossed:\n%s", body)
	}
	if strings.Contains(body, "PersistentVolumeClaim/"+ns+"/scratch`**") || strings.Count(body, "**restore-not-rollback**") != 6 {
		t.Errorf("a brand-new claim is no restore; want three restore-not-rollback dangers, each in the list and on its object:\n%s", body)
	}
}

// applyJob creates a Job that completed at done, as the Job controller
// would have recorded it (envtest runs no controllers).
func (w *world) applyJob(ctx context.Context, name string, done time.Time) *batchv1.Job {
	w.t.Helper()
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.env.Namespace},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "migrate", Image: "registry.example.com/migrate:2.0"}}}}}}
	j, err := w.env.Client.BatchV1().Jobs(w.env.Namespace).Create(ctx, j, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	start, end := metav1.NewTime(done.Add(-30*time.Second)), metav1.NewTime(done)
	j.Status = batchv1.JobStatus{StartTime: &start, CompletionTime: &end, Succeeded: 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: end},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: end},
		}}
	if j, err = w.env.Client.BatchV1().Jobs(w.env.Namespace).UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	return j
}
