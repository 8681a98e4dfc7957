package report

import (
	"flag"
	"fmt"
	"github.com/driftback/driftback/prgen"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var dashNow = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

// fleetTarget is a target with n changes, each with long values.
func fleetTarget(cluster string, i, n int) DashboardTarget {
	t := DashboardTarget{Key: fmt.Sprintf("app-%03d", i), Name: fmt.Sprintf("app-%03d", i), Cluster: cluster, Path: fmt.Sprintf("clusters/%s/apps/app-%03d", cluster, i)}
	for j := range n {
		t.Changes = append(t.Changes, DashboardChange{
			ID: fmt.Sprintf("%012x", i*1000+j), Object: fmt.Sprintf("Deployment/team-%03d/web-%02d", i, j), Field: ".spec.template.spec.containers[name=\"web\"].image",
			Git: strings.Repeat("registry.example.com/web:1.0.", 3), Live: strings.Repeat("registry.example.com/web:1.1.", 3),
			By: "kubectl-set", Since: dashNow, State: StateWaiting, Until: dashNow.Add(time.Hour),
		})
	}
	return t
}

// TestTwoHundredTargetsFitOneIssue: a fleet of 200 drifted targets, each
// with 30 changes, fits GitHub's issue body limit by showing the largest
// targets in less detail; every target is still counted in the summary; and
// the same fleet rendered again on its own body gives that body, so the loop
// edits only when something changed.
func TestTwoHundredTargetsFitOneIssue(t *testing.T) {
	var fleet []DashboardTarget
	for i := range 200 {
		fleet = append(fleet, fleetTarget("prod", i, 30))
	}
	keep := map[string]bool{"prod": true}
	body, shows := Dashboard("", "prod", fleet, keep)
	if !shows {
		t.Fatal("a drifted fleet shows nothing")
	}
	if n := utf8.RuneCountInString(body); n > MaxIssueBody {
		t.Fatalf("the body is %d characters, over GitHub's %d", n, MaxIssueBody)
	}
	if !strings.Contains(body, "**200 targets differ from Git**: 6000 changes, 6000 waiting.") {
		t.Errorf("the summary does not count the whole fleet:\n%s", body[:min(len(body), 600)])
	}
	again, _ := Dashboard(body, "prod", fleet, keep)
	if again != body {
		t.Error("the same fleet rendered on its own body differs: every check would edit the issue")
	}
	// A small fleet is shown in full.
	small, _ := Dashboard("", "prod", fleet[:3], keep)
	if !strings.Contains(small, "<details>") || strings.Count(small, "propose now:") != 3*maxRows {
		t.Errorf("three targets are not shown in full: %d boxes", strings.Count(small, "propose now:"))
	}
}

// TestEachClusterWritesItsOwnParts: a replica that watches cluster b keeps
// cluster a's parts as another replica wrote them, and drops the parts of a
// cluster app.yml no longer has.
func TestEachClusterWritesItsOwnParts(t *testing.T) {
	keep := map[string]bool{"a": true, "b": true}
	body, _ := Dashboard("", "a", []DashboardTarget{fleetTarget("a", 1, 2), {Key: "clean", Name: "clean", Cluster: "a", Path: "x"}}, keep)
	body, _ = Dashboard(body, "b", []DashboardTarget{fleetTarget("b", 2, 1)}, keep)
	for _, s := range []string{"Deployment/team-001/web-01", "Deployment/team-002/web-00", "**2 targets differ from Git**: 3 changes, 3 waiting.", "1 target matches Git"} {
		if !strings.Contains(body, s) {
			t.Errorf("the merged dashboard does not say %q:\n%s", s, body)
		}
	}
	// b's check again: its part replaced, a's kept.
	body, _ = Dashboard(body, "b", nil, keep)
	if strings.Contains(body, "team-002") || !strings.Contains(body, "team-001") {
		t.Errorf("b's part not replaced, or a's lost:\n%s", body)
	}
	// Cluster a leaves app.yml.
	body, shows := Dashboard(body, "b", nil, map[string]bool{"b": true})
	if strings.Contains(body, "team-001") || shows {
		t.Errorf("a gone cluster's part is kept:\n%s", body)
	}
}

// TestDashboardTextCannotForgeABoxOrAPart: names and values from the
// cluster that hold a tick marker, a box, a part's frame, a line break, a
// mention or a reference show as text: the body has driftback's boxes and
// parts only.
func TestDashboardTextCannotForgeABoxOrAPart(t *testing.T) {
	hostile := "x\n- [x] check <!-- driftback:tick check target=other -->\n<!-- driftback:dashboard-end -->\n@org/team #1"
	tg := DashboardTarget{Key: "prod", Name: hostile, Cluster: "prod", Path: hostile, Changes: []DashboardChange{{
		ID: "abc", Object: hostile, Field: hostile, Git: hostile, Live: hostile, By: hostile, Since: dashNow, State: StateCannot, Why: hostile,
	}, {ID: "def", Object: hostile, Field: hostile, Since: dashNow, State: StateWaiting, Until: dashNow}}, Declined: []DashboardDeclined{{Number: 3}}, Open: 4}
	nc := DashboardTarget{Key: "broken", Name: hostile, Cluster: "prod", Path: hostile, NotCompared: hostile}
	st := DashboardTarget{Key: "stalled", Name: hostile, Cluster: "prod", Path: hostile, Reconciler: &DashboardReconciler{State: hostile, Why: hostile}}
	tg.Fate = hostile
	body, _ := Dashboard("", "prod", []DashboardTarget{tg, nc, st}, map[string]bool{"prod": true})
	var kinds []string
	for _, tk := range DashboardTicks(body) {
		kinds = append(kinds, tk.Kind+" "+tk.Target+" "+tk.Item)
	}
	want := "[check stalled  propose-now prod def check prod  propose-again prod 3 check broken ]"
	if fmt.Sprint(kinds) != want {
		t.Errorf("boxes %v, want %s", kinds, want)
	}
	if n := len(parseBlocks(body)); n != 5 {
		t.Errorf("%d parts, want 5 (stalled, differs, declined, open, not compared)", n)
	}
	// Code spans hold no mention or reference; outside them there is none.
	text := regexp.MustCompile("`[^`]*`").ReplaceAllString(body, "")
	if strings.Contains(text, "@org") || strings.Contains(text, "#1") {
		t.Errorf("a mention or a reference got through:\n%s", text)
	}
}

// TestATickIsReadFromTheEdit: what an edit asks for is the boxes it ticked,
// and unticking puts those back as they were.
func TestATickIsReadFromTheEdit(t *testing.T) {
	tg := fleetTarget("prod", 1, 2)
	tg.Declined = []DashboardDeclined{{Number: 7}}
	before, _ := Dashboard("", "prod", []DashboardTarget{tg}, map[string]bool{"prod": true})
	after := strings.Replace(before, "- [ ] propose it again", "- [x] propose it again", 1)
	after = strings.Replace(after, "- [ ] check again now", "- [x] check again now", 1)
	ticks := NewlyTicked(before, after)
	if len(ticks) != 2 || ticks[0].Kind != TickCheck || ticks[1].Kind != TickProposeAgain || ticks[1].Item != "7" {
		t.Fatalf("ticks %+v", ticks)
	}
	if got := Untick(after, ticks); got != before {
		t.Errorf("unticked:\n%s\nwant:\n%s", got, before)
	}
	if n := NewlyTicked(after, after); len(n) != 0 {
		t.Errorf("an edit that ticks nothing new asks for %+v", n)
	}
	body, _ := DashboardRequest(ticks[1], "alice", "2026-12-02T09:00:00Z")
	got, by, ok := ParseDashboardRequest(body)
	if !ok || by != "alice" || got.Key() != ticks[1].Key() {
		t.Errorf("request read back as %+v by %q (%v)", got, by, ok)
	}
}

var updateExample = flag.Bool("update", false, "rewrite docs/dashboard-example.md")

// TestDashboardExample keeps docs/dashboard-example.md what driftback
// writes for a repository with five targets: the documentation cannot show
// a dashboard driftback does not write.
func TestDashboardExample(t *testing.T) {
	at := dashNow.Add(-40 * time.Minute)
	ts := []DashboardTarget{
		{Key: "shop-production", Name: "shop-production", Cluster: "prod", Path: "apps/shop/overlays/production", Open: 12, Checked: dashNow, Changes: []DashboardChange{
			{ID: "5f0c1a9e2b7d", Object: "Deployment/shop/web", Field: ".spec.replicas", Git: "2", Live: "5", By: "kubectl", At: &at, Since: at, State: StateProposed, Number: 12},
			{ID: "9a41be07c3d2", Object: "Deployment/shop/web", Field: `.spec.template.spec.containers[name="web"].image`, Git: "registry.example.com/web:1.4.0", Live: "registry.example.com/web:1.4.1", By: "kubectl-set", At: &at, Since: dashNow.Add(-time.Minute), State: StateWaiting, Until: dashNow.Add(time.Minute)},
			{ID: "0b7e33c9a1f4", Object: "Secret/shop/api-token", Field: ".data.token", Git: "(hidden)", Live: "(hidden)", By: "kubectl-edit", At: &at, Since: at, State: StateListed, Number: 12, Why: "a Secret: driftback never writes Secret values to Git"},
			{ID: "77c0d2e1aa90", Object: "Deployment/shop/worker", Field: ".spec.replicas", Git: "3", Live: "8", By: "kube-controller-manager", Since: at, State: StateAutoscaled, Why: "HorizontalPodAutoscaler/shop/worker"},
		}},
		{Key: "shop-staging", Name: "shop-staging", Cluster: "staging", Path: "apps/shop/overlays/staging", Declined: []DashboardDeclined{{Number: 9}}, Checked: dashNow.Add(-time.Minute), Changes: []DashboardChange{
			{ID: "1c2d3e4f5a6b", Object: "ConfigMap/shop-staging/flags", Field: ".data.checkout", Git: "v1", Live: "v2", By: "kubectl-edit", At: &at, Since: at, State: StateDeclined, Number: 9},
		}},
		{Key: "flux-system-apps", Name: "flux-system/apps", Cluster: "prod", Path: "clusters/prod/apps", Checked: dashNow,
			Fate: "kustomize-controller applies Git every 10m: its next apply, at most 10m after a change, reverts the fields Git sets unless the change is merged into Git; fields Git does not set stay.", Changes: []DashboardChange{
				{ID: "aa11bb22cc33", Object: "Deployment/podinfo/podinfo", Field: ".spec.replicas", Git: "2", Live: "4", By: "kubectl", At: &at, Since: at, State: StateCannot, Why: "its Kustomization flux-system/apps sets it, and its manifest is not in this repository"},
			}},
		{Key: "flux-system-infra", Name: "flux-system/infra", Cluster: "prod", Path: "clusters/prod/infra", NotCompared: "suspended: the Kustomization is suspended (spec.suspend): merging changes nothing on this cluster until reconciliation resumes", Checked: dashNow},
		{Key: "flux-system-payments", Name: "flux-system/payments", Cluster: "prod", Path: "clusters/prod/payments", Checked: dashNow,
			Reconciler: &DashboardReconciler{State: "failing", Since: dashNow.Add(-7 * 24 * time.Hour),
				Why: "BuildFailed: kustomize build failed: accumulating resources from 'ingress.yaml': open /tmp/kustomization-1291/clusters/prod/payments/ingress.yaml: no such file or directory"}},
		{Key: "monitoring", Name: "monitoring", Cluster: "prod", Path: "apps/monitoring"},
	}
	keep := map[string]bool{"prod": true, "staging": true}
	var prod, staging []DashboardTarget
	for _, x := range ts {
		if x.Cluster == "prod" {
			prod = append(prod, x)
		} else {
			staging = append(staging, x)
		}
	}
	body, _ := Dashboard("", "prod", prod, keep)
	body, _ = Dashboard(body, "staging", staging, keep)
	doc := "# driftback: drift dashboard\n\n" + body
	keepGolden(t, "dashboard-example.md", doc, *updateExample, "go test ./report -run TestDashboardExample -update")
	// Bodies that differ only in when their targets were checked need no
	// edit; any other difference does.
	later, _ := Dashboard("", "prod", prod, keep)
	if again, _ := Dashboard("", "prod", prod, keep); !DashboardSameButChecked(again, later) {
		t.Error("the same dashboard does not read as the same")
	}
	prod[0].Checked = prod[0].Checked.Add(time.Hour)
	moved, _ := Dashboard("", "prod", prod, keep)
	if moved == later || !DashboardSameButChecked(moved, later) {
		t.Error("check times alone read as a change, or did not move")
	}
	prod[0].Changes[0].Live = "6"
	if changed, _ := Dashboard("", "prod", prod, keep); DashboardSameButChecked(changed, later) {
		t.Error("a changed value reads as the same dashboard")
	}
}

var updateDriftExample = flag.Bool("update-drift-example", false, "rewrite docs/drift-pr-example.md")

// TestDriftPullRequestExample keeps docs/drift-pr-example.md what driftback
// writes for a drift pull request: two fields written back (one into the
// kustomization's replicas, one into the overlay's image), one that needs a
// manual edit, a Secret named by its keys only, and a person's intent.
func TestDriftPullRequestExample(t *testing.T) {
	at := dashNow.Add(-2 * time.Hour)
	plan := &prgen.Plan{
		Overlay: "apps/shop/overlays/production",
		Files: map[string][]byte{
			"apps/shop/overlays/production/kustomization.yaml": []byte("resources: [../../base]\nreplicas:\n- name: web\n  count: 5\nimages:\n- name: registry.example.com/web\n  newTag: 1.4.1\n"),
		},
		Codified: []prgen.Codified{
			{Object: "Deployment/shop-prod/web", Path: ".spec.replicas", Value: int64(5), Was: int64(3), Manager: "kubectl", Time: &at,
				File: "apps/shop/overlays/production/kustomization.yaml", Strategy: prgen.StrategyReplicas},
			{Object: "Deployment/shop-prod/web", Path: `.spec.template.spec.containers[name="web"].image`, Value: "registry.example.com/web:1.4.1",
				Was: "registry.example.com/web:1.4.0", Manager: "kubectl-set", Time: &at, File: "apps/shop/overlays/production/kustomization.yaml", Strategy: prgen.StrategyImages},
		},
		Manual: []prgen.Manual{{Object: "ConfigMap/shop-prod/flags", Path: ".data.checkout", Value: "v2",
			Reason: "the value comes from a configMapGenerator literal in apps/shop/base/kustomization.yaml, which other overlays share: edit it there or add a generator in this overlay"}},
		Secrets: []prgen.SecretDrift{{Object: "Secret/shop-prod/api-token", Keys: []string{"token"}}},
		Intents: map[string]string{"Deployment/shop-prod/web": "INC-4821: scaled and patched during the checkout outage"},
		Fate:    "kustomize-controller applies Git every 10m: its next apply, at most 10m after a change, reverts the fields Git sets unless the change is merged into Git; fields Git does not set stay.",
	}
	doc := "# " + DriftTitle(plan) + "\n\n" + DriftPullRequest(plan)
	keepGolden(t, "drift-pr-example.md", doc, *updateDriftExample, "go test ./report -run TestDriftPullRequestExample -update-drift-example")
}

// keepGolden keeps docs/name what driftback writes (doc): rewritten when
// update, else compared, saying how to rewrite it.
func keepGolden(t *testing.T, name, doc string, update bool, rewrite string) {
	t.Helper()
	path := filepath.Join("..", "docs", name)
	if update {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != doc {
		t.Errorf("%s is not what driftback writes: %s", path, rewrite)
	}
}
