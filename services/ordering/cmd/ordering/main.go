// Command ordering serves orders and their eSIMs over Twirp, and finishes
// orders left unfinished by a crash. It is configured only through environment variables (see server.Config).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/ordering/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // a second signal, during the drain, stops the process at once
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop() // os.Exit skips deferred calls
	if err != nil {
		telemetry.LogExit(os.Stderr, "ordering", err)
		os.Exit(1)
	}
}

// run is the whole program; main only binds it to the process, so tests
// can run it with their own environment and output.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 1 {
		return fmt.Errorf("unexpected arguments %q: configure ordering with environment variables", args[1:])
	}

	// 1. Configuration, parsed once; nothing below reads the environment.
	// The Go runtime's settings in it apply at once.
	var cfg server.Config
	if err := config.Parse(ctx, getenv, &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	cfg.Runtime.Apply()

	// 2. Logs, traces and metrics. Flushed last, so the shutdown itself is
	// still recorded.
	tel, err := telemetry.Setup(ctx, "ordering", cfg.Telemetry, stdout)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer tel.Shutdown(ctx)

	// 3. The service: database connection and migrations, clients of the
	// catalogue and the wallet, Twirp handler, River's jobs.
	srv, err := server.New(ctx, cfg, tel)
	if err != nil {
		return err
	}
	defer srv.Close()

	// 4. Serve until SIGINT/SIGTERM, then drain in-flight requests; the
	// deferred steps stop the jobs, close the pool and flush
	// telemetry afterwards.
	return httpserver.ListenAndServe(ctx, tel.Logger, cfg.HTTP, srv.Handler(), tel.MetricsHandler)
}
