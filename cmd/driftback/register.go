package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/driftback/driftback/app"
	"github.com/driftback/driftback/app/config"
)

func runRegister(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("register", "register --config app.yml [--org ORG] [--out DIR] [--listen ADDR]", stderr)
	path := fs.String("config", "", "the configuration `FILE` whose manifest section describes the App (required)")
	org := fs.String("org", "", "register the App under this organization `ORG` (default: your own account)")
	out := fs.String("out", ".", "the `DIR`ectory for the private key and secrets (created with mode 0700 if missing)")
	listen := fs.String("listen", app.DefaultRegisterListen, "the local `ADDR`ess of the registration page, where GitHub sends the browser back")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitError
	}
	if *path == "" || fs.NArg() > 0 {
		if *path == "" {
			fmt.Fprintln(stderr, "driftback register: --config is required")
		} else {
			fmt.Fprintf(stderr, "driftback register: unexpected argument %q\n", fs.Arg(0))
		}
		fs.Usage()
		return exitError
	}
	// The configuration is read without its secrets: registering is how
	// they are obtained.
	cfg, err := config.LoadConfig(*path, os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, "driftback register:", err)
		return exitError
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := app.DefaultRegisterOptions()
	opts.Org, opts.OutDir, opts.Listen, opts.Out = *org, *out, *listen, stdout
	opts.Ready = func(page string) {
		fmt.Fprintf(stderr, "Open %s in a browser to register the GitHub App %q; waiting for GitHub (Ctrl-C to stop).\n", page, cfg.Manifest.Name)
	}
	if _, err := app.Register(ctx, cfg, opts); err != nil {
		fmt.Fprintln(stderr, "driftback register:", err)
		return exitError
	}
	return exitOK
}
