package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiffSaysWhatARevertDoesNotRestore: the command line says, as serve
// does, what moving back to earlier state does not bring back, from the
// local repository's history: web's image goes back to 1.0 across a
// migration Job that completed since 2.0 went live; a Job that completed
// before is not named.
func TestDiffSaysWhatARevertDoesNotRestore(t *testing.T) {
	repo := t.TempDir()
	web := func(image string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  selector: {matchLabels: {app: web}}\n" +
			"  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: '" + image + "'}]\n"
	}
	commit := func(msg string, files map[string]string) {
		writeTree(t, repo, files)
		gitCmd(t, repo, "add", "-A")
		gitCmd(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", msg)
	}
	gitCmd(t, repo, "init", "-q", "-b", "main")
	commit("web 1.0", map[string]string{"app/kustomization.yaml": "resources: [web.yaml]\n", "app/web.yaml": web("registry.example.com/web:1.0")})
	commit("web 2.0", map[string]string{"app/web.yaml": web("registry.example.com/web:2.0")})
	commit("Revert \"web 2.0\"", map[string]string{"app/web.yaml": web("registry.example.com/web:1.0")})

	live := t.TempDir()
	if err := os.WriteFile(filepath.Join(live, "live.yaml"), []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  managedFields:
  - manager: kustomize-controller
    operation: Apply
    apiVersion: apps/v1
    time: "2026-11-01T10:00:00Z"
    fieldsType: FieldsV1
    fieldsV1: {"f:spec": {"f:selector": {}, "f:template": {"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: 'registry.example.com/web:2.0'}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: migrate-db, namespace: shop}
spec:
  template: {spec: {restartPolicy: Never, containers: [{name: m, image: 'registry.example.com/migrate:2.0'}]}}
status: {completionTime: "2026-11-02T08:00:00Z"}
---
apiVersion: batch/v1
kind: Job
metadata: {name: old-backfill, namespace: shop}
spec:
  template: {spec: {restartPolicy: Never, containers: [{name: b, image: 'registry.example.com/backfill:1.0'}]}}
status: {completionTime: "2026-10-01T08:00:00Z"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "diff", "--repo", repo, "--base", "HEAD~1", "--head", "HEAD", "--live", live, "--format", "markdown")
	if code == exitError {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"**rollback-across-job**", "migrate-db (completed 2026-11-02 08:00 UTC)", "Revert \"web 2.0\""} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "old-backfill") {
		t.Errorf("a Job that completed before the live image was set is named:\n%s", out)
	}
}

// TestDiffSaysARestoredCRDComesBackEmpty: reverting the commit that removed
// a CRD gives back the type, none of its custom resources; the command
// line says so as serve does, with the cluster read and without it.
func TestDiffSaysARestoredCRDComesBackEmpty(t *testing.T) {
	repo := t.TempDir()
	commit := func(msg string, files map[string]string) {
		writeTree(t, repo, files)
		gitCmd(t, repo, "add", "-A")
		gitCmd(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", msg)
	}
	crd := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec:\n  group: example.com\n  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n"
	gitCmd(t, repo, "init", "-q", "-b", "main")
	// A Secret too, which no dump holds: the restore is still told.
	commit("widgets", map[string]string{"app/kustomization.yaml": "resources: [crd.yaml, cm.yaml, s.yaml]\n", "app/crd.yaml": crd,
		"app/s.yaml":  "apiVersion: v1\nkind: Secret\nmetadata: {name: token, namespace: shop}\nstringData: {t: x}\n",
		"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\ndata: {a: b}\n"})
	commit("Remove widgets", map[string]string{"app/kustomization.yaml": "resources: [cm.yaml, s.yaml]\n"})
	commit("Revert \"Remove widgets\"", map[string]string{"app/kustomization.yaml": "resources: [crd.yaml, cm.yaml, s.yaml]\n"})
	live := t.TempDir()
	writeFile(t, filepath.Join(live, "live.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\ndata: {a: b}\n")
	// The dump read CRDs whole: there is none live.
	writeFile(t, filepath.Join(live, "driftback-dump.yaml"), "kinds: [ConfigMap, apiextensions.k8s.io/CustomResourceDefinition]\n")
	for _, args := range [][]string{{"--live", live}, {}} {
		out, errOut, code := runCLI(t, append([]string{"diff", "--repo", repo, "--base", "HEAD~1", "--head", "HEAD", "--format", "markdown"}, args...)...)
		if code == exitError {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		if !strings.Contains(out, "**restore-not-rollback**") || !strings.Contains(out, "restoring it brings back an empty crd") {
			t.Errorf("%v: the report does not say the restored CRD comes back empty:\n%s", args, out)
		}
	}
}
