package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAChangeToASharedBaseIsOneStory: a base that 300 tenants' overlays
// share (each in its own namespace) changes an image; the pull request's
// comment tells the change once, for the 300 targets, in one part, as
// rendered by kustomize.
func TestAChangeToASharedBaseIsOneStory(t *testing.T) {
	dir := t.TempDir()
	for side, image := range map[string]string{"base": "1.27", "head": "1.28"} {
		files := map[string]string{
			"base/kustomization.yaml": "resources: [web.yaml]\n",
			"base/web.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n" +
				"  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: \"nginx:" + image + "\"}]\n",
		}
		for i := range 300 {
			files[fmt.Sprintf("tenants/t%03d/kustomization.yaml", i)] = fmt.Sprintf("namespace: t%03d\nresources: [../../base]\n", i)
		}
		writeTree(t, filepath.Join(dir, side), files)
	}
	start := time.Now()
	out, errOut, code := runCLI(t, "diff", "--base", filepath.Join(dir, "base"), "--head", filepath.Join(dir, "head"), "--format", "markdown")
	t.Logf("300 overlays at base and head in %s", time.Since(start))
	if code != exitChanges {
		t.Fatalf("exit %d, want %d (changes)\n%s", code, exitChanges, errOut)
	}
	for _, want := range []string{
		"| `tenants/t000` and 299 more targets with the same changes (Git only: cluster not read) | 0 | 1 | 0 | 0 | 0 | ? |",
		"### `tenants/t000` and 299 more targets with the same changes",
		"<details><summary>The 300 targets</summary>",
		"- `tenants/t299`\n",
		"`.spec.template.spec.containers[name=\"web\"].image`: Git `\"nginx:1.27\"` → `\"nginx:1.28\"`",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the comment does not say %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "Deployment/t"); n != 1 {
		t.Errorf("the Deployment is told %d times, want once", n)
	}
	if strings.Contains(out, "(part 1 of") || len(out) > 65536 {
		t.Errorf("the comment is %d characters, in parts", len(out))
	}
}
