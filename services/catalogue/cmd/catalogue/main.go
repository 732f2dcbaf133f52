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
	context.AfterFunc(ctx, stop) // a second signal, during the drain, stops the process at once
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop() // os.Exit skips deferred calls
	if err != nil {
		telemetry.LogExit(os.Stderr, "catalogue", err)
		os.Exit(1)
	}
}
