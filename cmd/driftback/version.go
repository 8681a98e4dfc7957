package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"golang.org/x/mod/module"
)

// Set at link time by the Makefile and the release build (-X main.version=…
// -X main.commit=…); the Go toolchain's build information fills in what is
// not set.
var (
	version = ""
	commit  = ""
)

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "version", stderr)
	if err := parseFlags(fs, args); err != nil {
		return parseExit(err)
	}
	info, _ := debug.ReadBuildInfo()
	b := whichBuild(info, version, commit)
	fmt.Fprintf(stdout, "driftback %s\ncommit %s\n%s %s/%s\n", b.version, b.commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if b.hint != "" {
		fmt.Fprintln(stdout, b.hint)
	}
	return exitOK
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
