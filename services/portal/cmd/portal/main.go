// Command portal serves the partners' web portal.
// It is configured only through environment variables (see server.Config).
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
	"github.com/esimplatform/esim/services/portal/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // a second signal, during the drain, stops the process at once
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop() // os.Exit skips deferred calls
	if err != nil {
		telemetry.LogExit(os.Stderr, "portal", err)
		os.Exit(1)
	}
}

// run is the whole program; main only binds it to the process, so tests
// can run it with their own environment and output.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 1 {
		return fmt.Errorf("unexpected arguments %q: configure portal with environment variables", args[1:])
	}

	// 1. Configuration, parsed once; nothing below reads the environment.
	var cfg server.Config
	if err := config.Parse(ctx, getenv, &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	cfg.Runtime.Apply()

	// 2. Logs, traces and metrics, flushed last.
	tel, err := telemetry.Setup(ctx, "portal", cfg.Telemetry, stdout)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer tel.Shutdown(ctx)

	// 3. The portal: Redis, the Twirp clients, the pages.
	srv, err := server.New(ctx, cfg, tel)
	if err != nil {
		return err
	}
	defer srv.Close()

	// 4. Serve until SIGINT or SIGTERM, then drain in-flight requests.
	return httpserver.ListenAndServe(ctx, tel.Logger, cfg.HTTP, srv.Handler(), tel.MetricsHandler)
}
