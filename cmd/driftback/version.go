package main

import (
	"io"

	"github.com/driftback/driftback/cmd/driftback/internal/quick"
)

// runVersion is `driftback version` with flags (-h); alone, quick's init
// answers it before the program is initialised.
func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "version", stderr)
	if err := parseFlags(fs, args); err != nil {
		return parseExit(err)
	}
	quick.PrintVersion(stdout)
	return exitOK
}
