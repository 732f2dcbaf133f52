// Command catalogue serves the plan catalogue over Twirp.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/esimplatform/esim/libs/telemetry"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Getenv, os.Stdout); err != nil {
		telemetry.LogExit(os.Stderr, "catalogue", err)
		os.Exit(1)
	}
}
