package main

import (
	"fmt"
	"io"
	"os"

	"github.com/driftback/driftback/app/config"
)

// runCheckConfig checks app.yml (with its DRIFTBACK_… overrides) and a
// repository's .github/driftback.yml before they are used: every mistake
// with its line and key, the variables nothing reads, and, with --secrets,
// the App's ID, private key and webhook secret as serve reads them.
func runCheckConfig(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check-config", "check-config [--config app.yml] [--secrets] [--repo-config .github/driftback.yml]", stderr)
	path := fs.String("config", "", "app.yml to check, with the DRIFTBACK_… variables of the environment (default app.yml when there is no --repo-config)")
	secrets := fs.Bool("secrets", false, "with --config: also read the App's ID, private key and webhook secret as serve does (their values are never printed)")
	repoConfig := fs.String("repo-config", "", "a repository's .github/driftback.yml to check (against --config's targets when given, else any target name is taken)")
	if err := parseFlags(fs, args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "driftback check-config: unexpected argument %q\n", fs.Arg(0))
		return exitError
	}
	if *path == "" && *repoConfig == "" {
		*path = "app.yml"
	}
	failed := false
	var targets []config.Target
	if *path != "" {
		cfg, err := config.LoadConfig(*path, os.Getenv)
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "driftback check-config: %v\n", err)
			failed = true
		default:
			targets = cfg.Targets
			if targets == nil {
				targets = []config.Target{}
			}
			for _, w := range cfg.UnknownEnv(os.Environ()) {
				fmt.Fprintf(stderr, "driftback check-config: warning: %s\n", w)
			}
			if *secrets {
				if _, err := cfg.LoadSecrets(os.Getenv); err != nil {
					fmt.Fprintf(stderr, "driftback check-config: %s: %v\n", *path, err)
					failed = true
				}
			}
			if !failed {
				fmt.Fprintf(stdout, "%s: valid (%d targets, %d clusters)\n", *path, len(cfg.Targets), len(cfg.Clusters))
			}
		}
	}
	if *repoConfig != "" {
		b, err := os.ReadFile(*repoConfig)
		if err == nil {
			err = config.CheckRepoConfig(b, targets)
		}
		if err != nil {
			fmt.Fprintf(stderr, "driftback check-config: %v\n", err)
			failed = true
		} else {
			fmt.Fprintf(stdout, "%s: valid\n", *repoConfig)
		}
	}
	if failed {
		return exitError
	}
	return exitOK
}
