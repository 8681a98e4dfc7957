// Command driftback previews what a GitOps pull request would do to a Kubernetes
// cluster and turns lasting manual changes to the cluster into pull requests.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/cmd/driftback/internal/quick"
	"github.com/driftback/driftback/internal/cliflags"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/report/terminal"
)

// Exit codes follow kubectl diff: 0 nothing to report, 1 changes found, 2 error.
const (
	exitOK      = 0
	exitChanges = 1
	exitError   = 2
	// exitIncomplete: the report was written, but part of it is unknown
	// (a cluster, or kinds of it, could not be read; a target has errors).
	exitIncomplete = 3
)

type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// runners run each command quick.Commands lists.
var runners = map[string]func(args []string, stdout, stderr io.Writer) int{
	"diff":         runDiff,
	"dump":         runDump,
	"completion":   runCompletion,
	"check-config": runCheckConfig,
	"drift":        runDrift,
	"register":     runRegister,
	"render":       runRender,
	"serve":        runServe,
	"targets":      runTargets,
	"version":      runVersion,
}

// commands are driftback's commands, as the usage lists them, each with
// what runs it.
func commands() []command {
	cs := make([]command, 0, len(quick.Commands))
	for _, c := range quick.Commands {
		cs = append(cs, command{c.Name, c.Summary, runners[c.Name]})
	}
	return cs
}

func main() {
	render.ServeChild() // the sandboxed render child is this binary, re-executed
	// The dry-run engine's client would log through controller-runtime; the
	// command reports what matters itself.
	ctrllog.SetLogger(logr.Discard())
	// client-go's own lines (reflector retries, client-side throttling) are
	// not driftback's to print: stderr carries its progress and errors only.
	// serve sends them to its structured log instead.
	// (Output alone is not enough: klog writes errors to stderr too.)
	klog.SetLogger(logr.Discard())
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	// Errors, notes and progress quote Git and the cluster: never their
	// control characters.
	stderr = terminal.NoControls(stderr)
	if len(args) == 0 {
		quick.Usage(stderr)
		return exitError
	}
	// Most often answered before this runs, by quick's init.
	if code, ok := quick.Answer(args, stdout, stderr); ok {
		return code
	}
	if args[0] == "__complete" { // for the completion scripts
		return complete(args[1:], stdout)
	}
	var names []string
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
		names = append(names, c.name)
	}
	hint := ""
	if s := config.DidYouMean(args[0], names); s != "" {
		hint = fmt.Sprintf(" Did you mean %q?", s)
	}
	fmt.Fprintf(stderr, "driftback: unknown command %q.%s Run 'driftback --help' for the commands.\n", args[0], hint)
	return exitError
}

// exitStatuses say, in each command's -h, what its exit status means.
var exitStatuses = map[string]string{
	"diff":         "0 nothing changes; 1 changes (with --publish: the check fails); 2 an error; 3 not whole: something was not compared (a cluster that could not be read, a kind a dump lacks)",
	"drift":        "0 no drift; 1 drift found (codified or listed); 2 an error; 3 not whole: something was not compared",
	"dump":         "0 written; 2 an error",
	"check-config": "0 valid (warnings aside); 2 a mistake, each named with its line and key",
	"targets":      "0 all read; 1 something could not be read (a cluster, a reconciler's kind); 2 the configuration is wrong",
}

// exitStatus is what a command's -h says of its exit status.
func exitStatus(name string) string {
	if s, ok := exitStatuses[name]; ok {
		return s
	}
	return "0 success; 2 an error"
}

// parseInterspersed parses flags that may come before, between or after the
// positional arguments, and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	return cliflags.ParseInterspersed(fs, args)
}

// parseFlags parses args, refusing a flag that takes one value given twice.
func parseFlags(fs *flag.FlagSet, args []string) error { return cliflags.Parse(fs, args) }

func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	return cliflags.New("driftback", name, cliflags.Help{Synopsis: synopsis, Examples: examples[name], ExitStatus: exitStatus(name)}, stderr, config.DidYouMean)
}

// outputFormat checks a --format: text (also unset, for a terminal and a
// pipe alike, as kubectl and flux print), markdown or json. "" means not
// one.
func outputFormat(f string, stdout io.Writer) string {
	switch f {
	case "text", "markdown", "json":
		return f
	case "":
		return "text"
	}
	return ""
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// colour reports whether text for w may carry colour: a terminal, unless
// NO_COLOR is set (no-color.org) or the terminal is "dumb".
func colour(w io.Writer) bool {
	return isTerminal(w) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}

// parseExit is the exit status after flags failed to parse: 0 when help was
// asked for (and printed), 2 for a mistake.
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitError
}

// examples are each command's common uses, shown by -h.
var examples = map[string][]string{
	"completion": {
		"driftback completion bash > /etc/bash_completion.d/driftback",
		"source <(driftback completion zsh)",
		"driftback completion fish | source",
	},
	"check-config": {
		"driftback check-config --config app.yml --secrets",
		"driftback check-config --repo-config .github/driftback.yml",
	},
	"diff": {
		"driftback diff --base fixtures/demo/base --head fixtures/demo/pr --live fixtures/demo/live",
		"driftback diff --repo . --base origin/main --head HEAD --kubeconfig ~/.kube/config",
		"driftback diff --repo . --base origin/main --head HEAD --path apps/prod --format json",
	},
	"dump": {
		"driftback dump --repo . --path apps/prod --kubeconfig ~/.kube/config --out ./live",
		"driftback diff --repo . --base origin/main --head HEAD --path apps/prod --live ./live",
	},
	"drift": {
		"driftback drift --repo . --path apps/prod --kubeconfig ~/.kube/config",
		"driftback drift --repo . --path apps/prod --live ./dump --write",
	},
	"render":   {"driftback render --repo . apps/prod", "driftback render --repo . --ref origin/main apps/prod"},
	"serve":    {"driftback serve --config app.yml"},
	"register": {"driftback register --config app.yml"},
	"targets":  {"driftback targets --config app.yml"},
	"version":  {"driftback version"},
}
