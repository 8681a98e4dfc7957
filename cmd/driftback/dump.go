package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	git "github.com/go-git/go-git/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/gitrepo"
	"github.com/driftback/driftback/reconcile/compare"
	"github.com/driftback/driftback/render"
)

func runDump(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("dump", "dump --repo DIR [--ref REF]... --path OVERLAY... --kubeconfig FILE [--context NAME] --out DIR", stderr)
	repo := fs.String("repo", ".", "repository `DIR` (its root)")
	var refs multiFlag
	fs.Var(&refs, "ref", "render at this branch, tag or SHA (repeatable: give a pull request's base and head, so what it removes is in the dump too; default: the working tree)")
	var paths multiFlag
	fs.Var(&paths, "path", "an overlay whose live state to dump (repeatable)")
	kubeconfig := fs.String("kubeconfig", "", "read the cluster through this kubeconfig `FILE`")
	kubeContext := fs.String("context", "", "the kubeconfig context")
	limits := clientLimitFlags(fs)
	argoNS := fs.String("argocd-namespace", "argocd", "the namespace of Argo CD and its Applications")
	out := fs.String("out", "", "write the dump into this `DIR` (created; an earlier dump there is replaced; a folder of other files is refused)")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitError
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "driftback dump: "+format+"\n", a...)
		return exitError
	}
	overlays, err := overlayArgs(paths)
	switch {
	case err != nil:
		return fail("%v", err)
	case len(overlays) == 0:
		return fail("give --path OVERLAY: the dump holds what comparing it needs")
	case *kubeconfig == "":
		return fail("give --kubeconfig: the dump is read from the cluster")
	case *out == "":
		return fail("give --out DIR")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(refs) == 0 {
		refs = multiFlag{""}
	}
	trees := make([]*render.Tree, len(refs))
	for i, ref := range refs {
		if trees[i], err = openTree(*repo, ref); err != nil {
			return fail("%v", err)
		}
	}
	cfg, err := kubeConfig(*kubeconfig, *kubeContext, *limits)
	if err != nil {
		return fail("%v", err)
	}
	reader, err := livestate.NewClusterReader(cfg)
	if err != nil {
		return fail("%v", err)
	}
	// Built as diff builds them: as the reconciler on the cluster does,
	// with their charts, so the namespaces and kinds are the same.
	setup := compare.Setup{Config: cfg, ArgoNamespace: *argoNS, Base: trees[0], Renderer: render.New(render.DefaultOptions())}
	var gitRepo *git.Repository
	if g, err := gitrepo.Open(*repo); err == nil {
		gitRepo = g
	}
	if setup.Found, err = compare.ReconcilersOnCluster(ctx, cfg, *argoNS, remoteKeys(gitRepo)); err != nil {
		fmt.Fprintf(stderr, "driftback dump: the reconciler objects on the cluster could not be read, so the paths are built plainly: %v\n", err)
	}
	say := func(format string, a ...any) { fmt.Fprintf(stderr, "driftback dump: "+format+"\n", a...) }
	var objs []*unstructured.Unstructured
	for i, b := range compare.Builds(ctx, overlays, nil, setup, say) {
		for j, tree := range trees {
			if !tree.HasDir(overlays[i]) && len(trees) > 1 {
				continue // an overlay one side adds or removes
			}
			o, problems := b.Objects(ctx, setup.Renderer, tree)
			if len(problems) > 0 {
				return fail("%s does not render%s: %s", overlays[i], at(refs[j]), strings.Join(problems, "; "))
			}
			// Where the apply puts what names no namespace.
			if o, err = object.Place(ctx, reader, o, b.DefaultNamespace()); err != nil {
				return fail("%v", err)
			}
			objs = append(objs, o...)
		}
	}
	dumped, err := livestate.WriteDump(ctx, reader, objs, *out)
	if err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(stderr, "driftback dump: wrote %d objects of %d kinds, in %s, to %s; Secrets are never written (a dump holds no Secret's value): a comparison says they are not compared\n",
		dumped.Objects, len(dumped.Kinds), plural(len(dumped.Namespaces), "namespace"), *out)
	return exitOK
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// at names a ref in a message: " at REF", or "" for the working tree.
func at(ref string) string {
	if ref == "" {
		return ""
	}
	return " at " + ref
}
