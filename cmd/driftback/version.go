package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set at link time by the Makefile (-X main.version=… -X main.commit=…); the
// build information of the binary fills in what is not set.
var (
	version = ""
	commit  = ""
)

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "version", stderr)
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	v, c, dirty := version, commit, false
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if c == "" {
					c = s.Value
				}
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if c == "" {
		c = "unknown"
	} else if dirty {
		c += "-dirty"
	}
	fmt.Fprintf(stdout, "driftback %s\ncommit %s\n%s %s/%s\n", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitOK
}
