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
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/driftback/driftback/app"
	"github.com/driftback/driftback/app/config"
)

// runTargets prints the targets a configuration serves. Exit codes: 0 all
// read, 1 something could not be read (a cluster, a reconciler's kind), 2 the
// configuration is wrong.
func runTargets(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("targets", "targets --config app.yml [--format text|json]", stderr)
	path := fs.String("config", "app.yml", "the configuration `FILE`")
	output := fs.String("format", "text", "text, or json for scripts")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitError
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "driftback targets: unexpected argument %q\n", fs.Arg(0))
		return exitError
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "driftback targets: --format %q is neither text nor json\n", *output)
		return exitError
	}
	cfg, err := config.LoadConfig(*path, os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, "driftback targets:", err)
		return exitError
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	list, err := app.ListTargets(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "driftback targets:", err)
		return exitError
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(list); err != nil {
			return exitError
		}
	} else {
		printTargets(stdout, list)
	}
	for _, p := range list.Problems {
		fmt.Fprintln(stderr, "driftback targets:", p)
	}
	if len(list.Problems) > 0 {
		return exitChanges
	}
	return exitOK
}

func printTargets(w io.Writer, l *app.TargetList) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tREPO\tPATH\tCLUSTER\tBRANCH\tBUILD\tCODIFY\tFROM")
	for _, t := range l.Targets {
		p := t.Path
		if t.Glob {
			p += " (glob)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Repo, p, orDash(t.Cluster), orDash(t.Branch), t.Build, t.Codify, t.From)
	}
	_ = tw.Flush() // a failed write to stdout has nowhere to be reported
	for _, t := range l.Targets {
		fmt.Fprintf(w, "source: %s: %s\n", t.Name, t.Source)
		if t.NotRendered != "" {
			fmt.Fprintf(w, "not rendered: %s: %s\n", t.Name, t.NotRendered)
		}
		for _, n := range t.Notes {
			fmt.Fprintf(w, "note: %s: %s\n", t.Name, n)
		}
	}
	for _, n := range l.NotRendered {
		where := n.Source
		if n.Cluster != "" {
			where += " on " + n.Cluster
		}
		fmt.Fprintf(w, "not rendered: %s: %s\n", where, n.Reason)
	}
	for _, l := range l.LeftOut {
		fmt.Fprintf(w, "left out: %s\n", l)
	}
	if len(l.Targets) == 0 {
		fmt.Fprintln(w, strings.TrimSpace("no targets: app.yml names none and discovery found none"))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
