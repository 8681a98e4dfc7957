package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/driftback/driftback/internal/gitrepo"
	"github.com/driftback/driftback/reconcile"
	"github.com/driftback/driftback/report/jsonreport"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-git/go-git/v5"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/internal/githubfake"
	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/render"
)

// TestPublicRepository runs serve's pull-request flow on a clone of a public
// GitOps repository, as docs/conformance.md records: the reconciler objects
// (and the ConfigMaps and Secrets of their variables) of the files
// DRIFTBACK_PUBLIC_OBJECTS names (comma-separated, read at the head; an
// absolute path is read from disk, for objects the repository generates) are applied to the test cluster with their GitRepository and
// Application URLs pointed at the GitHub fake, the clone's history is pushed
// to the test git server, and a pull request from DRIFTBACK_PUBLIC_BASE to
// DRIFTBACK_PUBLIC_HEAD is compared. It prints what `targets` says and the
// report as JSON, and fails on an internal error. It needs a clone on disk,
// so it runs only when DRIFTBACK_PUBLIC_REPO names one:
//
//	DRIFTBACK_PUBLIC_REPO=/src/flux2-hub-spoke-example DRIFTBACK_PUBLIC_BASE=b0686db \
//	DRIFTBACK_PUBLIC_HEAD=b846650 DRIFTBACK_PUBLIC_OBJECTS=hub/staging.yaml DRIFTBACK_PUBLIC_BOOTSTRAP=./hub \
//	go test -run TestPublicRepository -v ./app
//
// DRIFTBACK_PUBLIC_BRANCH is the branch the pull request merges into and the
// reconciler objects follow (default main; argocd-example-apps' follow master).
// DRIFTBACK_PUBLIC_SYNC=1 first applies each target's build at the base as
// its reconciler would (with its tracking labels), so the pull request is
// compared with a cluster that runs the base.
// DRIFTBACK_PUBLIC_BOOTSTRAP adds what `flux bootstrap` creates for a
// cluster directory: the flux-system GitRepository and Kustomization.
func TestPublicRepository(t *testing.T) {
	dir := os.Getenv("DRIFTBACK_PUBLIC_REPO")
	if dir == "" {
		t.Skip("DRIFTBACK_PUBLIC_REPO names no clone of a public repository (see docs/conformance.md)")
	}
	base, head := os.Getenv("DRIFTBACK_PUBLIC_BASE"), os.Getenv("DRIFTBACK_PUBLIC_HEAD")
	branch := os.Getenv("DRIFTBACK_PUBLIC_BRANCH")
	if branch == "" {
		branch = "main"
	}
	w := newWorld(t, func(cfg *config.Config) {
		cfg.Targets = nil
		cl := cfg.Clusters["test"]
		cl.Discover = &config.Discover{Flux: true, ArgoCD: true, Namespaces: []string{"*"}} // a repository's own objects, wherever it puts them
		cfg.Clusters["test"] = cl
	})
	kubetest.InstallCRDs(t, w.env, kubetest.ReconcilerCRDs(t)...)
	host, _, _ := strings.Cut(string(discover.HostOf(w.gh.URL())), ":")

	// The clone's history, pushed as the repository the fake serves.
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	base, head = git("rev-parse", base), git("rev-parse", head)
	remote := strings.Replace(w.git.HTTPAddress(), "://", "://x-access-token:"+w.gh.Token(instID)+"@", 1) + "/" + fullName + ".git"
	refs := []string{base + ":refs/heads/main", head + ":refs/pull/1/head"}
	if branch != "main" {
		refs = append(refs, base+":refs/heads/"+branch)
	}
	if out, err := exec.Command("git", append([]string{"-C", dir, "push", "-q", "--force", remote}, refs...)...).CombinedOutput(); err != nil {
		t.Fatalf("push: %v\n%s", err, out)
	}
	w.gh.SetPull(fullName, githubfake.Pull{Number: 1, Title: "public", User: "dev", HeadSHA: head, BaseSHA: base, BaseRef: branch, HeadRef: "change"})

	// The reconciler objects, pointed at the fake.
	repo, err := gitrepo.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := render.GitTree(repo, head)
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	for _, f := range strings.Split(os.Getenv("DRIFTBACK_PUBLIC_OBJECTS"), ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		b, err := tree.ReadFile(f)
		if filepath.IsAbs(f) {
			// Objects the repository generates (a Helm app of apps), as
			// its reconciler would apply them.
			b, err = os.ReadFile(f)
		}
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		objs, err := render.ParseObjects(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, o := range objs {
			switch gvk := o.GroupVersionKind(); {
			case gvk.Group == "kustomize.toolkit.fluxcd.io", gvk.Group == "source.toolkit.fluxcd.io", gvk.Group == "argoproj.io":
			case gvk.Group == "" && (gvk.Kind == "ConfigMap" || gvk.Kind == "Secret"): // postBuild's variables
			default:
				continue
			}
			js, _ := json.Marshal(o.Object)
			// Every github.com repository is the one the fake serves.
			s := strings.NewReplacer("github.com:", host+":", "github.com/", host+"/").Replace(string(js))
			for _, prefix := range []string{"https://" + host + "/", "ssh://git@" + host + "/", "git@" + host + ":"} {
				if i := strings.Index(s, prefix); i >= 0 {
					rest := s[i+len(prefix):]
					end := strings.IndexAny(rest, `"`)
					s = strings.ReplaceAll(s, prefix+rest[:end], "https://"+host+"/"+fullName)
				}
			}
			if err := json.Unmarshal([]byte(s), &o.Object); err != nil {
				t.Fatal(err)
			}
			if o.GetNamespace() == "" {
				o.SetNamespace("flux-system")
			}
			_, err = w.env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.GetNamespace()}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			if o.GetKind() == "Application" && o.GetNamespace() == "argocd" {
				kubetest.ArgoCDDefaultProject(t, w.env, "argocd") // as Argo CD's install makes it
			}
			kubetest.Apply(t, w.env.Config, "kubectl", o)
			applied++
		}
	}
	if path := os.Getenv("DRIFTBACK_PUBLIC_BOOTSTRAP"); path != "" {
		// What `flux bootstrap` creates: the repository as flux-system's
		// source, and a Kustomization of the cluster's directory.
		for _, y := range []string{
			"apiVersion: v1\nkind: Namespace\nmetadata: {name: flux-system}\n",
			"apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: flux-system, namespace: flux-system}\n" +
				"spec: {interval: 1m, url: 'https://" + host + "/" + fullName + "', ref: {branch: " + branch + "}}\n",
			"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: flux-system, namespace: flux-system}\n" +
				"spec: {interval: 10m, path: '" + path + "', prune: true, sourceRef: {kind: GitRepository, name: flux-system}}\n",
		} {
			objs, err := render.ParseObjects([]byte(y))
			if err != nil {
				t.Fatal(err)
			}
			kubetest.Apply(t, w.env.Setup, "kubectl", objs[0])
			applied++
		}
	}
	compared := w.captureComparisons()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.srv.App.targets.Run(ctx)
	w.srv.App.targets.WaitSynced(ctx, e2eWait)
	ts, skipped := w.srv.App.targetsOf(fullName)
	t.Logf("discovered for %s: %d targets, %d not rendered", fullName, len(ts), len(skipped))
	if os.Getenv("DRIFTBACK_PUBLIC_SYNC") != "" {
		syncAt(t, w, repo, base, ts)
	}
	if code := w.deliver("pull_request", "d-public", prPayload("opened", 1, head)); code != http.StatusAccepted {
		t.Fatalf("delivery: %d", code)
	}
	eventually(t, func() bool { rep, _ := compared(); return rep != nil }, "the pull request to be compared")
	w.waitIdle()
	rep, checks := compared()
	list, err := ListTargets(ctx, w.cfg)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, tg := range list.Targets {
		lines = append(lines, fmt.Sprintf("target %s: %s; build %s; codify %s", tg.Path, tg.Source, tg.Build, tg.Codify))
	}
	for _, n := range list.NotRendered {
		lines = append(lines, fmt.Sprintf("not rendered: %s: %s", n.Source, n.Reason))
	}
	sort.Strings(lines)
	t.Logf("%d reconciler objects applied; targets:\n%s", applied, strings.Join(lines, "\n"))
	for _, c := range checks {
		if !c.Unaffected {
			t.Logf("check %s: %s %q", c.Name, c.Conclusion, c.Title)
		}
	}
	out, _ := jsonreport.Marshal(rep)
	if file := os.Getenv("DRIFTBACK_PUBLIC_OUT"); file != "" {
		if err := os.WriteFile(filepath.Clean(file), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(string(out), "internal error") {
		t.Errorf("an internal error:\n%s", out)
	}
	for _, tg := range rep.Targets {
		actions := map[drift.Action]int{}
		for _, ch := range tg.Told() {
			actions[ch.Action]++
		}
		t.Logf("compared %s: %v; not compared %q; live %q; errors %v; notes %v", tg.Path, actions, tg.NotCompared, tg.LiveError, tg.Errors, tg.Notes)
	}
	for _, n := range rep.NotRendered {
		t.Logf("not rendered on the pull request: %s (%s): %s", n.Source, n.Path, n.Reason)
	}
}

// syncAt applies each target's build at the commit rev as its reconciler
// would: Flux's build carries its owner labels; Argo CD's objects get the
// instance label it tracks with. An object the cluster cannot take (a kind it
// does not serve) is counted and skipped.
func syncAt(t *testing.T, w *world, repo *git.Repository, rev string, ts []targets.Target) {
	t.Helper()
	tree, err := render.GitTree(repo, rev)
	if err != nil {
		t.Fatal(err)
	}
	a, err := kubetest.NewApplier(w.env.Setup)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tg := range ts {
		// Charts render for the test cluster, as the reconciler renders them.
		var vars reconcile.Vars
		vars.Helm, vars.HelmNote = reconcile.HelmCapabilities(ctx, tg.Build(), true, w.srv.App.capabilities)
		vars.Charts = w.srv.App.charts.Access(tg.Build(), w.srv.App.charts.TrustIn(tree), true, w.srv.App.kubeClient)
		b := reconcile.Build(ctx, render.New(render.DefaultOptions()), tree, tg.Build(), vars)
		manager := "kustomize-controller"
		applied, failed := 0, 0
		for _, o := range b.Objects {
			if f := tg.Found; f != nil && f.Reconciler == discover.ReconcilerArgoCD {
				manager = "argocd-controller"
				labels := o.GetLabels()
				if labels == nil {
					labels = map[string]string{}
				}
				labels["app.kubernetes.io/instance"] = f.Tracking.ArgoCDApp
				o.SetLabels(labels)
			}
			if ns := o.GetNamespace(); ns != "" {
				_, err := w.env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatal(err)
				}
			}
			if err := a.Apply(manager, o); err != nil {
				failed++
				t.Logf("sync %s: %v", tg.Path, err)
				continue
			}
			applied++
		}
		t.Logf("synced %s at %s: %d objects applied, %d refused; problems %v", tg.Path, rev[:min(12, len(rev))], applied, failed, b.Problems)
	}
}
