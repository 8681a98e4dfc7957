package report

import (
	"strings"
	"testing"
	"time"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/prgen"
)

// TestMultiLineValuesKeepTheirLines: a file in a ConfigMap changed live
// keeps its lines in the drift pull request's "needs a manual edit" list
// and on the dashboard, where no fenced block can go.
func TestMultiLineValuesKeepTheirLines(t *testing.T) {
	file := "server {\n  listen 80;\n  location / { proxy_pass http://web; }\n}\n"
	plan := &prgen.Plan{Overlay: "apps/shop", Manual: []prgen.Manual{{Object: "ConfigMap/shop/nginx", Path: ".data.nginx.conf", Value: file,
		Reason: "the value comes from a configMapGenerator file: edit apps/shop/nginx.conf"}}}
	out := DriftPullRequest(plan)
	if !strings.Contains(out, "- `ConfigMap/shop/nginx` `.data.nginx.conf` is <code>server {<br>  listen 80;<br>") {
		t.Errorf("the manual edit's value does not keep its lines:\n%s", out)
	}
	// A large file keeps its first lines: the body stays within GitHub's
	// limit.
	large := strings.Repeat("line of the file\n", 20000)
	plan.Manual[0].Value = large
	if out := DriftPullRequest(plan); len(out) > 20000 || !strings.Contains(out, "… 19980 more lines") {
		t.Errorf("a large multi-line value is not cut (%d characters)", len(out))
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	body, _ := Dashboard("", "prod", []DashboardTarget{{Key: "shop", Name: "shop", Cluster: "prod", Path: "apps/shop", Changes: []DashboardChange{
		{ID: "a1", Object: "ConfigMap/shop/nginx", Field: ".data.nginx.conf", Git: "server {\n  listen 8080;\n}\n", Live: file, By: "kubectl-edit", Since: at, State: StateReported},
	}}}, map[string]bool{"prod": true})
	for _, want := range []string{"<code>server {<br>  listen 8080;<br>}</code>", "<br>  listen 80;<br>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the dashboard does not keep the value's lines (%q):\n%s", want, body)
		}
	}
}

// TestAPruneSaysWhyInItsSummary: a deleted object's collapsed block says
// why it goes, without opening it.
func TestAPruneSaysWhyInItsSummary(t *testing.T) {
	c := drift.Change{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "settings-5m9f8ttmdb", Action: drift.ActionDelete,
		Why: "replaced by settings-g7hk24bc9d: a generated name changes with its content"}
	out := strings.Join(Comment(&drift.Report{Targets: []drift.Target{{Path: "shop", Changes: []drift.Change{c}}}}, CommentOptions{}), "")
	if !strings.Contains(out, "<summary>🗑️ delete <code>ConfigMap/shop/settings-5m9f8ttmdb</code>: replaced by settings-g7hk24bc9d: a generated name changes with its content</summary>") {
		t.Errorf("the prune's summary does not say why:\n%s", out)
	}
}
