package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/driftback/driftback/app/config"
	ghapp "github.com/driftback/driftback/app/github"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/admission"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/drift/syncfail"
	"github.com/driftback/driftback/internal/cliflags"
	"github.com/driftback/driftback/internal/gitrepo"
	"github.com/driftback/driftback/merge"
	"github.com/driftback/driftback/reconcile"
	"github.com/driftback/driftback/reconcile/compare"
	"github.com/driftback/driftback/reconcile/prepare"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/render/removal"
	"github.com/driftback/driftback/report"
	"github.com/driftback/driftback/report/jsonreport"
	"github.com/driftback/driftback/report/terminal"
	"github.com/driftback/driftback/rollback"
)

// multiFlag is a repeatable flag: every value is kept.
type multiFlag = cliflags.Multi

func runDiff(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("diff", "diff (--repo DIR --base REF --head REF | --base DIR --head DIR) [--path OVERLAY]... (--kubeconfig FILE [--context NAME] | --live DIR) [--format text|markdown|json] [--mode read-only|dry-run] [--publish [--fail-on DANGER]...]", stderr)
	repo := fs.String("repo", "", "repository `DIR`; --base and --head are then refs in it")
	base := fs.String("base", "", "the base: a ref with --repo, else a directory")
	head := fs.String("head", "", "the head: a ref with --repo, else a directory")
	merged := fs.Bool("merged", false, "with --repo: compare --base with what merging --head into it gives (a merge made file by file, refused where both change a file differently); default: --head against where it left --base (their merge base), as git diff BASE...HEAD")
	var paths, ignoreManagers multiFlag
	fs.Var(&paths, "path", "an overlay to compare (repeatable); default: the overlays the change affects")
	kubeconfig := fs.String("kubeconfig", "", "read the live cluster through this kubeconfig `FILE`")
	kubeContext := fs.String("context", "", "the kubeconfig context (default: its current context)")
	limits := clientLimitFlags(fs)
	live := fs.String("live", "", "read the live state from this `DIR` of object dumps (kubectl get -o yaml) instead of a cluster")
	format := fs.String("format", "", "output: text (plain, coloured on a terminal unless NO_COLOR is set), markdown (the pull-request comment) or json; default text, markdown with --publish")
	verbose := fs.Bool("v", false, "text: also each created or deleted object's whole YAML (markdown and json always hold it)")
	mode := fs.String("mode", string(drift.ModeReadOnly), "read-only predicts server-side apply locally (needs get/list); dry-run asks the server (needs patch: write access)")
	manager := fs.String("field-manager", "", "the GitOps applier's field manager (default: detected from live objects, else kustomize-controller)")
	fs.Var(&ignoreManagers, "ignore-manager", "also ignore fields owned live by this field manager (repeatable; a trailing * matches a prefix)")
	argoApp := fs.String("argocd-app", "", "with --kubeconfig, build as this Argo CD Application (`NAME`) does, read from the cluster (its kustomize or directory options, its destination namespace); always, prune live objects it tracks that the head drops")
	argoNS := fs.String("argocd-namespace", "argocd", "the namespace of Argo CD and its Applications")
	fluxKs := fs.String("flux-kustomization", "", "build as this Flux Kustomization (`NAMESPACE/NAME`) does, read with its variables from the cluster (--kubeconfig) or from --flux-kustomization-file, and prune what it applied that the head drops")
	fluxFile := fs.String("flux-kustomization-file", "", "read the Flux Kustomization from this `FILE` of the repository, at base and at head (variables from its substitute only)")
	selector := fs.String("prune-selector", "", "prune live objects matching this label selector that the head drops")
	enableHelm := fs.Bool("enable-helm", false, "inflate kustomizations' helmCharts, as kustomize build --enable-helm does (an Argo CD Application found on the cluster follows argocd-cm's kustomize.buildOptions)")
	admissionConfig := fs.String("admission-config", "", "with --kubeconfig or --live, the cluster's PodSecurity admission configuration: kube-apiserver's AdmissionConfiguration or PodSecurityConfiguration `FILE` (default: Kubernetes' own, privileged)")
	plain := fs.Bool("plain", false, "with --kubeconfig, build every path plainly, not as the Flux Kustomization or Argo CD Application on the cluster that builds it")
	var chartRepos, chartHosts multiFlag
	fs.Var(&chartRepos, "chart-repository", "also trust this chart repository `URL` (https://, oci://), with everything under it, besides those the base names (repeatable)")
	fs.Var(&chartHosts, "chart-private-host", "a chart repository `HOST` that may resolve to a private or loopback address (repeatable)")
	reportFile := fs.String("report-file", "", "also write the JSON report to this `FILE` (with --publish in GitHub Actions, the step's output report names it)")
	pub := addPublishFlags(fs)
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return parseExit(err)
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "driftback diff: "+format+"\n", a...)
		return exitError
	}
	if len(rest) > 0 {
		return fail("unexpected argument %q: overlays are given with --path", rest[0])
	}
	if err := pub.check(); err != nil {
		return fail("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var onPR *pullRequestRun
	if pub.publish {
		if onPR, err = openPullRequest(ctx, pub, os.Getenv, stderr); err != nil {
			return fail("%v", err)
		}
		// In a checkout, the pull request's own commits are the default.
		if *repo != "" && *base == "" && *head == "" {
			*base, *head = onPR.pr.BaseSHA, onPR.pr.HeadSHA
		}
	}
	if *base == "" || *head == "" {
		return fail("give --base and --head (refs with --repo, or directories)")
	}
	if *live != "" && *kubeconfig != "" {
		return fail("give --live or --kubeconfig, not both")
	}
	if *format == "" && pub.publish {
		*format = "markdown" // the job's log shows what the comment says
	}
	if *format = outputFormat(*format, stdout); *format == "" {
		return fail("--format must be text, markdown or json")
	}
	opts := drift.DefaultOptions()
	opts.Mode = drift.Mode(*mode)
	opts.Manager = *manager
	opts.IgnoreManagers = append(opts.IgnoreManagers, ignoreManagers...)
	opts.Tracking = drift.Tracking{ArgoCDApp: *argoApp, Selector: *selector}
	// As the App: a pull request's author, even shown the cluster, cannot
	// ask whether a guess is a Secret's value: its values are compared
	// Git against Git.
	opts.SecretsFromGit = onPR != nil
	if *fluxKs != "" {
		ns, name, ok := strings.Cut(*fluxKs, "/")
		if !ok {
			return fail("--flux-kustomization must be NAMESPACE/NAME")
		}
		opts.Tracking.FluxNamespace, opts.Tracking.FluxName = ns, name
	}
	switch opts.Mode {
	case drift.ModeReadOnly:
	case drift.ModeDryRun:
		if *kubeconfig == "" {
			return fail("--mode dry-run asks the apiserver: it needs --kubeconfig")
		}
	default:
		return fail("--mode must be read-only or dry-run, not %q", *mode)
	}

	baseTree, headTree, gitRepo, err := diffTrees(*repo, *base, *head)
	if err != nil {
		return fail("%v", err)
	}
	var compared *drift.Compared
	var tipTree *render.Tree // the base's tip, when the head is compared with a merge base
	var pr *ghapp.PullRequest
	if onPR != nil {
		pr = onPR.pr
	}
	if gitRepo != nil {
		if tipTree, baseTree, headTree, compared, err = comparedTrees(gitRepo, baseTree, headTree, *merged, pr); err != nil {
			return fail("%v", err)
		}
	} else if *merged {
		return fail("--merged merges commits: give --repo")
	}
	overlays, err := overlayArgs(paths)
	if err != nil {
		return fail("%v", err)
	}
	var recon *compare.Build
	switch {
	case *fluxFile != "" || (*fluxKs != "" && *kubeconfig != ""):
		if recon, err = fluxBuild(ctx, *fluxKs, *fluxFile, *kubeconfig, *kubeContext, *limits, baseTree, headTree); err != nil {
			return fail("%v", err)
		}
	case *argoApp != "" && *kubeconfig != "":
		if recon, err = argoBuild(ctx, *argoApp, *argoNS, *kubeconfig, *kubeContext, *limits); err != nil {
			return fail("%v", err)
		}
	}
	if recon != nil {
		if len(overlays) > 0 && (len(overlays) != 1 || overlays[0] != recon.Path()) {
			return fail("--path %s: the reconciler builds %s", strings.Join(overlays, ", "), recon.Path())
		}
		overlays = []string{recon.Path()}
	} else if err := overlaysExist(baseTree, headTree, overlays); err != nil {
		return fail("%v", err)
	}
	podSecurity, err := admission.ReadAdmissionConfigFile(*admissionConfig)
	if err != nil {
		return fail("--admission-config %s: %v", *admissionConfig, err)
	}
	kubeVersion := ""
	var reader object.LiveReader
	liveErr := ""
	switch {
	case onPR != nil && onPR.fork() && !pub.forkLive && (*live != "" || *kubeconfig != ""):
		// As the App: a fork's author is not shown the cluster.
		liveErr = "this pull request comes from a fork: the cluster is not compared (--fork-live compares it)"
	case *live != "":
		r, err := livestate.ReadDir(*live)
		if err != nil {
			return fail("%v", err)
		}
		reader = r
	case *kubeconfig != "":
		cfg, err := kubeConfig(*kubeconfig, *kubeContext, *limits)
		if err != nil {
			return fail("%v", err)
		}
		r, err := livestate.NewClusterReader(cfg)
		if err != nil {
			return fail("%v", err)
		}
		reader = r
		if v, _, err := r.Capabilities(ctx); err == nil {
			kubeVersion = v
		}
		if opts.Mode == drift.ModeDryRun {
			if opts.DryRun, err = livestate.NewServerDryRun(cfg); err != nil {
				return fail("%v", err)
			}
		}
	default:
		liveErr = "no cluster given (--kubeconfig or --live)"
	}

	setup := compare.Setup{Plain: *plain, EnableHelm: *enableHelm, ArgoNamespace: *argoNS, Base: baseTree, Trusted: chartRepos, PrivateHosts: chartHosts, Renderer: render.New(render.DefaultOptions())}
	if reader != nil && *kubeconfig != "" {
		if setup.Config, err = kubeConfig(*kubeconfig, *kubeContext, *limits); err != nil {
			return fail("%v", err)
		}
	}
	say := func(format string, a ...any) { fmt.Fprintf(stderr, "driftback: "+format+"\n", a...) }
	if setup.Config != nil && !setup.Plain && recon == nil {
		if setup.Found, err = compare.ReconcilersOnCluster(ctx, setup.Config, *argoNS, remoteKeys(gitRepo)); err != nil {
			say("the reconciler objects on the cluster could not be read, so every path is built plainly: %v", err)
		}
	}
	if len(overlays) == 0 {
		if overlays, err = affected(baseTree, headTree, setup.Found); err != nil {
			return fail("%v", err)
		}
		throughOthers(stderr, headTree, overlays, changedFiles(baseTree, headTree))
	}
	built := compare.Builds(ctx, overlays, recon, setup, say)

	var history func(context.Context, *drift.Target, object.LiveReader)
	if gitRepo != nil {
		// What a revert does not restore, from the repository's history
		// and the live cluster, as serve says it.
		history = restores(gitRepo, compared)
	}
	rep, err := diffOverlays(ctx, setup.Renderer, tipTree, baseTree, headTree, overlays, built, liveSide{reader, liveErr, *argoNS, podSecurity, kubeVersion}, opts, history, progress(stderr))
	if err != nil {
		return fail("%v", err)
	}
	rep.Compared = compared
	switch *format {
	case "json":
		b, err := jsonreport.Marshal(rep)
		if err != nil {
			return fail("%v", err)
		}
		fmt.Fprintf(stdout, "%s\n", b)
	case "text":
		shown := rep
		if !*verbose {
			shown = withoutManifests(rep)
		}
		fmt.Fprint(stdout, terminal.Render(strings.Join(report.Comment(shown, report.CommentOptions{Limit: math.MaxInt}), "\n"), colour(stdout)))
	default:
		parts := report.Comment(rep, report.CommentOptions{})
		fmt.Fprint(stdout, strings.Join(parts, "\n"))
	}
	if *reportFile != "" {
		b, err := jsonreport.Marshal(rep)
		if err == nil {
			err = os.WriteFile(*reportFile, append(b, '\n'), 0o644)
		}
		if err != nil {
			return fail("--report-file: %v", err)
		}
	}
	if onPR != nil {
		j, err := onPR.judge(ctx, rep, pub, time.Now())
		if err != nil {
			return fail("publish on pull request #%d: %v", onPR.pr.Number, err)
		}
		if err := toWorkflow(os.Getenv, rep, j, *reportFile); err != nil {
			return fail("%v", err)
		}
		switch err := onPR.publish(ctx, j); {
		case ghapp.NotAllowed(err) && onPR.fork():
			// A fork's pull_request event: the token reads only. Any
			// other refusal is the workflow's permissions, an error.
			fmt.Fprintln(stderr, readOnlyHint(onPR.pr.Number, j.check.Conclusion))
		case err != nil:
			return fail("publish on pull request #%d: %v", onPR.pr.Number, err)
		default:
			fmt.Fprintf(stderr, "driftback: published on pull request #%d: the driftback check is %s\n", onPR.pr.Number, j.check.Conclusion)
		}
		return publishExit(rep, j.check.Conclusion)
	}
	switch {
	case len(rep.Errors) > 0:
		return exitError
	case !jsonreport.Summarize(rep).Complete:
		return exitIncomplete
	case rep.HasChanges():
		return exitChanges
	}
	return exitOK
}

// kubeConfig loads a kubeconfig file and context, with the client limits.
func kubeConfig(file, context string, limits livestate.ClientLimits) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: file}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", file, err)
	}
	cfg = livestate.Configure(cfg, limits)
	if wrapKubeTransport != nil {
		cfg.Wrap(wrapKubeTransport)
	}
	return cfg, nil
}

// wrapKubeTransport, when set, wraps the transport of every cluster client
// the commands build; benchmarks count requests with it. Nil in the product.
var wrapKubeTransport func(http.RoundTripper) http.RoundTripper

// clientLimitFlags adds the flags that set the cluster client's rate limits.
func clientLimitFlags(fs *flag.FlagSet) *livestate.ClientLimits {
	l := &livestate.ClientLimits{}
	fs.Func("kube-qps", fmt.Sprintf("client-side requests a second to the cluster (default %d; negative: no client-side limit)", livestate.DefaultQPS), func(s string) error {
		f, err := strconv.ParseFloat(s, 32)
		l.QPS = float32(f)
		return err
	})
	fs.IntVar(&l.Burst, "kube-burst", livestate.DefaultBurst, "requests that may go at once above --kube-qps")
	return l
}

// diffTrees opens base and head: refs of one repository (returned too), or
// two directories.
func diffTrees(repo, base, head string) (*render.Tree, *render.Tree, *git.Repository, error) {
	if repo == "" {
		b, err := openTree(base, "")
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--base: %w", err)
		}
		h, err := openTree(head, "")
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--head: %w", err)
		}
		return b, h, nil, nil
	}
	r, err := gitrepo.Open(repo)
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := render.GitTree(r, base)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--base: %w%s%s", err, missingCommit(base, err), refHint(r, base, err))
	}
	h, err := render.GitTree(r, head)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--head: %w%s%s", err, missingCommit(head, err), refHint(r, head, err))
	}
	return b, h, r, nil
}

// affected are the paths the change between base and head affects, each
// as its reconciler builds it: a kustomization deployed on its own (no
// other uses it, or a reconciler object written in the tree or found on the
// cluster names it), a plain directory such an object reads, and a path
// whose HelmReleases install a chart of the repository the change touches.
func affected(base, head *render.Tree, found map[string][]*unstructured.Unstructured) ([]string, error) {
	changed, err := render.Changed(base, head)
	if err != nil {
		return nil, err
	}
	candidates := union(union(render.Discover(base), render.Discover(head)),
		union(prepare.Paths(base), prepare.Paths(head)))
	out := render.Affected(base, head, candidates, changed)
	onCluster := map[string]bool{}
	for p := range found {
		if p != "" && (base.HasDir(p) || head.HasDir(p)) {
			onCluster[p] = true
			candidates = union(candidates, []string{p})
		}
	}
	for _, c := range candidates {
		if slices.Contains(out, c) {
			continue
		}
		t := reconcile.Target{Path: c}
		if onCluster[c] {
			t.Found = &discover.Found{Path: c} // a directory it reads as manifests counts whole
		}
		if reconcile.Affects(t, base, head, changed) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out, nil
}

// remoteKeys are the local repository's remotes, by repoKey; none for
// directories, or a repository without remotes.
func remoteKeys(repo *git.Repository) []string {
	if repo == nil {
		return nil
	}
	remotes, err := repo.Remotes()
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range remotes {
		for _, u := range r.Config().URLs {
			out = append(out, compare.RepoKey(u))
		}
	}
	return out
}

// changedFiles are the files that differ between two trees; nil when they
// cannot be compared (only a hint needs them).
func changedFiles(base, head *render.Tree) []string {
	changed, _ := render.Changed(base, head)
	return changed
}

// comparedTrees chooses what a diff of two commits compares: what merging
// does. A pull request in CI compares its base's tip with GitHub's test
// merge, when the checkout has it; otherwise --head is compared with where
// it left --base (their merge base), or, with --merged, --base with their
// merge made here.
// In merge-base mode, tip is the base's own tip (what it gained since is not
// the head's to prune); nil otherwise.
func comparedTrees(r *git.Repository, b, h *render.Tree, merged bool, pr *ghapp.PullRequest) (tip, base, head *render.Tree, c *drift.Compared, err error) {
	tree := func(sha string, t *render.Tree) (*render.Tree, error) {
		if sha == t.Rev {
			return t, nil
		}
		return render.GitTree(r, sha)
	}
	if pr != nil && !merged && b.Rev == pr.BaseSHA && h.Rev == pr.HeadSHA {
		c, err := merge.Choose(r, merge.PullRequest{Base: pr.BaseSHA, BaseRef: pr.BaseRef, Head: pr.HeadSHA,
			Merge: pr.MergeSHA, Conflicts: pr.Mergeable != nil && !*pr.Mergeable})
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("%w%s", err, missingCommit(pr.BaseSHA, plumbing.ErrReferenceNotFound))
		}
		bt, err := tree(c.Base, b)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		ht, err := tree(c.Head, h)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("%w%s", err, missingCommit(c.Head, plumbing.ErrReferenceNotFound))
		}
		var tip *render.Tree
		if c.How == drift.HowMergeBase {
			tip = b
		}
		return tip, bt, ht, &c, nil
	}
	mb, err := merge.Base(r, b.Rev, h.Rev)
	if err != nil {
		return nil, b, h, &drift.Compared{How: drift.HowGiven, Base: b.Rev, Head: h.Rev,
			Note: fmt.Sprintf("The base and the head are compared as given: %v.", err)}, nil
	}
	if mb == b.Rev {
		// The head holds the base: merging it is a fast-forward.
		return nil, b, h, &drift.Compared{How: drift.HowMerge, Base: b.Rev, Head: h.Rev}, nil
	}
	mbt, err := render.GitTree(r, mb)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if merged {
		m, err := merge.Trees(mbt, b, h)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("--merged: %w", err)
		}
		return nil, b, m, &drift.Compared{How: drift.HowMerge, Base: b.Rev, Head: h.Rev, PullHead: h.Rev}, nil
	}
	return b, mbt, h, &drift.Compared{How: drift.HowMergeBase, Base: mb, Head: h.Rev,
		Note: fmt.Sprintf("The base has commits the head lacks: the head is compared with where it left the base (the merge base %.12s), as git diff BASE...HEAD does; --merged compares the base with what merging gives.", mb)}, nil
}

// missingCommit says how to get a commit a shallow checkout lacks.
func missingCommit(rev string, err error) string {
	if !errors.Is(err, plumbing.ErrReferenceNotFound) || len(rev) != 40 || strings.Trim(rev, "0123456789abcdef") != "" {
		return ""
	}
	return ": the commit is not in the repository; fetch it (git fetch origin " + rev + "), or in GitHub Actions check out with fetch-depth: 0"
}

// refHint suggests, for a revision the repository does not have, the
// branch, remote branch or tag it most likely meant ("; did you mean
// main?"); "" otherwise.
func refHint(r *git.Repository, rev string, err error) string {
	if r == nil || !errors.Is(err, plumbing.ErrReferenceNotFound) {
		return ""
	}
	refs, rerr := r.References()
	if rerr != nil {
		return ""
	}
	var names []string
	_ = refs.ForEach(func(ref *plumbing.Reference) error {
		if n := ref.Name(); n.IsBranch() || n.IsRemote() || n.IsTag() {
			names = append(names, n.Short())
		}
		return nil
	})
	if s := config.DidYouMean(rev, names); s != "" && s != rev {
		return "; did you mean " + s + "?"
	}
	return ""
}

// restores says, of a target compared with the cluster, what restoring
// earlier state does not bring back (restore-not-rollback,
// rollback-across-job), from the history before the base compared, and
// names the revert commits of the branch (from its head back to where it
// left its base). The counts driftback gave on earlier pull requests are
// GitHub's to tell: here they are unknown.
func restores(repo *git.Repository, c *drift.Compared) func(context.Context, *drift.Target, object.LiveReader) {
	lim := rollback.DefaultLimits()
	base, head := c.Base, cmp.Or(c.PullHead, c.Head)
	from := base
	if mb, err := merge.Base(repo, base, head); err == nil {
		from = mb
	}
	var reverts []string
	if cs, err := rollback.Reverts(repo, from, head, lim); err == nil {
		for _, c := range cs {
			reverts = append(reverts, c.Subject)
		}
	}
	return func(ctx context.Context, t *drift.Target, live object.LiveReader) {
		t.Reverts = reverts
		if t.NotCompared != "" {
			return
		}
		if t.LiveError != "" {
			live = nil // what Git alone tells
		}
		err := rollback.Analyze(ctx, rollback.Input{Target: t, Live: live, History: rollback.NewHistory(repo, base, lim)})
		if err != nil {
			t.Errors = append(t.Errors, "what a restore does not bring back could not be checked: "+err.Error())
		}
	}
}

// liveSide is what diff compares with: a reader, or why there is none
// (given: not asked, by choice), and where Argo CD's projects are.
type liveSide struct {
	reader object.LiveReader
	err    string
	argoNS string
	// podSecurity is the cluster's PodSecurity admission configuration.
	podSecurity admission.PodSecurity
	// kubeVersion is the cluster's version; empty when unknown.
	kubeVersion string
}

// diffOverlays renders each overlay at base and head and compares them with
// the live state. Render problems become errors of their overlay's target.
func diffOverlays(ctx context.Context, r *render.Renderer, tip, base, head *render.Tree, overlays []string, builds []*compare.Build, live liveSide, opts drift.Options,
	history func(context.Context, *drift.Target, object.LiveReader), step func(string, ...any)) (*drift.Report, error) {
	reader, liveErr := live.reader, live.err
	start := time.Now()
	// Plain paths are rendered at once; a reconciler's, each as it builds.
	var plain []string
	for i, o := range overlays {
		if builds[i].Found() == nil && !builds[i].InflatesHelmCharts() {
			plain = append(plain, o)
		}
	}
	// The trees render at once, each in its own children within the
	// renderer's bound: the base whole, and of the head and the tip the
	// overlays whose files differ from the base's; then the rest of them,
	// which the renderer's cache holds by then (the same files render the
	// same).
	trees := []*render.Tree{base, head, tip}
	outs := make([]map[string]*render.Overlay, len(trees))
	renderAll := func(only func(i int, o string) bool) error {
		var g errgroup.Group
		for i, t := range trees {
			if t == nil {
				continue
			}
			var paths []string
			for _, o := range onlyPresent(t, plain) {
				if only(i, o) {
					paths = append(paths, o)
				}
			}
			if len(paths) == 0 {
				continue
			}
			g.Go(func() error {
				res, err := r.Render(ctx, t, paths)
				if err != nil {
					return err
				}
				for _, o := range res.Overlays {
					outs[i][o.Path] = o
				}
				return nil
			})
		}
		return g.Wait()
	}
	for i := range outs {
		outs[i] = map[string]*render.Overlay{}
	}
	differs := func(i int, o string) bool { return i == 0 || !render.SameClosure(base, trees[i], o) }
	if err := renderAll(differs); err != nil {
		return nil, err
	}
	if err := renderAll(func(i int, o string) bool { return !differs(i, o) }); err != nil {
		return nil, err
	}
	step("rendered %s at base and head in %s", report.Plural(len(overlays), "overlay"), since(start))
	baseOut, headOut := outs[0], outs[1]
	// Compared from a merge base, the base branch's tip tells what it
	// gained since, which the head is not the one to prune.
	var tipOut map[string]*render.Overlay
	if tip != nil {
		tipOut = outs[2]
	}
	rep := &drift.Report{Targets: []drift.Target{}, Errors: []string{}}
	inputs := make([]drift.Input, len(overlays))
	problems := make([][]string, len(overlays))
	tipProblem := make([]string, len(overlays)) // the base branch tip's, compared from a merge base
	var all []*unstructured.Unstructured
	for i, path := range overlays {
		objects := func(o *render.Overlay) ([]*unstructured.Unstructured, []string) {
			if o == nil {
				return nil, nil
			}
			var ps []string
			if len(o.Problems) > 0 {
				for _, p := range o.Problems {
					ps = append(ps, p.Error())
				}
				return nil, ps
			}
			objs, err := o.Objects()
			if err != nil {
				ps = append(ps, fmt.Sprintf("%s: parse the render: %v", path, err))
			}
			return objs, ps
		}
		// An overlay new at head has an empty base: all of it is the change.
		var b, h []*unstructured.Unstructured
		var bp, hp []string
		var atTip []*unstructured.Unstructured
		var tp []string
		switch {
		case tip != nil && (builds[i].Found() != nil || builds[i].InflatesHelmCharts()):
			atTip, tp = builds[i].Objects(ctx, r, tip)
		case tip != nil:
			if atTip, tp = objects(tipOut[path]); len(tp) == 0 {
				atTip, tp = builds[i].Rendered(ctx, r, tip, atTip)
			}
		}
		if len(tp) > 0 {
			atTip, tipProblem[i] = nil, tp[0]
		}
		if builds[i].Found() != nil || builds[i].InflatesHelmCharts() {
			b, bp = builds[i].Objects(ctx, r, base)
			h, hp = builds[i].Objects(ctx, r, head)
		} else {
			// Then the charts of its HelmReleases and Applications.
			b, bp = objects(baseOut[path])
			if len(bp) == 0 {
				b, bp = builds[i].Rendered(ctx, r, base, b)
			}
			h, hp = objects(headOut[path])
			if len(hp) == 0 {
				h, hp = builds[i].Rendered(ctx, r, head, h)
			}
		}
		problems[i] = sidedProblems(bp, hp)
		inputs[i] = drift.Input{Path: path, Base: b, HasBase: true, Head: h, Newer: drift.NewerThan(atTip, b), TipUnknown: tipProblem[i]}
		if len(problems[i]) == 0 {
			all = append(append(all, inputs[i].Base...), inputs[i].Head...)
		}
	}
	// Every overlay's live objects are read at once, each kind with as few
	// lists as the credentials allow, rather than per overlay.
	notAsked := liveErr != "" // given: the cluster is not asked, by choice
	if reader != nil {
		start := time.Now()
		snap, err := livestate.NewSnapshot(ctx, reader, all)
		if err != nil {
			reader, liveErr = nil, err.Error()
		} else {
			reader = snap
			st := snap.Stats()
			step("read the live objects in %s: %s, %s by namespace, %s", since(start), report.Plural(st.ClusterLists, "cluster-wide list"), report.Plural(st.NamespaceLists, "list"), report.Plural(st.Gets, "get"))
		}
	}
	start = time.Now()
	// Overlays are compared on every core: each comparison is independent
	// and most of its time is the local server-side apply prediction.
	targets := make([]*drift.Target, len(overlays))
	errs := make([]error, len(overlays))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(overlays)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(overlays); i = int(next.Add(1)) - 1 {
				o := opts
				// What a Secret's value sets is compared Git against Git.
				o.GitOnly = builds[i].GitOnly()
				if builds[i].Found() != nil {
					tracking := builds[i].Tracking()
					tracking.Selector = opts.Tracking.Selector
					o.Tracking, o.DefaultNamespace = tracking, builds[i].DefaultNamespace()
				}
				targets[i], errs[i] = compareOverlay(ctx, overlays[i], inputs[i], problems[i], reader, liveErr, notAsked, o)
				if errs[i] == nil && len(problems[i]) == 0 {
					if err := syncfail.Mark(ctx, reader, inputs[i].Head, o.DefaultNamespace, live.argoNS, targets[i]); err != nil {
						targets[i].Errors = append(targets[i].Errors, "whether the sync fails could not be checked: "+err.Error())
					}
					if !admissionChecks {
						continue
					}
					ao := admission.Options{DefaultNamespace: o.DefaultNamespace, GitOnly: o.GitOnly, Policies: policies, PodSecurity: live.podSecurity, KubeVersion: live.kubeVersion}
					if ns, name := reconcile.Applier(builds[i].Found(), live.argoNS); name != "" {
						ao.Applier = admission.ServiceAccount(ns, name)
					}
					admission.Check(ctx, reader, nil, admission.Input{Base: inputs[i].Base, Head: inputs[i].Head}, ao, targets[i])
				}
			}
		}()
	}
	wg.Wait()
	// ${…} is Flux's to substitute only where a Flux Kustomization with
	// postBuild builds the path; elsewhere it is text (a script's).
	postBuild := prepare.PostBuildPaths(head)
	for i := range overlays {
		if errs[i] != nil {
			return nil, errs[i]
		}
		t := targets[i]
		if history != nil {
			history(ctx, t, reader)
		}
		t.Notes = append(t.Notes, builds[i].Notes()...)
		removal.Explain(base, head, overlays[i], t) // which change of Git removes each pruned object
		builds[i].Fails(t)
		builds[i].Hide(t)
		switch {
		case builds[i].Found() != nil:
		case slices.Contains(postBuild, overlays[i]) && unsubstituted(inputs[i].Head):
			t.Notes = append(t.Notes, "values hold ${…} as written: Flux's postBuild substitutes them; give --flux-kustomization NAMESPACE/NAME with --kubeconfig, or --flux-kustomization-file, to build as Flux does")
		}
		rep.Errors = append(rep.Errors, problems[i]...)
		rep.Targets = append(rep.Targets, *t)
	}
	// The objects the report's table counts: what a sync does to each.
	objects := 0
	for _, t := range rep.Targets {
		objects += len(t.Told())
	}
	step("compared %s (%s) in %s", report.Plural(len(overlays), "overlay"), report.Plural(objects, "object"), since(start))
	return rep, nil
}

// sidedProblems says a render's problems once: as they are when base and
// head have the same, else each with the side it belongs to.
func sidedProblems(base, head []string) []string {
	if slices.Equal(base, head) {
		return base
	}
	var out []string
	for _, p := range base {
		out = append(out, "at base: "+p)
	}
	for _, p := range head {
		out = append(out, "at head: "+p)
	}
	return out
}

// throughOthers says which changed kustomizations are compared only as a
// base of the overlays that use them: one deployed on its own as well, and not
// named by a Flux Kustomization or Argo CD Application in the repository, is
// compared with --path.
func throughOthers(w io.Writer, head *render.Tree, overlays, changed []string) {
	bases := render.Bases(head, overlays, changed)
	names := make([]string, 0, len(bases))
	for b := range bases {
		names = append(names, b)
	}
	sort.Strings(names)
	for _, b := range names {
		fmt.Fprintf(w, "driftback: %s is compared through %s (if it is also deployed on its own, add --path %s)\n",
			b, strings.Join(bases[b], ", "), b)
	}
}

// progress reports the steps of a long command on stderr, where they never
// mix with the report on stdout.
func progress(w io.Writer) func(string, ...any) {
	return func(format string, a ...any) { fmt.Fprintf(w, "driftback: "+format+"\n", a...) }
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

// compareOverlay compares one rendered overlay with the live state; when
// the cluster fails, it still shows what the change does in Git.
func compareOverlay(ctx context.Context, path string, in drift.Input, problems []string, reader object.LiveReader, liveErr string, notAsked bool, opts drift.Options) (*drift.Target, error) {
	if len(problems) > 0 {
		return &drift.Target{Path: path, Changes: []drift.Change{}, Drift: []drift.Change{}, PR: []drift.Change{}, Errors: problems,
			NotCompared: "it does not render"}, nil
	}
	t, err := drift.Compare(ctx, reader, in, opts)
	if err != nil {
		cerr := err
		if t, err = drift.Compare(ctx, nil, in, opts); err != nil {
			return nil, err
		}
		t.LiveError = cerr.Error()
	}
	if reader == nil && liveErr != "" {
		t.LiveError, t.LiveNotAsked = liveErr, notAsked
	}
	return t, nil
}

// overlaysExist fails for an overlay that has a kustomization at neither
// base nor head: a mistyped path must not read as "nothing changes".
func overlaysExist(base, head *render.Tree, overlays []string) error {
	for _, o := range overlays {
		if base.HasKustomization(o) || head.HasKustomization(o) {
			continue
		}
		known := union(render.Discover(base), render.Discover(head))
		what := "no kustomization at base or head"
		if !base.HasDir(o) && !head.HasDir(o) {
			what = "no such directory at base or head"
		}
		msg := fmt.Sprintf("--path %s: %s", o, what)
		if len(known) == 0 {
			return errors.New(msg + "; the trees hold no kustomization")
		}
		if len(known) > 20 {
			known = append(known[:20], fmt.Sprintf("and %d more", len(known)-20))
		}
		return fmt.Errorf("%s; the overlays are: %s", msg, strings.Join(known, ", "))
	}
	return nil
}

// onlyPresent keeps the overlays that exist in a tree.
func onlyPresent(t *render.Tree, overlays []string) []string {
	var out []string
	for _, o := range overlays {
		if t.HasKustomization(o) {
			out = append(out, o)
		}
	}
	return out
}

func union(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range append(append([]string{}, a...), b...) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// withoutManifests is r without the objects' whole YAML: the text a
// terminal shows, compact (-v shows it).
func withoutManifests(r *drift.Report) *drift.Report {
	out := *r
	out.Targets = make([]drift.Target, len(r.Targets))
	for i, t := range r.Targets {
		for _, list := range []*[]drift.Change{&t.Changes, &t.Drift, &t.PR, &t.Unread, &t.OutOfScope} {
			cs := append([]drift.Change(nil), (*list)...)
			for j := range cs {
				cs[j].Manifest = ""
			}
			*list = cs
		}
		out.Targets[i] = t
	}
	return &out
}

// policies keeps the admission policies compiled for the command's run.
var policies = admission.NewPolicies()

// admissionChecks is off only for a benchmark's baseline: the same
// comparison without what the cluster's admission refuses.
var admissionChecks = true
