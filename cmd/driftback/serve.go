package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/driftback/driftback/app"
)

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve", "serve --config app.yml", stderr)
	path := fs.String("config", "app.yml", "the configuration `FILE`")
	grace := fs.Duration("shutdown-grace", 30*time.Second, "how long running work may finish after SIGTERM")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitError
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	klog.SetSlogLogger(log.With("source", "client-go"))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, *path, os.Getenv, *grace, log); err != nil {
		fmt.Fprintln(stderr, "driftback serve:", err)
		return exitError
	}
	return exitOK
}
