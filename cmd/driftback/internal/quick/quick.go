// Package quick answers what needs little of the rest of driftback:
// `driftback version`, `driftback --help` and the command names a
// completion script asks for. Its init answers them and exits, so they do
// not wait for Helm, client-go's schemes, the apiserver's libraries,
// kustomize and the packages of driftback that use them.
//
// That works because Go initialises packages in a defined order (the
// language specification, "Package initialization", since Go 1.21): at each
// step the first package, by import path, whose imports are all
// initialised. This package imports the standard library, golang.org/x/mod
// and render/childbin (the standard library alone), so it is initialised as
// soon as they are. runtime/debug, which sorts late, is the last of them:
// about a third of the binary's initialisers, the packages ready before it
// (klog, protobuf, cel-go's and go-git's among them), still run first; the
// heavy ones, which need more, do not. TestVersionAndHelpSkipTheProgramsStartUp
// keeps it so, and internal/layout keeps this package's imports few.
package quick

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"golang.org/x/mod/module"

	"github.com/driftback/driftback/render/childbin"
)

// Set at link time by the Makefile and the release build (-X
// github.com/driftback/driftback/cmd/driftback/internal/quick.version=…,
// ….commit=…); the Go toolchain's build information fills in what is not
// set.
var (
	version = ""
	commit  = ""
)

// A Command is one of driftback's commands, as its usage lists it.
type Command struct{ Name, Summary string }

// Commands are driftback's commands, in the order the usage lists them.
var Commands = []Command{
	{"diff", "show what a change does to the cluster: created, changed and pruned objects, dangers, drift"},
	{"dump", "write the live objects comparing overlays needs into a folder, for diff --live"},
	{"completion", "print a shell's completion script: bash, zsh or fish"},
	{"check-config", "check app.yml and a repository's .github/driftback.yml before they are used"},
	{"drift", "find lasting manual changes to the cluster and codify them into the overlay's sources"},
	{"register", "create the GitHub App from app.yml's manifest and save its key and secrets"},
	{"render", "print the rendered objects of kustomize overlays"},
	{"serve", "run the GitHub App: webhooks in, pull-request comments and check runs out"},
	{"targets", "list the targets a configuration serves, from app.yml and Flux or Argo CD in its clusters"},
	{"version", "print the version and commit"},
}

func init() {
	// The render child (render.ServeChild) is this binary re-executed
	// without arguments: never answered here. Nor is a test binary's -h.
	if strings.HasSuffix(os.Args[0], ".test") {
		return
	}
	if code, ok := Answer(os.Args[1:], os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
}

// Answer answers the command lines this package answers, with their exit
// status: -h, --help or help (whatever follows), --version (likewise),
// version and __complete alone (with flags or a command to complete, they
// are the commands'). ok is false for every other.
func Answer(args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch alone := len(args) == 1; {
	case args[0] == "-h" || args[0] == "--help" || args[0] == "help":
		Usage(stderr)
	case args[0] == "--version" || args[0] == "-version" || (args[0] == "version" && alone):
		PrintVersion(stdout)
	case args[0] == "__complete" && alone: // the completion scripts' first word
		for _, c := range Commands {
			fmt.Fprintln(stdout, c.Name)
		}
	default:
		return 0, false
	}
	return 0, true
}

// Usage prints driftback's usage: its commands.
func Usage(w io.Writer) {
	fmt.Fprintln(w, "driftback previews what a GitOps pull request would do to a cluster.")
	fmt.Fprintln(w, "\nUsage: driftback COMMAND [flags]\n\nCommands:")
	for _, c := range Commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintln(w, "\nRun 'driftback COMMAND -h' for a command's flags and exit statuses; 'driftback --version' for the version.")
}

// PrintVersion prints which driftback this binary is: version, commit, and
// the Go release and platform it was built with.
func PrintVersion(w io.Writer) {
	info, _ := debug.ReadBuildInfo()
	b := whichBuild(info, version, commit)
	fmt.Fprintf(w, "driftback %s\ncommit %s\n%s %s/%s\n", b.version, b.commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if exe := childbin.Find(); exe != "" {
		fmt.Fprintf(w, "render child %s (overlays without charts)\n", exe)
	} else {
		fmt.Fprintf(w, "render child driftback itself (no %s of this build beside it)\n", childbin.Name)
	}
	if b.hint != "" {
		fmt.Fprintln(w, b.hint)
	}
}

// buildID says which driftback a binary is.
type buildID struct {
	version, commit string
	// hint, when set, says why the version or commit is not known and how
	// to build a binary that knows them.
	hint string
}

// whichBuild reads a binary's version and commit: what the link stamped,
// else what the Go toolchain recorded. Go records the module version for
// `go install …@VERSION` (from the module proxy, without a commit) and,
// building in a git checkout, the version from its tags and the commit
// (`go build`, `go install ./cmd/driftback`, `go run`), unless it was told
// not to (-buildvcs=false).
func whichBuild(info *debug.BuildInfo, stampedVersion, stampedCommit string) buildID {
	b := buildID{version: stampedVersion, commit: stampedCommit}
	var revision, modified string
	if info != nil {
		if b.version == "" && info.Main.Version != "(devel)" {
			b.version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	if b.commit == "" && revision != "" {
		b.commit = revision
		if modified == "true" {
			b.commit += " (with uncommitted changes)"
		}
	}
	if b.commit == "" {
		// A pseudo-version (v0.0.0-20261202150106-04f961010cb4) ends with
		// the commit it names.
		if rev := pseudoRevision(b.version); rev != "" {
			b.commit = rev
		}
	}
	switch {
	case b.version == "" && b.commit == "":
		b.version, b.commit = "(devel)", "not recorded"
		b.hint = "This binary was built from source without version control information (GOFLAGS=-buildvcs=false, or outside a git checkout). `make build`, or `go build -buildvcs=true` in a git checkout, records both."
	case b.version == "":
		b.version = "(devel)"
	case b.commit == "" && stampedVersion != "":
		b.commit = "not recorded (built from source without version control information)"
	case b.commit == "":
		b.commit = "not recorded (installed from the module proxy: the version names the commit)"
	}
	return b
}

// pseudoRevision is the commit prefix a Go pseudo-version ends with, or "".
func pseudoRevision(v string) string {
	v, _, _ = strings.Cut(v, "+") // +dirty, +incompatible
	if !module.IsPseudoVersion(v) {
		return ""
	}
	rev, err := module.PseudoVersionRev(v)
	if err != nil {
		return ""
	}
	return rev
}
