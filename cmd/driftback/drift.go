package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	git "github.com/go-git/go-git/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/gitrepo"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/reconcile/compare"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/report"
	"github.com/driftback/driftback/report/terminal"
)

func runDrift(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("drift", "drift --repo DIR [--ref REF] --path OVERLAY (--kubeconfig FILE [--context NAME] | --live DIR) [--format text|markdown|json] [--write]", stderr)
	repo := fs.String("repo", ".", "repository `DIR` (its root)")
	ref := fs.String("ref", "", "compare this branch, tag or SHA (default: the working tree)")
	overlay := fs.String("path", "", "the overlay to check")
	kubeconfig := fs.String("kubeconfig", "", "read the live cluster through this kubeconfig `FILE`")
	kubeContext := fs.String("context", "", "the kubeconfig context")
	limits := clientLimitFlags(fs)
	live := fs.String("live", "", "read the live state from this `DIR` of object dumps")
	format := fs.String("format", "", "output: text (plain, coloured on a terminal unless NO_COLOR is set), markdown or json; default text")
	write := fs.Bool("write", false, "apply the codified edits to the working tree")
	fluxKs := fs.String("flux-kustomization", "", "with --kubeconfig, build as this Flux Kustomization (`NAMESPACE/NAME`) does, with its variables from the cluster; its inventory tells what it has not applied yet")
	argoApp := fs.String("argocd-app", "", "with --kubeconfig, build as this Argo CD Application (`NAME`) does; its last sync tells what it has not applied yet")
	argoNS := fs.String("argocd-namespace", "argocd", "the namespace of Argo CD and its Applications")
	plain := fs.Bool("plain", false, "with --kubeconfig, build plainly, not as the Flux Kustomization or Argo CD Application on the cluster that builds the path")
	var chartRepos, chartHosts multiFlag
	fs.Var(&chartRepos, "chart-repository", "also trust this chart repository `URL`, besides those the tree names (repeatable)")
	fs.Var(&chartHosts, "chart-private-host", "a chart repository `HOST` that may resolve to a private or loopback address (repeatable)")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitError
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "driftback drift: "+format+"\n", a...)
		return exitError
	}
	paths, err := overlayArgs([]string{*overlay})
	switch {
	case *overlay == "":
		return fail("give --path OVERLAY")
	case err != nil:
		return fail("%v", err)
	case (*live == "") == (*kubeconfig == ""):
		return fail("give one of --kubeconfig and --live")
	case outputFormat(*format, stdout) == "":
		return fail("--format must be text, markdown or json")
	case *write && *ref != "":
		return fail("--write edits the working tree; it cannot be combined with --ref")
	case (*fluxKs != "" || *argoApp != "") && *kubeconfig == "":
		return fail("--flux-kustomization and --argocd-app read the object from the cluster: give --kubeconfig")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	tree, err := openTree(*repo, *ref)
	if err != nil {
		return fail("%v", err)
	}
	r := render.New(render.Options{Origins: true, Cache: render.NewCache(64 << 20)})
	setup := compare.Setup{Plain: *plain, ArgoNamespace: *argoNS, Base: tree, Trusted: chartRepos, PrivateHosts: chartHosts, Renderer: r}
	var reader object.LiveReader
	var recon *compare.Build
	if *live != "" {
		if reader, err = livestate.ReadDir(*live); err != nil {
			return fail("%v", err)
		}
	} else {
		if setup.Config, err = kubeConfig(*kubeconfig, *kubeContext, *limits); err != nil {
			return fail("%v", err)
		}
		if reader, err = livestate.NewClusterReader(setup.Config); err != nil {
			return fail("%v", err)
		}
		switch {
		case *fluxKs != "":
			recon, err = fluxBuild(ctx, *fluxKs, "", *kubeconfig, *kubeContext, *limits, tree, tree)
		case *argoApp != "":
			recon, err = argoBuild(ctx, *argoApp, *argoNS, *kubeconfig, *kubeContext, *limits)
		case !*plain:
			var gitRepo *git.Repository
			if g, err := gitrepo.Open(*repo); err == nil {
				gitRepo = g
			}
			if setup.Found, err = compare.ReconcilersOnCluster(ctx, setup.Config, *argoNS, remoteKeys(gitRepo)); err != nil {
				fmt.Fprintf(stderr, "driftback drift: the reconciler objects on the cluster could not be read, so the path is built plainly: %v\n", err)
				err = nil
			}
		}
		if err != nil {
			return fail("%v", err)
		}
		if recon != nil && recon.Path() != paths[0] {
			return fail("--path %s: the reconciler builds %s", paths[0], recon.Path())
		}
	}
	say := func(format string, a ...any) { fmt.Fprintf(stderr, "driftback drift: "+format+"\n", a...) }
	b := compare.Builds(ctx, paths, recon, setup, say)[0].KeepSecretValues()
	objs, problems := b.Objects(ctx, r, tree)
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(stderr, "driftback drift: %s\n", p)
		}
		return exitError
	}
	if objs == nil {
		return fail("%s has nothing to build at %s", paths[0], cmp.Or(*ref, "the working tree"))
	}
	opts := drift.DefaultOptions()
	if b.Found() != nil {
		opts.Tracking, opts.DefaultNamespace = b.Tracking(), b.DefaultNamespace()
	}
	target, err := drift.Compare(ctx, reader, drift.Input{Path: paths[0], Head: objs}, opts)
	if err != nil {
		return fail("%v", err)
	}
	b.Hide(target)
	in, why := b.WriteBack(tree)
	if why != "" {
		return fail("%s: nothing of its drift is shown rather than shown unhidden", why)
	}
	in.Renderer, in.Drift = r, target.Drift
	plan, err := prgen.Make(ctx, in)
	if err != nil {
		return fail("%v", err)
	}
	notApplied(plan, b.Found())
	*format = outputFormat(*format, stdout)
	if *format == "json" {
		b, err := json.MarshalIndent(struct {
			*prgen.Plan
			Files  []string       `json:"files"`
			Notes  []string       `json:"notes"`
			Unread []drift.Change `json:"unread"`
			Errors []string       `json:"errors"`
		}{plan, plan.Paths(), append(append([]string{}, b.Notes()...), target.Notes...), append([]drift.Change{}, target.Unread...), append([]string{}, target.Errors...)}, "", "  ")
		if err != nil {
			return fail("%v", err)
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else if *format == "text" {
		fmt.Fprint(stdout, terminal.Render(report.DriftPlanPreview(plan), colour(stdout)))
	} else {
		fmt.Fprint(stdout, report.DriftPlanPreview(plan))
	}
	if *write {
		for _, f := range plan.Paths() {
			p := filepath.Join(*repo, filepath.FromSlash(f))
			if err := os.WriteFile(p, plan.Files[f], 0o644); err != nil {
				return fail("write %s: %v", f, err)
			}
			fmt.Fprintf(stderr, "driftback drift: wrote %s\n", f)
		}
	}
	// What the live state does not hold is not compared: said, and the
	// result is not whole.
	for _, u := range target.Unread {
		fmt.Fprintf(stderr, "driftback drift: %s/%s: %s\n", u.Kind, u.Name, u.Note)
	}
	for _, e := range target.Errors {
		fmt.Fprintf(stderr, "driftback drift: %s\n", e)
	}
	if *format != "json" {
		for _, n := range append(b.Notes(), target.Notes...) {
			fmt.Fprintf(stderr, "driftback drift: note: %s\n", n)
		}
	}
	switch {
	case len(target.Unread) > 0 || len(target.Errors) > 0:
		return exitIncomplete
	case plan.Empty():
		return exitOK
	}
	return exitChanges
}

// notApplied moves, of the objects Git has and the cluster lacks, those
// the reconciler has not applied yet out of Deleted: a Flux Kustomization's
// inventory does not list them, or an Argo CD Application's last sync did
// not apply them. Without a reconciler object, all stay (the preview says
// how to tell).
func notApplied(plan *prgen.Plan, f *discover.Found) {
	applied, known := appliedObjects(f)
	if !known {
		return
	}
	kept := plan.Deleted[:0]
	for _, d := range plan.Deleted {
		if applied[d] {
			kept = append(kept, d)
		} else {
			plan.NotApplied = append(plan.NotApplied, d)
		}
	}
	plan.Deleted = kept
}

// appliedObjects are the objects ("Kind/namespace/name", as a plan names
// them) a reconciler object says it applied; known is false when it says
// nothing (no reconciler object, no inventory, no sync yet).
func appliedObjects(f *discover.Found) (map[string]bool, bool) {
	out := map[string]bool{}
	name := func(kind, ns, n string) string {
		if ns == "" {
			return kind + "/" + n
		}
		return kind + "/" + ns + "/" + n
	}
	switch {
	case f == nil:
		return nil, false
	case f.Flux != nil:
		entries, ok, _ := unstructured.NestedSlice(f.Flux.Object, "status", "inventory", "entries")
		if !ok {
			return nil, false
		}
		for _, e := range entries {
			m, _ := e.(map[string]any)
			id, _ := m["id"].(string)
			// namespace_name_group_kind, as Flux's inventory writes it.
			parts := strings.Split(id, "_")
			if len(parts) == 4 {
				out[name(parts[3], parts[0], parts[1])] = true
			}
		}
	case f.Application != nil:
		res, ok, _ := unstructured.NestedSlice(f.Application.Object, "status", "operationState", "syncResult", "resources")
		if !ok {
			return nil, false
		}
		for _, r := range res {
			m, _ := r.(map[string]any)
			kind, _ := m["kind"].(string)
			ns, _ := m["namespace"].(string)
			n, _ := m["name"].(string)
			out[name(kind, ns, n)] = true
		}
	default:
		return nil, false
	}
	return out, true
}
