package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/prgen"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/report"
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
	format := fs.String("format", "", "output: text (plain, with colour in a terminal), markdown or json; default: text when stdout is a terminal, else markdown")
	write := fs.Bool("write", false, "apply the codified edits to the working tree")
	if err := fs.Parse(args); err != nil {
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
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	tree, err := openTree(*repo, *ref)
	if err != nil {
		return fail("%v", err)
	}
	var reader object.LiveReader
	if *live != "" {
		if reader, err = livestate.ReadDir(*live); err != nil {
			return fail("%v", err)
		}
	} else {
		cfg, err := kubeConfig(*kubeconfig, *kubeContext, *limits)
		if err != nil {
			return fail("%v", err)
		}
		if reader, err = livestate.NewClusterReader(cfg); err != nil {
			return fail("%v", err)
		}
	}
	r := render.New(render.Options{Origins: true, Cache: render.NewCache(64 << 20)})
	res, err := r.Render(ctx, tree, paths)
	if err != nil {
		return fail("%v", err)
	}
	o := res.Overlays[0]
	if err := o.Err(); err != nil {
		for _, p := range o.Problems {
			fmt.Fprintf(stderr, "driftback drift: %v\n", p)
		}
		return exitError
	}
	objs, err := o.Objects()
	if err != nil {
		return fail("%v", err)
	}
	target, err := drift.Compare(ctx, reader, drift.Input{Path: paths[0], Head: objs}, drift.DefaultOptions())
	if err != nil {
		return fail("%v", err)
	}
	plan, err := prgen.Make(ctx, prgen.Input{Tree: tree, Overlay: paths[0], Renderer: r, Drift: target.Drift})
	if err != nil {
		return fail("%v", err)
	}
	*format = outputFormat(*format, stdout)
	if *format == "json" {
		b, err := json.MarshalIndent(struct {
			*prgen.Plan
			Files []string `json:"files"`
		}{plan, plan.Paths()}, "", "  ")
		if err != nil {
			return fail("%v", err)
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else if *format == "text" {
		fmt.Fprint(stdout, report.Terminal(report.DriftPlanPreview(plan), colour(stdout)))
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
	if plan.Empty() {
		return exitOK
	}
	return exitChanges
}
