package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/driftback/driftback/app/driftloop"
	ghapp "github.com/driftback/driftback/app/github"

	git "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/internal/githubfake"
	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/render"
)

// driftRepo is a repository with a base that two overlays share. Production's
// kustomization is commented the way people comment them. The Service and
// NetworkPolicy leave protocols and target ports to the apiserver's defaults,
// which no drift pull request may propose.
var driftRepo = map[string]any{
	"base/kustomization.yaml": `resources:
- deployment.yaml
- service.yaml
`,
	"base/service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - port: 80
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: web
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - ports:
    - port: 8080
`,
	"base/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: registry.example.com/web:1.0.0
        ports:
        - containerPort: 8080
        env:
        - name: LOG_LEVEL
          value: info
`,
	"deploy/prod/kustomization.yaml": `# Production: the web tier on the shared base.
namespace: NS # one namespace per environment

resources:
  - ../../base       # shared with staging
  - token.yaml

# How many web pods production runs.
replicas:
  - name: web
    count: 2 # at least two for the PDB

images:
  # Pinned per environment by release tooling.
  - name: registry.example.com/web
    newTag: "1.0.0"
`,
	"deploy/prod/token.yaml": `apiVersion: v1
kind: Secret
metadata:
  name: api-token
stringData:
  token: from-git
`,
	"deploy/staging/kustomization.yaml": `namespace: NS
nameSuffix: -staging
resources:
- ../../base
`,
}

// driftWorld is a world whose production target is live in the cluster and
// whose drift loop runs with a short quiet period.
type driftWorld struct {
	*world
	loop *driftloop.DriftLoop
	// debounce is the loop's (default 50ms, to keep the tests short).
	debounce time.Duration
	main     plumbing.Hash
	cancel   context.CancelFunc
	done     chan struct{}
	// clock, when set (stopClock), is the drift loop's: quiet periods and
	// fights are measured on it, not on how fast the machine runs.
	clock *testClock
}

// testClock is a clock that moves only when the test moves it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(by time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(by)
}

// stopClock gives the drift loop a clock that stands still until the test
// advances it (before run).
func (d *driftWorld) stopClock() *testClock {
	d.clock = &testClock{now: time.Now()}
	d.srv.App.now = d.clock.Now
	return d.clock
}

func newDriftWorld(t testing.TB, quiet time.Duration, policy func(*config.Policy)) *driftWorld {
	t.Helper()
	return newDriftWorldOn(t, kubetest.New(t), quiet, policy, nil)
}

// newDriftWorldOn is newDriftWorld on a cluster of the test's own, with
// more configuration.
func newDriftWorldOn(t testing.TB, env *kubetest.Env, quiet time.Duration, policy func(*config.Policy), configure func(*config.Config)) *driftWorld {
	t.Helper()
	w := newWorldOn(t, env, func(c *config.Config) {
		if configure != nil {
			configure(c)
		}
		c.Server.DriftInterval = 3 * time.Second
		for i := range c.Targets {
			c.Targets[i].Policy.QuietPeriod = quiet
			c.Targets[i].Policy.Codify = config.CodifyOff
			if c.Targets[i].Name == "prod" {
				c.Targets[i].Policy.Codify = config.CodifyManual
				if policy != nil {
					policy(&c.Targets[i].Policy)
				}
			}
		}
	})
	w.gh.BranchHead = func(repo, branch string) (string, bool) {
		refs, err := ghapp.RemoteRefs(context.Background(), w.git.HTTPAddress()+"/"+repo+".git", w.gh.Token(instID))
		if err != nil {
			return "", false
		}
		sha, ok := refs["refs/heads/"+branch]
		return sha, ok
	}
	d := &driftWorld{world: w}
	d.main = w.commit(plumbing.ZeroHash, driftRepo)
	w.push(map[string]plumbing.Hash{"refs/heads/main": d.main})
	d.applyOverlay(d.main, "deploy/prod")
	return d
}

// run starts the drift loop.
func (d *driftWorld) run() { d.runHooked(nil) }

// runHooked starts the drift loop with a hook between deciding and acting.
func (d *driftWorld) runHooked(beforeAct func(context.Context, prgen.Action)) {
	d.t.Helper()
	log := d.logs.logger(d.t, slog.LevelDebug)
	if _, bench := d.t.(*testing.B); bench {
		log = discard
	}
	d.loop = driftloop.New(d.srv.App.driftDeps(), log)
	d.loop.WrapKube = d.srv.App.wrapKube
	d.loop.Debounce = 50 * time.Millisecond
	d.loop.BeforeAct = beforeAct
	if d.debounce > 0 {
		d.loop.Debounce = d.debounce
	}
	d.srv.App.drift = d.loop
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.done = cancel, make(chan struct{})
	go func() {
		defer close(d.done)
		_ = d.loop.Run(ctx) // ends with ctx
	}()
	d.t.Cleanup(func() {
		cancel()
		<-d.done
	})
}

// applyOverlay renders an overlay at a commit and applies it as Flux would.
func (d *driftWorld) applyOverlay(commit plumbing.Hash, path string) {
	d.t.Helper()
	tree, err := render.GitTree(d.local, commit.String())
	if err != nil {
		d.t.Fatal(err)
	}
	res, err := render.New(render.DefaultOptions()).Render(context.Background(), tree, []string{path})
	if err != nil {
		d.t.Fatal(err)
	}
	objs, err := res.Overlays[0].Objects()
	if err != nil {
		d.t.Fatal(err)
	}
	kubetest.Apply(d.t, d.env.Config, "kustomize-controller", objs...)
}

// scale changes the Deployment's replicas through the scale subresource, as
// `kubectl scale` (manager) or the HPA (kube-controller-manager) does.
func (d *driftWorld) scale(n int32, manager string) {
	d.t.Helper()
	_, err := d.env.Client.AppsV1().Deployments(d.env.Namespace).UpdateScale(context.Background(), "web",
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: d.env.Namespace}, Spec: autoscalingv1.ScaleSpec{Replicas: n}},
		metav1.UpdateOptions{FieldManager: manager})
	if err != nil {
		d.t.Fatal(err)
	}
}

// patch changes an object with a strategic-merge patch, as kubectl edit,
// set and annotate do.
func (d *driftWorld) patch(kind, name, manager, patch string) {
	d.t.Helper()
	ctx := context.Background()
	opts := metav1.PatchOptions{FieldManager: manager}
	var err error
	switch kind {
	case "Deployment":
		_, err = d.env.Client.AppsV1().Deployments(d.env.Namespace).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), opts)
	case "Secret":
		_, err = d.env.Client.CoreV1().Secrets(d.env.Namespace).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), opts)
	default:
		d.t.Fatalf("patch %s: not handled", kind)
	}
	if err != nil {
		d.t.Fatal(err)
	}
}

// waitFor polls until ok, as eventually does.
func (d *driftWorld) waitFor(what string, ok func() bool) {
	d.t.Helper()
	eventually(d.t, ok, what, func() string {
		return fmt.Sprintf("pulls %+v; last calls %v", d.gh.Pulls(fullName), lastCalls(d.gh.Calls(), 12))
	})
}

// settle waits until the loop has finished n more checks of the targets.
func (d *driftWorld) settle(n int64) {
	d.t.Helper()
	start := d.loop.Checks()
	d.waitFor(fmt.Sprintf("%d drift checks", n), func() bool { return d.loop.Checks() >= start+n })
}

func (d *driftWorld) pull(n int) githubfake.Pull {
	for _, p := range d.gh.Pulls(fullName) {
		if p.Number == n {
			return p
		}
	}
	d.t.Fatalf("no pull request #%d", n)
	return githubfake.Pull{}
}

func (d *driftWorld) openPulls() []githubfake.Pull {
	var out []githubfake.Pull
	for _, p := range d.gh.Pulls(fullName) {
		if p.State == "open" {
			out = append(out, p)
		}
	}
	return out
}

// branch fetches the drift branch and returns its tip commit, or the zero
// hash when the branch does not exist.
func (d *driftWorld) branch() plumbing.Hash { return d.branchNamed("driftback/drift/prod") }

// branchNamed fetches a branch of the test repository and returns its tip
// (zero when there is none).
func (d *driftWorld) branchNamed(name string) plumbing.Hash {
	d.t.Helper()
	refs, err := ghapp.RemoteRefs(context.Background(), d.git.HTTPAddress()+"/"+fullName+".git", d.gh.Token(instID))
	if err != nil {
		d.t.Fatal(err)
	}
	sha := refs["refs/heads/"+name]
	if sha == "" {
		return plumbing.ZeroHash
	}
	err = d.local.Fetch(&git.FetchOptions{RemoteName: "origin", Force: true,
		RefSpecs: []gitconfig.RefSpec{gitconfig.RefSpec("+refs/heads/" + name + ":refs/remotes/origin/drift")},
		Auth:     &githttp.BasicAuth{Username: "x-access-token", Password: d.gh.Token(instID)}})
	if err != nil && strings.Contains(err.Error(), "couldn't find remote ref") {
		return plumbing.ZeroHash // deleted between the listing and the fetch
	}
	if err != nil && err != git.NoErrAlreadyUpToDate {
		d.t.Fatal(err)
	}
	return plumbing.NewHash(sha)
}

// changedFiles lists the files a commit changes against its parent, with
// their new content.
func (d *driftWorld) changedFiles(h plumbing.Hash) map[string]string {
	d.t.Helper()
	c, err := d.local.CommitObject(h)
	if err != nil {
		d.t.Fatal(err)
	}
	parent, err := c.Parent(0)
	if err != nil {
		d.t.Fatal(err)
	}
	from, _ := parent.Tree()
	to, _ := c.Tree()
	changes, err := object.DiffTree(from, to)
	if err != nil {
		d.t.Fatal(err)
	}
	out := map[string]string{}
	for _, ch := range changes {
		_, f, err := ch.Files()
		if err != nil {
			d.t.Fatal(err)
		}
		content := ""
		if f != nil {
			content, _ = f.Contents()
		}
		out[ch.To.Name] = content
	}
	return out
}

// rendered renders production at a commit and returns the Deployment.
func (d *driftWorld) renderedWeb(h plumbing.Hash) map[string]any {
	d.t.Helper()
	tree, err := render.GitTree(d.local, h.String())
	if err != nil {
		d.t.Fatal(err)
	}
	res, err := render.New(render.DefaultOptions()).Render(context.Background(), tree, []string{"deploy/prod"})
	if err != nil {
		d.t.Fatal(err)
	}
	objs, err := res.Overlays[0].Objects()
	if err != nil {
		d.t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			return o.Object
		}
	}
	d.t.Fatal("no Deployment rendered")
	return nil
}

func replicasOf(obj map[string]any) int64 {
	switch n := obj["spec"].(map[string]any)["replicas"].(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return -1
}

func commentsWith(gh *githubfake.Fake, number int, text string) int {
	n := 0
	for _, c := range gh.Comments(fullName, number) {
		if strings.Contains(c.Body, text) {
			n++
		}
	}
	return n
}

// TestScaleBecomesOnePullRequest follows one target's drift through its
// life: a person scales production, the loop opens one pull request whose
// branch renders the live count; a second scale updates it; scaling back
// closes it; a person closing a pull request unmerged is never overruled for
// the same drift, while a different drift opens a new one; and once a person
// pushes to the branch, driftback comments instead of force-pushing.
// TestWatchEventsDriveTheLoop runs the drift loop with its production timing
// (a 5-minute interval, the 250 ms debounce): the pull request for a scale
// arrives well inside waitFor's minute, so it came through the watch, not
// the interval the other tests shorten.
func TestWatchEventsDriveTheLoop(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 500*time.Millisecond, nil)
	d.cfg.Server.DriftInterval = 5 * time.Minute
	d.debounce = 250 * time.Millisecond
	d.run()
	d.settle(1)
	checks := d.loop.Checks()
	d.scale(4, "kubectl")
	d.waitFor("a drift pull request through the watch", func() bool { return len(d.openPulls()) == 1 })
	if !strings.Contains(d.openPulls()[0].Body, "`4`") {
		t.Errorf("the pull request does not propose 4:\n%s", d.openPulls()[0].Body)
	}
	if d.loop.Checks() == checks {
		t.Error("no check ran after the scale")
	}
}

func TestScaleBecomesOnePullRequest(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 500*time.Millisecond, nil)
	d.run()
	d.settle(2)
	if p := d.gh.Pulls(fullName); len(p) != 0 {
		t.Fatalf("the cluster matches Git, yet pull requests: %+v", p)
	}

	d.scale(5, "kubectl")
	d.waitFor("a drift pull request", func() bool { return len(d.openPulls()) == 1 })
	pr := d.openPulls()[0]
	if pr.HeadRef != "driftback/drift/prod" || pr.BaseRef != "main" || pr.User != "driftback[bot]" {
		t.Errorf("pull request from %s to %s by %s", pr.HeadRef, pr.BaseRef, pr.User)
	}
	// GitHub takes labels in a call after the pull request's creation.
	d.waitFor("the drift label", func() bool { return fmt.Sprint(d.pull(pr.Number).Labels) == "[driftback/drift]" })
	for _, want := range []string{"Deployment/" + d.env.Namespace + "/web", ".spec.replicas", "kubectl", "`5`", "**Merge**", "**Close**"} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("body lacks %q:\n%s", want, pr.Body)
		}
	}
	tip := d.branch()
	if got := replicasOf(d.renderedWeb(tip)); got != 5 {
		t.Errorf("the branch renders replicas %d, want the live 5", got)
	}
	files := d.changedFiles(tip)
	if len(files) != 1 || files["deploy/prod/kustomization.yaml"] == "" {
		t.Fatalf("the commit changes %v, want only the overlay's kustomization", keys(files))
	}
	was, _ := driftRepo["deploy/prod/kustomization.yaml"].(string)
	if diff := lineDiff(d.ns(was), files["deploy/prod/kustomization.yaml"]); diff != "-    count: 2 # at least two for the PDB\n+    count: 5 # at least two for the PDB\n" {
		t.Errorf("the edit should change the count's line only, keeping its comment:\n%s", diff)
	}

	// The drift changes: the same pull request is updated.
	d.scale(6, "kubectl")
	d.waitFor("the pull request to propose 6", func() bool { return strings.Contains(d.pull(pr.Number).Body, "`6`") })
	if got := replicasOf(d.renderedWeb(d.branch())); got != 6 {
		t.Errorf("after the update the branch renders %d, want 6", got)
	}
	if n := len(d.gh.Pulls(fullName)); n != 1 {
		t.Errorf("%d pull requests, want the one updated", n)
	}

	// Scaled back to Git's count: closed with a comment, branch deleted.
	d.scale(2, "kubectl")
	d.waitFor("the pull request to close", func() bool { return d.pull(pr.Number).State == "closed" })
	if commentsWith(d.gh, pr.Number, "matches Git again") != 1 {
		t.Errorf("closed without exactly one comment saying why: %+v", d.gh.Comments(fullName, pr.Number))
	}
	if d.pull(pr.Number).Merged {
		t.Error("closing must not merge")
	}
	// The branch is deleted right after the pull request is closed.
	d.waitFor("the drift branch to be deleted", func() bool { return d.branch().IsZero() })

	// A new drift opens a new pull request; a person closes it unmerged.
	d.scale(7, "kubectl")
	d.waitFor("a second pull request", func() bool { return len(d.openPulls()) == 1 })
	second := d.openPulls()[0].Number
	if second == pr.Number {
		t.Fatal("a closed pull request was reopened")
	}
	d.gh.ClosePull(fullName, second, false)
	d.loop.Nudge(fullName)
	d.settle(4)
	if open := d.openPulls(); len(open) != 0 {
		t.Fatalf("the drift a person rejected was proposed again: %+v", open)
	}

	// A different drift is a new question.
	d.scale(8, "kubectl")
	d.waitFor("a third pull request", func() bool { return len(d.openPulls()) == 1 })
	third := d.openPulls()[0].Number

	// A person pushes to the branch: driftback stops force-pushing.
	tip = d.branch()
	d.t.Logf("person pushes on %s", tip)
	wt, err := d.local.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.Checkout(&git.CheckoutOptions{Hash: tip, Force: true}); err != nil {
		t.Fatal(err)
	}
	personal, err := wt.Commit("keep 8 but note why", &git.CommitOptions{AllowEmptyCommits: true,
		Author: &object.Signature{Name: "dev", Email: "dev@example.com", When: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	d.push(map[string]plumbing.Hash{"refs/heads/driftback/drift/prod": personal})
	d.scale(9, "kubectl")
	d.waitFor("a comment instead of a push", func() bool { return commentsWith(d.gh, third, "has commits from a person") == 1 })
	if got := d.branch(); got != personal {
		t.Errorf("the branch was moved from the person's %s to %s", personal, got)
	}
	d.settle(3)
	if n := commentsWith(d.gh, third, "has commits from a person"); n != 1 {
		t.Errorf("%d comments about the person's branch, want one", n)
	}
}

// lineDiff lists the lines removed (-) and added (+) between two texts of the
// same line count, in order.
func lineDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(la) != len(lb) {
		return fmt.Sprintf("line count %d → %d:\n%s", len(la), len(lb), b)
	}
	var out strings.Builder
	for i := range la {
		if la[i] != lb[i] {
			fmt.Fprintf(&out, "-%s\n+%s\n", la[i], lb[i])
		}
	}
	return out.String()
}

// TestImageEnvSecretAndAdoption: a set image lands in the overlay's images
// entry, an env var edited on the Deployment that comes from the shared base
// becomes a patch in production only, a Secret edited live is named by key
// and never written, and a ConfigMap a person created is adopted.
func TestImageEnvSecretAndAdoption(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 300*time.Millisecond, func(p *config.Policy) { p.AdoptUnmanaged = true })
	d.patch("Deployment", "web", "kubectl-set", `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.example.com/web:1.2.0"}]}}}}`)
	d.patch("Deployment", "web", "kubectl-edit", `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"LOG_LEVEL","value":"debug"}]}]}}}}`)
	// Secret values that must never be logged: a plain one, a PEM key (many
	// lines) and a credential nested in JSON, as in a dockerconfigjson.
	const pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7canaryPEMline1\nQ2FuYXJ5UEVNbGluZTJjYW5hcnlQRU1saW5lMmNhbmFyeVBFTWxpbmUyY2FuYXJ5\n-----END PRIVATE KEY-----\n"
	const nested = `{"auths":{"registry.example.com":{"auth":"Y2FuYXJ5LW5lc3RlZC1kb2NrZXItYXV0aA=="}}}`
	for _, v := range []string{"s3cr3t-live-value", pem, nested, "Y2FuYXJ5LW5lc3RlZC1kb2NrZXItYXV0aA=="} {
		d.logs.secret(v)
	}
	patch, err := json.Marshal(map[string]any{"stringData": map[string]string{"token": "s3cr3t-live-value", "tls.key": pem, ".dockerconfigjson": nested}})
	if err != nil {
		t.Fatal(err)
	}
	d.patch("Secret", "api-token", "kubectl-edit", string(patch))
	if _, err := d.env.Client.CoreV1().ConfigMaps(d.env.Namespace).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "feature-flags"}, Data: map[string]string{"checkout": "on"},
	}, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		t.Fatal(err)
	}
	d.run()
	d.waitFor("a drift pull request", func() bool { return len(d.openPulls()) == 1 })
	pr := d.openPulls()[0]
	tip := d.branch()
	files := d.changedFiles(tip)
	want := []string{"deploy/prod/configmap-feature-flags.yaml", "deploy/prod/driftback-deployment-web.yaml", "deploy/prod/kustomization.yaml"}
	if got := keys(files); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the commit changes %v, want %v (never the shared base)", got, want)
	}
	k := files["deploy/prod/kustomization.yaml"]
	for _, s := range []string{`newTag: "1.2.0"`, "- path: driftback-deployment-web.yaml", "- configmap-feature-flags.yaml", "# Pinned per environment by release tooling."} {
		if !strings.Contains(k, s) {
			t.Errorf("kustomization lacks %q:\n%s", s, k)
		}
	}
	if !strings.Contains(files["deploy/prod/driftback-deployment-web.yaml"], "value: debug") {
		t.Errorf("the patch does not set LOG_LEVEL:\n%s", files["deploy/prod/driftback-deployment-web.yaml"])
	}
	web := d.renderedWeb(tip)
	b, _ := json.Marshal(web)
	if !strings.Contains(string(b), `"image":"registry.example.com/web:1.2.0"`) || !strings.Contains(string(b), `"value":"debug"`) {
		t.Errorf("the branch does not render the live image and env: %s", b)
	}
	secretB64 := base64.StdEncoding.EncodeToString([]byte("s3cr3t-live-value"))
	for name, content := range files {
		if strings.Contains(content, "s3cr3t") || strings.Contains(content, secretB64) {
			t.Errorf("%s holds the live Secret value", name)
		}
	}
	if strings.Contains(pr.Body, "s3cr3t") || strings.Contains(pr.Body, secretB64) {
		t.Error("the pull request shows the live Secret value")
	}
	for _, s := range []string{"Secret/" + d.env.Namespace + "/api-token", "keys `token` (values hidden)", "ConfigMap/" + d.env.Namespace + "/feature-flags", "kubectl-create", "kubectl-set", "kubectl-edit"} {
		if !strings.Contains(pr.Body, s) {
			t.Errorf("body lacks %q:\n%s", s, pr.Body)
		}
	}
	cm := files["deploy/prod/configmap-feature-flags.yaml"]
	for _, gone := range []string{"uid:", "resourceVersion:", "managedFields", "creationTimestamp"} {
		if strings.Contains(cm, gone) {
			t.Errorf("the adopted ConfigMap keeps the server's %s:\n%s", gone, cm)
		}
	}
	tree, err := render.GitTree(d.local, tip.String())
	if err != nil {
		t.Fatal(err)
	}
	base, err := tree.ReadFile("base/deployment.yaml")
	if err != nil || string(base) != driftRepo["base/deployment.yaml"] {
		t.Errorf("the shared base changed: %v\n%s", err, base)
	}
}

// TestChangesThatAreNotProposed: replicas the HPA owns, a rollout restart,
// and a change reverted within the quiet period never become a pull request.
func TestChangesThatAreNotProposed(t *testing.T) {
	t.Parallel()
	const quiet = 3 * time.Second
	d := newDriftWorld(t, quiet, nil)
	d.run()
	d.settle(1)
	d.scale(9, "kube-controller-manager") // the HPA scales through the controller manager
	d.patch("Deployment", "web", "kubectl-rollout", `{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-11-29T12:00:00Z"}}}}}`)
	d.patch("Deployment", "web", "kubectl-edit", `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"LOG_LEVEL","value":"trace"}]}]}}}}`)
	// The loop must have seen the edit waiting out its quiet period, or its
	// revert proves nothing; the HPA's scale and the restart never count.
	drifted := func() float64 {
		return gauge(t, d.srv.Metrics, "driftback_drifted_objects", map[string]string{"repo": fullName, "target": "prod"})
	}
	d.waitFor("the loop to report the edit pending", func() bool { return drifted() == 1 })
	d.patch("Deployment", "web", "kubectl-edit", `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"LOG_LEVEL","value":"info"}]}]}}}}`)
	reverted := time.Now()
	d.waitFor("the loop to see the revert", func() bool { return drifted() == 0 })
	// Past the quiet period the edit would have had, and of the HPA's scale.
	d.waitFor("the quiet period to pass", func() bool { return time.Since(reverted) > quiet })
	d.settle(2)
	if p := d.gh.Pulls(fullName); len(p) != 0 {
		t.Fatalf("pull requests for an HPA's scale, a restart or a reverted edit: %+v", p)
	}
	if got := drifted(); got != 0 {
		t.Errorf("%v drifted objects after the revert, want 0", got)
	}
}

// TestAutoscaledScaleIsNotProposed: a person's `kubectl scale` of a
// Deployment that a live HorizontalPodAutoscaler targets stays out of Git:
// the loop sees it and opens no pull request, since the autoscaler owns the
// replicas.
func TestAutoscaledScaleIsNotProposed(t *testing.T) {
	t.Parallel()
	const quiet = time.Second
	d := newDriftWorld(t, quiet, nil)
	d.main = d.commit(d.main, map[string]any{
		"deploy/prod/kustomization.yaml": strings.Replace(driftRepo["deploy/prod/kustomization.yaml"].(string), "  - token.yaml\n", "  - token.yaml\n  - hpa.yaml\n", 1),
		"deploy/prod/hpa.yaml": `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: web
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 10
`,
	})
	d.push(map[string]plumbing.Hash{"refs/heads/main": d.main})
	d.applyOverlay(d.main, "deploy/prod")
	d.run()
	d.settle(1)
	scaled := time.Now()
	d.scale(6, "kubectl")
	drifted := func() float64 {
		return gauge(t, d.srv.Metrics, "driftback_drifted_objects", map[string]string{"repo": fullName, "target": "prod"})
	}
	d.waitFor("the loop to see the scale", func() bool { return drifted() == 1 })
	d.waitFor("the quiet period to pass", func() bool { return time.Since(scaled) > 2*quiet })
	d.settle(2)
	if p := d.gh.Pulls(fullName); len(p) != 0 {
		t.Fatalf("a pull request for replicas an autoscaler owns: %+v", p)
	}
}

// TestAnnotatedOnlyProposesWhatPeopleExplain: with codify: annotated, a
// change is proposed only on an object carrying driftback.io/intent, and
// the pull request quotes it.
func TestAnnotatedOnlyProposesWhatPeopleExplain(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 300*time.Millisecond, func(p *config.Policy) { p.Codify = config.CodifyAnnotated })
	d.run()
	d.scale(4, "kubectl")
	d.settle(4)
	if p := d.gh.Pulls(fullName); len(p) != 0 {
		t.Fatalf("an unexplained change was proposed: %+v", p)
	}
	d.patch("Deployment", "web", "kubectl-annotate", `{"metadata":{"annotations":{"driftback.io/intent":"INC-42: more capacity for the sale"}}}`)
	d.waitFor("a pull request", func() bool { return len(d.openPulls()) == 1 })
	body := d.openPulls()[0].Body
	if !strings.Contains(body, "INC-42: more capacity for the sale") || !strings.Contains(body, "`4`") {
		t.Errorf("the body does not quote the intent and the change:\n%s", body)
	}
}

// TestReportModeKeepsOneIssue: codify: report keeps one issue per target
// instead of a pull request, and closes it when the drift is gone.
// TestReportModeKeepsOneIssue: without the dashboard (app.yml turns it
// off), report mode keeps one issue per target, current and closed when the
// cluster matches Git again.
func TestReportModeKeepsOneIssue(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 300*time.Millisecond, func(p *config.Policy) { p.Codify = config.CodifyReport })
	off := false
	d.srv.App.cfg.Server.DriftDashboard = &off
	d.run()
	d.scale(3, "kubectl")
	d.waitFor("an issue", func() bool { return len(d.gh.Issues(fullName)) == 1 })
	d.scale(4, "kubectl")
	d.waitFor("the issue to show 4", func() bool { return strings.Contains(d.gh.Issues(fullName)[0].Body, "`4`") })
	is := d.gh.Issues(fullName)
	if len(is) != 1 || is[0].State != "open" || fmt.Sprint(is[0].Labels) != "[driftback/drift]" {
		t.Fatalf("issues %+v", is)
	}
	if len(d.gh.Pulls(fullName)) != 0 || !d.branch().IsZero() {
		t.Error("report mode pushed a branch or opened a pull request")
	}
	d.scale(2, "kubectl")
	d.waitFor("the issue to close", func() bool { return d.gh.Issues(fullName)[0].State == "closed" })
	if commentsWith(d.gh, is[0].Number, "matches Git again") != 1 {
		t.Error("closed without saying why")
	}
}

// TestUnreachableClusterBlocksOnlyItsTargets: a second cluster whose API
// server accepts connections and never answers does not delay the drift
// pull request of a target on the healthy cluster.
func TestUnreachableClusterBlocksOnlyItsTargets(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 300*time.Millisecond, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	kc := clientcmdapi.NewConfig()
	kc.Clusters["down"] = &clientcmdapi.Cluster{Server: "https://" + ln.Addr().String(), InsecureSkipTLSVerify: true}
	kc.AuthInfos["down"] = &clientcmdapi.AuthInfo{Token: "unused"}
	kc.Contexts["down"] = &clientcmdapi.Context{Cluster: "down", AuthInfo: "down"}
	kc.CurrentContext = "down"
	path := filepath.Join(d.dir, "down.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	d.cfg.Clusters["down"] = config.Cluster{Kubeconfig: path, Mode: "read-only"}
	d.cfg.Targets = append([]config.Target{{Name: "elsewhere", Repo: fullName, Path: "deploy/staging", Cluster: "down",
		Policy: config.Policy{Codify: config.CodifyManual, QuietPeriod: 300 * time.Millisecond, DriftLabels: []string{"driftback/drift"}}}}, d.cfg.Targets...)
	d.run()
	d.scale(4, "kubectl")
	d.waitFor("the healthy cluster's pull request", func() bool { return len(d.openPulls()) == 1 })
	mu.Lock()
	n := len(held)
	mu.Unlock()
	if n == 0 {
		t.Fatal("the unreachable cluster was never tried, so this proves nothing")
	}
}

// TestPersonsPushDuringAnUpdateIsKept: a person pushes to the drift branch
// after driftback read it and before it pushes its update. The push is a
// force-push with lease, so it is refused, driftback reads again, sees the
// person's commit and comments instead: the person's commit stays.
func TestPersonsPushDuringAnUpdateIsKept(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 200*time.Millisecond, nil)
	var personal plumbing.Hash
	var armed, raced atomic.Bool
	d.runHooked(func(_ context.Context, a prgen.Action) {
		if a == prgen.ActionUpdate && armed.Load() && raced.CompareAndSwap(false, true) {
			d.push(map[string]plumbing.Hash{"refs/heads/driftback/drift/prod": personal})
		}
	})
	d.scale(5, "kubectl")
	d.waitFor("a drift pull request", func() bool { return len(d.openPulls()) == 1 })
	number := d.openPulls()[0].Number
	tip := d.branch()
	wt, err := d.local.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.Checkout(&git.CheckoutOptions{Hash: tip, Force: true}); err != nil {
		t.Fatal(err)
	}
	if personal, err = wt.Commit("a person's fix", &git.CommitOptions{AllowEmptyCommits: true,
		Author: &object.Signature{Name: "dev", Email: "dev@example.com", When: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	armed.Store(true) // after personal is set: the store publishes it to the loop
	d.scale(6, "kubectl")
	d.waitFor("a comment instead of the update", func() bool { return commentsWith(d.gh, number, "has commits from a person") == 1 })
	if !raced.Load() {
		t.Fatal("the person's push did not race an update, so this proves nothing")
	}
	if got := d.branch(); got != personal {
		t.Errorf("the person's commit %s was overwritten by %s", personal, got)
	}
}

// TestPullRequestsReadTheDriftLoopsCaches proves that, where this replica
// runs the drift loop, a pull request's comparison reads the live objects
// from the loop's watch caches: no request reaches the cluster. Before the
// loop runs, the same comparison reads the cluster.
func TestPullRequestsReadTheDriftLoopsCaches(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, time.Second, nil)
	d.cfg.Server.DriftInterval = 5 * time.Minute // no periodic checks meanwhile
	reads := d.countClusterReads()
	was := driftRepo["deploy/prod/kustomization.yaml"].(string)
	pr := func(number, count int) int64 {
		t.Helper()
		head := d.commit(d.main, map[string]any{"deploy/prod/kustomization.yaml": d.ns(strings.Replace(was, "count: 2", fmt.Sprintf("count: %d", count), 1))})
		d.openPR(number, d.main, head, nil)
		before := reads.Load()
		d.deliver("pull_request", fmt.Sprintf("d-cache-%d", number), prPayload("opened", number, head.String()))
		d.waitChecks(head.String(), 2)
		if body := d.gh.Comments(fullName, number)[0].Body; !strings.Contains(body, ".spec.replicas") || strings.Contains(body, "could not be read") {
			t.Fatalf("pull request #%d: the comment does not show the live comparison:\n%s", number, body)
		}
		return reads.Load() - before
	}
	if n := pr(20, 3); n == 0 {
		t.Fatal("without the drift loop the comparison made no request: the count is not counting")
	}
	d.run()
	d.settle(1)
	if n := pr(21, 4); n != 0 {
		t.Errorf("with the drift loop's caches warm, the comparison made %d requests to the cluster, want none", n)
	}
}

// TestRelistProposesNothingAgain: a watch that expires, and an apiserver that
// goes away and comes back, make the drift loop's informers list everything
// again. The loop, its caches refilled with the drift it already proposed,
// opens no second pull request, pushes nothing and writes nothing more to
// GitHub.
func TestRelistProposesNothingAgain(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 300*time.Millisecond, nil)
	breaker := kubetest.NewWatchBreaker()
	d.srv.App.wrapKube = breaker.Wrap
	d.run()
	d.settle(1)
	d.scale(5, "kubectl")
	d.waitFor("a drift pull request", func() bool { return len(d.openPulls()) == 1 })
	pr := d.openPulls()[0]
	d.waitFor("the drift label", func() bool { return fmt.Sprint(d.pull(pr.Number).Labels) == "[driftback/drift]" })
	d.settle(2)
	writes := func() int {
		n := 0
		for _, c := range d.gh.Calls() {
			if c.Method != "GET" {
				n++
			}
		}
		return n
	}
	tip, before := d.branch(), writes()
	path := "/apis/apps/v1/namespaces/" + d.env.Namespace + "/deployments"
	for _, down := range []time.Duration{0, 2 * time.Second} {
		lists := breaker.Lists(path)
		breaker.Break(down)
		d.waitFor("the drift loop's watches to list again", func() bool { return breaker.Lists(path) > lists })
		d.settle(3)
	}
	if n := len(d.gh.Pulls(fullName)); n != 1 {
		t.Errorf("%d pull requests after the relists, want the one", n)
	}
	if got := d.pull(pr.Number); got.State != "open" || got.Body != pr.Body {
		t.Errorf("the pull request changed after the relists: %s\n%s", got.State, got.Body)
	}
	if got := d.branch(); got != tip {
		t.Errorf("the drift branch moved from %s to %s", tip, got)
	}
	if got := writes(); got != before {
		t.Errorf("%d writes to GitHub after the relists, want none: %v", got-before, lastCalls(d.gh.Calls(), got-before))
	}
}

// TestALiveValueCannotForgeADecision reproduces the forged-fingerprint
// attack on the real apiserver, git server and GitHub fake: someone who can
// edit a workload sets a value carrying the marker of a drift not yet made
// (production scaled to 6), on a line of its own. driftback proposes that
// value; a reviewer rightly closes the pull request; the value is reverted.
// When production is then scaled to 6 for real, the drift must still be
// proposed: the closed pull request's description is driftback's, and only
// the marker driftback wrote there counts.
func TestALiveValueCannotForgeADecision(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 300*time.Millisecond, nil)
	d.run()
	d.settle(2)
	scaled := &prgen.Plan{Overlay: "deploy/prod", Codified: []prgen.Codified{
		{Object: "Deployment/" + d.env.Namespace + "/web", Path: ".spec.replicas", Value: int64(6)}}}
	forged := prgen.FingerprintMarker(scaled)
	d.patch("Deployment", "web", "kubectl-edit", fmt.Sprintf(
		`{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"LOG_LEVEL","value":%q}]}]}}}}`, "debug\n"+forged+"\n"))
	d.waitFor("the edited value proposed", func() bool { return len(d.openPulls()) == 1 })
	decoy := d.openPulls()[0]
	if !strings.Contains(decoy.Body, "LOG_LEVEL") {
		t.Fatalf("the drift pull request does not show the edited value:\n%s", decoy.Body)
	}
	if strings.Count(decoy.Body, "<!--") != 1 {
		t.Errorf("the description carries a marker it did not write:\n%s", decoy.Body)
	}
	d.gh.ClosePull(fullName, decoy.Number, false) // a reviewer says no
	d.patch("Deployment", "web", "kubectl-edit",
		`{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"LOG_LEVEL","value":"info"}]}]}}}}`)
	d.loop.Nudge(fullName)
	d.settle(3)

	d.scale(6, "kubectl")
	d.waitFor("the real drift proposed", func() bool { return len(d.openPulls()) == 1 })
	real := d.openPulls()[0]
	if real.Number == decoy.Number || prgen.FingerprintOf(real.Body) != scaled.Fingerprint() {
		t.Errorf("pull request #%d with fingerprint %q, want a new one with the forged %q", real.Number, prgen.FingerprintOf(real.Body), scaled.Fingerprint())
	}
}
