package main

import (
	"encoding/json"
	"flag"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/report/jsonreport"
)

var update = flag.Bool("update", false, "rewrite the golden files of driftback's own reports")

const demoDir = "../../fixtures/demo"

// canaries are the Secret values of the demo, in base, head and live (the live
// dump holds the base value, base64-encoded as the API returns it).
var canaries = []string{"DEMO-CANARY", "REVNTy1DQU5BUlk"}

// TestDiffDemo is the quick-start command: the demo's pull request against its
// live dump. The markdown is the comment the bot posts; both formats are
// golden, and the test also states what a reader must find in them.
func TestDiffDemo(t *testing.T) {
	for _, format := range []string{"markdown", "json"} {
		t.Run(format, func(t *testing.T) {
			out, errOut, code := runCLI(t, "diff", "--base", demoDir+"/base", "--head", demoDir+"/pr", "--live", demoDir+"/live", "--format", format)
			if code != exitChanges {
				t.Fatalf("exit %d, want %d (changes found); stderr:\n%s", code, exitChanges, errOut)
			}
			for _, c := range canaries {
				if strings.Contains(out, c) || strings.Contains(errOut, c) {
					t.Errorf("a Secret value (%s…) appears in the %s output", c, format)
				}
			}
			// The comment's golden is docs/demo-comment.md, which GitHub
			// renders as it renders the comment.
			golden := map[string]string{"markdown": filepath.Join("..", "..", "docs", "demo-comment.md"), "json": filepath.Join("testdata", "demo.json")}[format]
			if *update {
				if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), out); diff != "" {
				t.Errorf("%s report differs from %s (-want +got):\n%s", format, golden, diff)
			}
		})
	}

	out, _, _ := runCLI(t, "diff", "--base", demoDir+"/base", "--head", demoDir+"/pr", "--live", demoDir+"/live", "--format", "markdown")
	mustSay := []string{
		// Sections, in order: verdict, summary, dangers, then each target's objects.
		"⚠️ **5 dangers to review**: 3 losing data, 1 failing the sync, 1 granting privilege.",
		"| `apps/shop/overlays/production` | 1 | 2 | 4 | 4 | **4** | **1** |",
		"### ⚠️ Dangers this pull request brings (5)",
		"### `apps/shop/overlays/production`",
		"<details><summary>✏️ update <code>Deployment/shop-prod/web</code>",
		"### `apps/shop/overlays/staging`",
		// Each danger with its blast radius from the live dump, most severe
		// first, and what is lost named: the hand-made ones first.
		"1. data lost · **crd-removal** `CustomResourceDefinition/widgets.example.com`", "3 custom resources in 2 namespaces",
		"   - `Widget/shop-staging/red`: not in Git; made by kubectl-create",
		"   - `Widget/shop-prod/blue`: in Git; made by kustomize-controller",
		"**namespace-removal** `Namespace/shop-preview`", "3 objects (1 PersistentVolumeClaim, bound to no volume, 2 ConfigMaps)",
		"   - `ConfigMap/shop-preview/preview-notes`: not in Git; made by kubectl-create",
		"   - `PersistentVolumeClaim/shop-preview/preview-db`: not in Git; made by kubectl-create",
		"**pvc-removal** `PersistentVolumeClaim/shop-prod/cache`", "the claim is bound to pv-cache (5Gi, Delete): its data is deleted",
		"4. the sync fails · **immutable-field** `PersistentVolumeClaim/shop-prod/uploads`",
		"5. privilege · **rbac-escalation** `ClusterRole/shop-debug`",
		// Inside an object, its danger is pointed at, not said again.
		"⚠️ danger 1 above: **crd-removal**.",
		// Each field tagged with what it is, Git → live, with who and when.
		"changed by this PR `.spec.template.spec.containers[name=\"web\"].image`: Git `\"ghcr.io/example/shop-web:1.4.0\"` → `\"ghcr.io/example/shop-web:1.5.0\"`",
		"↩️ live change a sync reverts `.spec.replicas`: a sync after merging sets it from live `5` (kubectl scale) back to Git's `3`; this pull request does not change it",
		"📝 codifies a live change `.spec.template.spec.containers[name=\"web\"].env[name=\"LOG_LEVEL\"].value`: Git `\"info\"` → `\"debug\"`, the live value (kubectl-edit, 2026-11-29 16:08 UTC)",
		// A created object shows what it grants.
		"<details><summary>rendered YAML</summary>\n\n```yaml\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole",
		// Secrets: keys and what happened to them, never values, said once.
		"Secret keys changed: `refresh` (added), `token` (values hidden)",
		// The object counts add up: 7 + 3 change, 1 stays as it is live.
		"What a sync does after merging (7 objects):", "What a sync does after merging (3 objects):", "Unchanged on the cluster, while Git changes (1 object):",
	}
	last := -1
	for i, s := range mustSay {
		at := strings.Index(out, s)
		if at < 0 {
			t.Errorf("the demo comment does not say %q", s)
			continue
		}
		if i < 6 && at < last {
			t.Errorf("section %q is out of order", s)
		}
		if i < 6 {
			last = at
		}
	}
	// One object, one story: each object and field once per target; fields
	// the applier owns live carry no owner.
	// Each danger sentence is said once, and the Secret's keys once.
	for s, want := range map[string]int{"<code>Deployment/shop-prod/web</code>": 1, "<code>Deployment/shop-staging/web</code>": 1, ".spec.replicas": 1, "LOG_LEVEL": 1,
		"every sync resets the autoscaler's choice": 2, "removing the CRD deletes every Widget": 1, "`refresh`": 1,
		// Fields the applier owns live carry no owner.
		"(kustomize-controller": 0} {
		if n := strings.Count(out, s); n != want {
			t.Errorf("%q appears %d times in the demo comment, want %d", s, n, want)
		}
	}
	// The HPA's replicas (kube-controller-manager through scale) are not
	// drift; Git pinning them under the HPA, as the base did already, is
	// noted in each overlay, apart and not counted.
	before := out[strings.Index(out, "Already true before this pull request (2): not counted above"):]
	for _, s := range []string{"**autoscaled-replicas** `Deployment/shop-prod/api`", "**autoscaled-replicas** `Deployment/shop-staging/api`", "HorizontalPodAutoscaler/api (min 2, max 10 replicas)"} {
		if !strings.Contains(before, s) {
			t.Errorf("the demo comment's note of what was true before does not say %q", s)
		}
	}
	if strings.Contains(out, "<code>Deployment/shop-prod/api</code>") {
		t.Errorf("api, whose only danger was true before, is listed among the objects")
	}
	if strings.Contains(out, "✏️ update <code>Deployment/shop-prod/api</code>") {
		t.Errorf("the HPA-owned replicas of api show up as a change")
	}
}

func TestDiffCommandErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		says string
	}{
		{"no base", []string{"diff", "--head", demoDir + "/pr"}, "give --base and --head"},
		{"both live sources", []string{"diff", "--base", demoDir + "/base", "--head", demoDir + "/pr", "--live", "x", "--kubeconfig", "y"}, "not both"},
		{"a bad format", []string{"diff", "--base", demoDir + "/base", "--head", demoDir + "/pr", "--format", "xml"}, "--format must be"},
		{"dry-run without a cluster", []string{"diff", "--base", demoDir + "/base", "--head", demoDir + "/pr", "--mode", "dry-run"}, "needs --kubeconfig"},
		{"a live dir that does not exist", []string{"diff", "--base", demoDir + "/base", "--head", demoDir + "/pr", "--live", "/does/not/exist"}, "no such file"},
		{"a mistyped overlay", []string{"diff", "--base", demoDir + "/base", "--head", demoDir + "/pr", "--path", "apps/shop/overlays/prod"},
			"--path apps/shop/overlays/prod: no such directory at base or head; the overlays are: apps/shop/overlays/production, apps/shop/overlays/staging, platform/crds"},
		{"a directory without a kustomization", []string{"diff", "--base", demoDir + "/base", "--head", demoDir + "/pr", "--path", "apps/shop"},
			"--path apps/shop: no kustomization at base or head"},
		{"a stray argument", []string{"diff", "--base", demoDir + "/base", "--head", demoDir + "/pr", "apps/shop/overlays/production"},
			`unexpected argument "apps/shop/overlays/production"`},
		{"a commit a shallow checkout lacks", []string{"diff", "--repo", filepath.Join("..", ".."), "--base", strings.Repeat("1", 40), "--head", "HEAD"},
			"the commit is not in the repository; fetch it (git fetch origin " + strings.Repeat("1", 40) + "), or in GitHub Actions check out with fetch-depth: 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, tc.args...)
			if code != exitError || !strings.Contains(errOut, tc.says) {
				t.Errorf("exit %d, stderr %q; want exit 2 saying %q", code, errOut, tc.says)
			}
		})
	}
}

// TestDiffWithoutCluster proves that without a cluster the report still says
// what the pull request changes in Git, and says why the cluster is missing.
func TestDiffWithoutCluster(t *testing.T) {
	out, errOut, code := runCLI(t, "diff", "--base", demoDir+"/base", "--head", demoDir+"/pr", "--format", "markdown")
	if code != exitChanges {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, s := range []string{"Git only: cluster not read", "no cluster given", "What the pull request changes", "🗑️ delete <code>CustomResourceDefinition/widgets.example.com</code>"} {
		if !strings.Contains(out, s) {
			t.Errorf("output does not say %q", s)
		}
	}
}

// TestDiffAtRefs proves --repo with --base and --head refs reads both commits
// from the object store and reports exactly what the two directories give.
func TestDiffAtRefs(t *testing.T) {
	repo := t.TempDir()
	gitCmd(t, repo, "init", "-q", "-b", "main")
	commitTree := func(src, msg string) {
		t.Helper()
		entries, _ := os.ReadDir(repo)
		for _, e := range entries {
			if e.Name() != ".git" {
				if err := os.RemoveAll(filepath.Join(repo, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := os.CopyFS(repo, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		gitCmd(t, repo, "add", "-A")
		gitCmd(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", msg)
	}
	commitTree(filepath.Join(demoDir, "base"), "base")
	gitCmd(t, repo, "branch", "base-branch")
	commitTree(filepath.Join(demoDir, "pr"), "pr")
	// The working tree is then emptied: only the object store can answer.
	if err := os.RemoveAll(filepath.Join(repo, "apps")); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "diff", "--repo", repo, "--base", "base-branch", "--head", "main", "--live", demoDir+"/live", "--format", "markdown")
	if code != exitChanges {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want, err := os.ReadFile(filepath.Join("..", "..", "docs", "demo-comment.md"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), out); diff != "" {
		t.Errorf("at refs (-want +got):\n%s", diff)
	}
}

// TestDemoJSONKeepsItsPromises states what the JSON schema promises, read
// from the demo's report itself rather than from a golden file the code
// under test can rewrite: every Secret field hidden, each danger with its
// reason and blast radius, the fields a sync reverts flagged with who set
// them, and every list present.
func TestDemoJSONKeepsItsPromises(t *testing.T) {
	out, errOut, code := runCLI(t, "diff", "--base", demoDir+"/base", "--head", demoDir+"/pr", "--live", demoDir+"/live", "--format", "json")
	if code != exitChanges {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep drift.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"targets", "errors"} {
		if _, ok := raw[key].([]any); !ok {
			t.Errorf("%q is not a list: %v", key, raw[key])
		}
	}
	// The schema as docs/cli.md documents it, read from the JSON itself: a
	// renamed key or tag fails here even where the Go types would follow.
	tags := map[string]int{}
	targets, _ := raw["targets"].([]any)
	for _, tg := range targets {
		tg, _ := tg.(map[string]any)
		for _, list := range []string{"changes", "drift", "pr"} {
			changes, ok := tg[list].([]any)
			if !ok && tg[list] != nil {
				t.Errorf("target %v: %q is not a list", tg["path"], list)
			}
			for _, ch := range changes {
				ch, _ := ch.(map[string]any)
				fields, _ := ch["fields"].([]any)
				for _, f := range fields {
					f, _ := f.(map[string]any)
					if list == "changes" {
						tag, _ := f["kind"].(string)
						tags[tag]++
						if tag != "pr" && tag != "overwrites" && tag != "codifies" && tag != "drift" {
							t.Errorf("%s %v: field tag %q is none of pr, overwrites, codifies, drift", ch["name"], f["path"], tag)
						}
					}
					if ch["kind"] != "Secret" {
						continue
					}
					for _, k := range []string{"base", "desired", "live"} {
						if v, ok := f[k]; ok && v != nil && v != "(hidden)" { // null: no value on that side
							t.Errorf("Secret %s %v: %q shows %v", ch["name"], f["path"], k, v)
						}
					}
				}
			}
		}
	}
	if tags["pr"] == 0 || tags["codifies"] != 1 || tags["drift"] != 1 {
		t.Errorf("field tags %v: want the pull request's own changes, one field it codifies and one drift it leaves", tags)
	}
	dangers := map[drift.DangerReason]int{}
	secretFields := 0
	var reverted, codified []object.Field
	for _, tg := range rep.Targets {
		for _, list := range [][]drift.Change{tg.Changes, tg.Drift, tg.PR} {
			for _, ch := range list {
				if ch.Kind == "Secret" {
					if !ch.Secret {
						t.Errorf("%s is not marked secret", ch.Ref())
					}
					for _, f := range ch.Fields {
						secretFields++
						if !f.Hidden || (f.Live != nil && f.Live != "(hidden)") || (f.Desired != nil && f.Desired != "(hidden)") || (f.Base != nil && f.Base != "(hidden)") {
							t.Errorf("%s %s shows a value: %+v", ch.Ref(), f.Path, f)
						}
					}
				}
			}
		}
		for _, ch := range tg.Changes {
			for _, d := range ch.Danger {
				dangers[d.Reason] += d.Count
				if d.Message == "" {
					t.Errorf("%s: danger %s without a message", ch.Ref(), d.Reason)
				}
			}
			for _, f := range ch.Fields {
				switch f.Kind {
				case object.FieldDrift:
					reverted = append(reverted, f)
				case object.FieldCodifies:
					codified = append(codified, f)
				case "":
					t.Errorf("%s %s: a field of the live impact without a kind", ch.Ref(), f.Path)
				}
			}
		}
	}
	if secretFields == 0 {
		t.Error("the demo's changed Secret has no fields to check")
	}
	want := map[drift.DangerReason]int{drift.DangerCRDRemoval: 3, drift.DangerNamespaceRemoval: 3, drift.DangerPVCRemoval: 1,
		drift.DangerImmutableField: 1, drift.DangerRBACEscalation: 1, drift.DangerAutoscaledReplicas: 2}
	if diff := cmp.Diff(want, dangers); diff != "" {
		t.Errorf("danger reasons and counts (-want +got):\n%s", diff)
	}
	if len(codified) != 1 || !strings.Contains(codified[0].Path, "LOG_LEVEL") || codified[0].Base != "info" || codified[0].Live != "debug" || codified[0].Manager != "kubectl-edit" {
		t.Errorf("fields the pull request codifies: %+v, want staging's LOG_LEVEL set live by kubectl-edit", codified)
	}
	if len(reverted) != 1 || reverted[0].Path != ".spec.replicas" || reverted[0].Manager != "kubectl" || reverted[0].Subresource != "scale" {
		t.Errorf("drift the pull request leaves: %+v, want the scaled replicas with who set them", reverted)
	}
}

// TestDiffDemoWithoutACluster: the dangers of the demo are known from Git;
// the live dump only adds their counts.
func TestDiffDemoWithoutACluster(t *testing.T) {
	out, errOut, code := runCLI(t, "diff", "--base", demoDir+"/base", "--head", demoDir+"/pr", "--format", "json")
	if code != exitChanges {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut)
	}
	var rep drift.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	got := map[drift.DangerReason]int{}
	for _, target := range rep.Targets {
		if target.LiveError == "" {
			t.Errorf("%s: no cluster given, yet no reason the cluster was not read", target.Path)
		}
		for r, n := range target.Dangers() {
			got[r] += n
		}
	}
	want := map[drift.DangerReason]int{drift.DangerCRDRemoval: 1, drift.DangerNamespaceRemoval: 1, drift.DangerPVCRemoval: 1,
		drift.DangerImmutableField: 1, drift.DangerRBACEscalation: 1}
	// The base pins api's replicas under its autoscaler as the head does:
	// known from Git, and not this pull request's.
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dangers without a cluster (-want +got):\n%s", diff)
	}
}

// TestDiffOfAnOverlayThatDoesNotRender: an overlay that does not render is
// an error (exit 2), shown as not compared with its cause, never as a row of
// zeros or "nothing"; the overlays that render are compared as usual.
func TestDiffOfAnOverlayThatDoesNotRender(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(demoDir)); err != nil {
		t.Fatal(err)
	}
	k := filepath.Join(dir, "pr/apps/shop/overlays/staging/kustomization.yaml")
	b, err := os.ReadFile(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k, append(b, "  - missing.yaml\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "diff", "--base", dir+"/base", "--head", dir+"/pr", "--live", dir+"/live", "--format", "markdown")
	if code != exitError {
		t.Errorf("exit %d, want %d; stderr %s", code, exitError, errOut)
	}
	for _, want := range []string{
		"| `apps/shop/overlays/staging` ❌ not compared: it does not render | – |",
		`at head: apps/shop/overlays/staging/kustomization.yaml:6: resources entry "missing.yaml": apps/shop/overlays/staging/missing.yaml does not exist in the repository`,
		"**Not compared: it does not render.**",
		"| `apps/shop/overlays/production` | 1 | 2 | 4 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "What a sync does after merging: nothing") {
		t.Errorf("an overlay that was not compared reads as nothing:\n%s", out)
	}
	out, _, code = runCLI(t, "diff", "--base", dir+"/base", "--head", dir+"/pr", "--live", dir+"/live", "--format", "json", "--path", "apps/shop/overlays/staging")
	var rep struct {
		Targets []struct {
			NotCompared string   `json:"notCompared"`
			Errors      []string `json:"errors"`
		} `json:"targets"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitError {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if len(rep.Targets) != 1 || rep.Targets[0].NotCompared != "it does not render" || len(rep.Targets[0].Errors) != 1 {
		t.Errorf("JSON targets: %+v", rep.Targets)
	}
}

// TestDiffComparesAnOverlayThatIsAlsoABase: an overlay another overlay uses
// as a base is compared on its own when a reconciler object in the
// repository deploys it; otherwise stderr says it was compared only through
// the overlay that uses it, and how to compare it.
func TestDiffComparesAnOverlayThatIsAlsoABase(t *testing.T) {
	tree := func(dir, replicas string, extra map[string]string) {
		files := map[string]string{
			"guestbook/kustomization.yaml": "resources: [deployment.yaml]\n",
			"guestbook/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: guestbook, namespace: gb}\nspec:\n  replicas: " + replicas +
				"\n  selector: {matchLabels: {app: gb}}\n  template:\n    metadata: {labels: {app: gb}}\n    spec: {containers: [{name: gb, image: gb:1}]}\n",
			"hooks/kustomization.yaml": "resources: [../guestbook, job]\nnamePrefix: hooks-\n",
			// A part of hooks, changed too: never named as deployed on its own.
			"hooks/job/kustomization.yaml": "resources: [cm.yaml]\n",
			"hooks/job/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: job, namespace: gb}\ndata: {replicas: '" + replicas + "'}\n",
		}
		for k, v := range extra {
			files[k] = v
		}
		writeTree(t, dir, files)
	}
	targets := func(out string) []string {
		var rep struct {
			Targets []struct {
				Path string `json:"path"`
			} `json:"targets"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		var paths []string
		for _, tg := range rep.Targets {
			paths = append(paths, tg.Path)
		}
		sort.Strings(paths)
		return paths
	}
	hint := "driftback: guestbook is compared through hooks (if it is also deployed on its own, add --path guestbook)"

	dir := t.TempDir()
	tree(dir+"/base", "1", nil)
	tree(dir+"/head", "2", nil)
	out, errOut, code := runCLI(t, "diff", "--base", dir+"/base", "--head", dir+"/head", "--format", "json")
	if code != exitChanges {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	if got := targets(out); !slices.Equal(got, []string{"hooks"}) {
		t.Errorf("targets %v, want [hooks]", got)
	}
	if !strings.Contains(errOut, hint) || strings.Contains(errOut, "hooks/job") {
		t.Errorf("stderr lacks %q, or names a part of an overlay:\n%s", hint, errOut)
	}

	app := map[string]string{"apps/guestbook.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: guestbook, namespace: argocd}\n" +
		"spec:\n  project: default\n  destination: {server: 'https://kubernetes.default.svc', namespace: gb}\n  source: {repoURL: 'https://github.com/acme/gitops', path: ./guestbook/, targetRevision: HEAD}\n---\n" +
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: other, namespace: flux-system}\nspec: {path: ./missing, interval: 1m, sourceRef: {kind: GitRepository, name: x}}\n"}
	dir = t.TempDir()
	tree(dir+"/base", "1", app)
	tree(dir+"/head", "2", app)
	out, errOut, code = runCLI(t, "diff", "--base", dir+"/base", "--head", dir+"/head", "--format", "json")
	if code != exitChanges {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	if got := targets(out); !slices.Equal(got, []string{"guestbook", "hooks"}) {
		t.Errorf("targets %v, want [guestbook hooks]", got)
	}
	if strings.Contains(errOut, "compared through") {
		t.Errorf("stderr names a base that is compared on its own:\n%s", errOut)
	}
}

// TestDiffDemoSummaryAddsUp: --format json carries the table's counts and
// the verdict, so a script need not recount them; each target's objects are
// its creates, updates, deletes and unchanged, the total their sum, and the
// progress line on stderr counts the same objects.
func TestDiffDemoSummaryAddsUp(t *testing.T) {
	out, errOut, _ := runCLI(t, "diff", "--base", demoDir+"/base", "--head", demoDir+"/pr", "--live", demoDir+"/live", "--format", "json")
	var rep struct{ Summary *jsonreport.Summary }
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	s := rep.Summary
	if s == nil {
		t.Fatal("the JSON report has no summary")
	}
	want := jsonreport.Counts{Objects: 19, Create: 1, Update: 3, Delete: 6, Unchanged: 9, Dangers: 5, DataLoss: 3, SyncFails: 1, Privilege: 1, DangersBefore: 2, LiveChangesReverted: new(1)}
	if diff := cmp.Diff(want, s.Total); diff != "" {
		t.Errorf("the demo's total (-want +got):\n%s", diff)
	}
	if s.Verdict != "dangerous" || !s.Complete {
		t.Errorf("verdict %q, complete %v: want dangerous and complete", s.Verdict, s.Complete)
	}
	var sum jsonreport.Counts
	for _, tc := range s.Targets {
		if tc.Objects != tc.Create+tc.Update+tc.Delete+tc.Unchanged {
			t.Errorf("%s: %d objects, yet %d+%d+%d+%d", tc.Path, tc.Objects, tc.Create, tc.Update, tc.Delete, tc.Unchanged)
		}
		sum.Objects += tc.Objects
	}
	if sum.Objects != s.Total.Objects {
		t.Errorf("the targets hold %d objects, the total says %d", sum.Objects, s.Total.Objects)
	}
	if !strings.Contains(errOut, "compared 2 overlays (19 objects)") {
		t.Errorf("stderr does not count the table's objects:\n%s", errOut)
	}
}

// TestDiffDemoAsText: --format text (the default in a terminal) is the
// comment as plain text: verdict first, no HTML and no hidden marker; a
// pipe still gets the comment's Markdown.
func TestDiffDemoAsText(t *testing.T) {
	out, errOut, code := runCLI(t, "diff", "--base", demoDir+"/base", "--head", demoDir+"/pr", "--live", demoDir+"/live", "--format", "text")
	if code != exitChanges {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if want := "driftback: what merging this pull request does to the cluster\n\n⚠️ 5 dangers to review: 3 losing data, 1 failing the sync, 1 granting privilege.\n"; !strings.HasPrefix(out, want) {
		t.Errorf("the text does not lead with the verdict:\n%s", out)
	}
	for _, not := range []string{"<details>", "<!--", "**", "<code>"} {
		if strings.Contains(out, not) {
			t.Errorf("the text holds %q", not)
		}
	}
	// Text is the default, for a pipe too; compact: an object's whole
	// YAML only with -v.
	piped, _, _ := runCLI(t, "diff", "--base", demoDir+"/base", "--head", demoDir+"/pr", "--live", demoDir+"/live")
	if piped != out {
		t.Errorf("without --format, a pipe does not get the text")
	}
	if strings.Contains(out, "kind: ClusterRole") {
		t.Errorf("the text holds an object's whole YAML without -v")
	}
	if verbose, _, _ := runCLI(t, "diff", "--base", demoDir+"/base", "--head", demoDir+"/pr", "--live", demoDir+"/live", "-v"); !strings.Contains(verbose, "kind: ClusterRole") {
		t.Errorf("-v does not show the created ClusterRole's YAML")
	}
}

// TestDiffComparesWhatMergingDoes: a teammate merged a PVC into main after
// the branch left it. `diff --base main --head feature` compares the branch
// with where it left main (as git diff main...feature), so the PVC is not
// the branch's to remove; --merged compares main with the merge, which
// keeps it; a file both sides change differently is refused by --merged.
func TestDiffComparesWhatMergingDoes(t *testing.T) {
	repo := t.TempDir()
	gitCmd(t, repo, "init", "-q", "-b", "main")
	commit := func(files map[string]string, msg string) {
		t.Helper()
		for name, content := range files {
			writeFile(t, filepath.Join(repo, name), content)
		}
		gitCmd(t, repo, "add", "-A")
		gitCmd(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", msg)
	}
	web := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  replicas: 2\n"
	commit(map[string]string{"prod/kustomization.yaml": "resources:\n- web.yaml\n", "prod/web.yaml": web}, "branch point")
	gitCmd(t, repo, "checkout", "-q", "-b", "feature")
	commit(map[string]string{"prod/web.yaml": strings.Replace(web, "replicas: 2", "replicas: 3", 1)}, "three replicas")
	gitCmd(t, repo, "checkout", "-q", "main")
	commit(map[string]string{"prod/kustomization.yaml": "resources:\n- web.yaml\n- data.yaml\n",
		"prod/data.yaml": "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  namespace: shop\nspec:\n  resources:\n    requests: {storage: 1Gi}\n"}, "the teammate's PVC")

	report := func(args ...string) map[string]any {
		t.Helper()
		out, errOut, code := runCLI(t, append([]string{"diff", "--repo", repo, "--base", "main", "--head", "feature", "--format", "json"}, args...)...)
		if code != exitChanges && code != exitIncomplete {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		var rep struct {
			Compared map[string]any
			Summary  struct{ Total struct{ Update, Delete int } }
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Summary.Total.Delete != 0 || strings.Contains(out, "pvc-removal") {
			t.Errorf("%v: the branch is blamed for main's PVC:\n%s", args, out)
		}
		if rep.Summary.Total.Update != 1 || !strings.Contains(out, `"path": ".spec.replicas"`) {
			t.Errorf("%v: the branch's own change is not shown:\n%s", args, out)
		}
		return rep.Compared
	}
	if c := report(); c["how"] != "merge-base" || !strings.Contains(c["note"].(string), "as git diff BASE...HEAD does") {
		t.Errorf("by default: %v", c)
	}
	if c := report("--merged"); c["how"] != "merge" || c["note"] != nil {
		t.Errorf("--merged: %v", c)
	}

	// Live, Flux applied main: the PVC is there, and tracked. Compared with
	// the merge base, the head still does not prune it: main gained it.
	live := t.TempDir()
	writeFile(t, filepath.Join(live, "all.yaml"), "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: shop, labels: {app: shop}}\nspec:\n  resources:\n    requests: {storage: 1Gi}\n"+
		"---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop, labels: {app: shop}}\nspec:\n  replicas: 2\n")
	report("--live", live, "--prune-selector", "app=shop")

	// main breaks: what it gained cannot be told from a prune. The claim
	// is not compared, never pruned, and the report is not whole.
	commit(map[string]string{"prod/kustomization.yaml": "resources:\n- web.yaml\n- data.yaml\n- gone.yaml\n"}, "a broken main")
	out, errOut, code := runCLI(t, "diff", "--repo", repo, "--base", "main", "--head", "feature", "--format", "json", "--live", live, "--prune-selector", "app=shop")
	var broken struct {
		Targets []struct {
			Changes []struct{ Kind, Action string }
			Unread  []struct{ Kind, Note string }
		}
		Summary struct{ Complete bool }
	}
	if err := json.Unmarshal([]byte(out), &broken); err != nil {
		t.Fatal(err)
	}
	if code != exitIncomplete || broken.Summary.Complete || len(broken.Targets) != 1 {
		t.Fatalf("a tip that does not render: exit %d, whole %v: %s\n%s", code, broken.Summary.Complete, out, errOut)
	}
	for _, c := range broken.Targets[0].Changes {
		if c.Kind == "PersistentVolumeClaim" {
			t.Errorf("the claim main may have gained is a %s", c.Action)
		}
	}
	if u := broken.Targets[0].Unread; len(u) != 1 || u[0].Kind != "PersistentVolumeClaim" || !strings.Contains(u[0].Note, "the base branch's tip does not render") {
		t.Errorf("the claim is not said to be not compared: %+v", u)
	}
	commit(map[string]string{"prod/kustomization.yaml": "resources:\n- web.yaml\n- data.yaml\n"}, "main fixed")

	// main changes the same line differently: --merged refuses, naming it.
	commit(map[string]string{"prod/web.yaml": strings.Replace(web, "replicas: 2", "replicas: 5", 1)}, "five on main")
	_, errOut, code = runCLI(t, "diff", "--repo", repo, "--base", "main", "--head", "feature", "--merged")
	if code != exitError || !strings.Contains(errOut, "both sides change prod/web.yaml differently") {
		t.Errorf("a conflict with --merged: exit %d: %s", code, errOut)
	}
}

// TestDiffWithAClusterThatCannotBeRead: the kubeconfig's apiserver is down.
// What is unknown is never zero: the report is the Git change, marked as
// such; JSON says complete: false and null live changes; the error is told
// once in each format; the command exits 3 (not "changes"); and nothing
// but driftback's own progress reaches stderr (no client-go or klog line).
func TestDiffWithAClusterThatCannotBeRead(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, kubeconfig, "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://"+addr+"\"}\nusers:\n- name: u\n  user: {token: t0ken}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n")
	demo, err := filepath.Abs(demoDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"json", "markdown", "text"} {
		out, errOut, code := runProcess(t, demo, "diff", "--base", "base", "--head", "pr", "--kubeconfig", kubeconfig, "--format", format)
		if code != exitIncomplete {
			t.Errorf("%s: exit %d, want %d (not whole)", format, code, exitIncomplete)
		}
		for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
			if !strings.HasPrefix(line, "driftback: ") {
				t.Errorf("%s: a line on stderr that is not driftback's: %q", format, line)
			}
		}
		if n := strings.Count(out, "connection refused"); n != 1 && format != "json" {
			t.Errorf("%s: the cluster's error is told %d times, want once:\n%s", format, n, out)
		}
		if format != "json" {
			if !strings.Contains(out, "Git only: ❌ the cluster could not be read") || !strings.Contains(out, "| **4** | ? |") && !strings.Contains(out, "?\n") {
				t.Errorf("%s: the table does not say the cluster was not read, or shows a count where none is known:\n%s", format, out)
			}
			continue
		}
		var rep struct {
			Targets []struct{ LiveError string }
			Summary struct {
				Complete bool
				Total    struct{ LiveChangesReverted *int }
			}
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		for _, tg := range rep.Targets {
			if !strings.Contains(tg.LiveError, "connection refused") {
				t.Errorf("json: a target's liveError is %q", tg.LiveError)
			}
		}
		if rep.Summary.Complete || rep.Summary.Total.LiveChangesReverted != nil {
			t.Errorf("json: complete %v, live changes reverted %v: want false and null", rep.Summary.Complete, rep.Summary.Total.LiveChangesReverted)
		}
	}
}

// TestThePostBuildNoteIsTrue: a ${…} in a plain kustomize overlay is a
// script's (a generator packs it), not Flux's: no note says Flux
// substitutes it. Where a Flux Kustomization written in the repository
// builds the path with postBuild, the note is there.
func TestThePostBuildNoteIsTrue(t *testing.T) {
	dir := t.TempDir()
	for _, side := range []string{"base", "head"} {
		writeFile(t, filepath.Join(dir, side, "app", "kustomization.yaml"), "configMapGenerator:\n- name: scripts\n  files: [run.sh]\n")
		writeFile(t, filepath.Join(dir, side, "app", "run.sh"), "#!/bin/sh\necho \"${HOME}\" "+side+"\n")
	}
	const note = "Flux's postBuild substitutes them"
	out, errOut, code := runCLI(t, "diff", "--base", filepath.Join(dir, "base"), "--head", filepath.Join(dir, "head"), "--format", "json")
	if code != exitChanges {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, note) {
		t.Errorf("a plain overlay's script is said to be Flux's to substitute:\n%s", out)
	}
	writeFile(t, filepath.Join(dir, "head", "clusters", "app.yaml"), "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: app, namespace: flux-system}\nspec:\n  path: ./app\n  sourceRef: {kind: GitRepository, name: flux-system}\n  postBuild:\n    substitute: {cluster: prod}\n")
	out, errOut, _ = runCLI(t, "diff", "--base", filepath.Join(dir, "base"), "--head", filepath.Join(dir, "head"), "--path", "app", "--format", "json")
	if !strings.Contains(out, note) {
		t.Errorf("a path Flux builds with postBuild has no note: %s\n%s", errOut, out)
	}
}

// TestADumpOfSomeKindsIsReadAsSuch: the demo compared with a dump of
// Deployments, Services and ConfigMaps only (as `kubectl get deploy,svc,cm`
// makes): the Namespaces, claims and Secrets that exist live are "not
// compared with the cluster", never "create"; the report is not whole.
func TestADumpOfSomeKindsIsReadAsSuch(t *testing.T) {
	some := t.TempDir()
	entries, err := os.ReadDir(filepath.Join(demoDir, "live"))
	if err != nil {
		t.Fatal(err)
	}
	keep := map[string]bool{"Deployment": true, "Service": true, "ConfigMap": true}
	var items []any
	for _, e := range entries {
		if e.Name() == livestate.DumpIndexFile {
			continue
		}
		b, err := os.ReadFile(filepath.Join(demoDir, "live", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var l struct{ Items []map[string]any }
		if err := yaml.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		for _, it := range l.Items {
			if keep[it["kind"].(string)] {
				items = append(items, it)
			}
		}
	}
	b, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(some, "all.yaml"), string(b))
	out, errOut, code := runCLI(t, "diff", "--base", demoDir+"/base", "--head", demoDir+"/pr", "--live", some, "--format", "json")
	if code != exitIncomplete {
		t.Errorf("exit %d, want %d (not whole): %s", code, exitIncomplete, errOut)
	}
	var rep struct {
		Targets []struct {
			Path    string
			Changes []struct{ Kind, Name, Action string }
			Unread  []struct{ Kind, Name, Note string }
		}
		Summary struct{ Complete bool }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	unread := map[string]string{}
	for _, tg := range rep.Targets {
		for _, c := range tg.Changes {
			if c.Action == "create" && !keep[c.Kind] {
				t.Errorf("%s: %s/%s is a create, though the dump does not hold its kind", tg.Path, c.Kind, c.Name)
			}
		}
		for _, u := range tg.Unread {
			unread[u.Kind] = u.Note
		}
	}
	for _, kind := range []string{"Namespace", "PersistentVolumeClaim", "Secret"} {
		if !strings.Contains(unread[kind], "the live dump has no "+kind) {
			t.Errorf("%s is not said to be unknown: %q", kind, unread[kind])
		}
	}
	if rep.Summary.Complete {
		t.Error("the report says it is complete")
	}
	// drift says the same, and exits as not whole.
	out, errOut, code = runCLI(t, "drift", "--repo", demoDir+"/pr", "--path", "apps/shop/overlays/production", "--live", some, "--format", "json")
	if code != exitIncomplete || !strings.Contains(out, "the live dump has no PersistentVolumeClaim") || !strings.Contains(errOut, "the live dump has no PersistentVolumeClaim") {
		t.Errorf("drift: exit %d, want %d, the claim unread in JSON and on stderr:\n%s\n%s", code, exitIncomplete, out, errOut)
	}
}

// TestARemovalADumpCannotSeeIsStillADanger: Git removes a claim; the dump
// holds no claims. The claim is not compared with the cluster, but what Git
// says of it stands: a pvc-removal danger whose cost is unknown.
func TestARemovalADumpCannotSeeIsStillADanger(t *testing.T) {
	dir := t.TempDir()
	claim := "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: shop}\nspec:\n  resources: {requests: {storage: 1Gi}}\n"
	web := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: shop}\ndata: {a: b}\n"
	writeTree(t, filepath.Join(dir, "base"), map[string]string{"app/kustomization.yaml": "resources: [web.yaml, data.yaml]\n", "app/web.yaml": web, "app/data.yaml": claim})
	writeTree(t, filepath.Join(dir, "head"), map[string]string{"app/kustomization.yaml": "resources: [web.yaml]\n", "app/web.yaml": web})
	writeTree(t, filepath.Join(dir, "live"), map[string]string{"all.yaml": web})
	out, errOut, code := runCLI(t, "diff", "--base", filepath.Join(dir, "base"), "--head", filepath.Join(dir, "head"), "--live", filepath.Join(dir, "live"), "--format", "json")
	if code != exitIncomplete {
		t.Errorf("exit %d, want %d: %s", code, exitIncomplete, errOut)
	}
	var rep struct {
		Summary struct {
			Total struct{ Dangers, DataLoss int }
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Summary.Total.DataLoss != 1 || !strings.Contains(out, `"reason": "pvc-removal"`) || !strings.Contains(out, `"countUnknown": true`) {
		t.Errorf("the claim's removal is not a danger:\n%s", out)
	}
}
