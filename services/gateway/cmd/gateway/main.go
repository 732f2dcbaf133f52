// Command gateway serves the public partner API.
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
	"github.com/esimplatform/esim/services/gateway/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // a second signal, during the drain, stops the process at once
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop() // os.Exit skips deferred calls
	if err != nil {
		telemetry.LogExit(os.Stderr, "gateway", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 1 {
		return fmt.Errorf("unexpected arguments %q: configure gateway with environment variables", args[1:])
	}

	// 1. Configuration, parsed once; nothing below reads the environment.
	var cfg server.Config
	if err := config.Parse(ctx, getenv, &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}

	// 2. Logs, traces and metrics.
	tel, err := telemetry.Setup(ctx, "gateway", cfg.Telemetry, stdout)
	if err != nil {
		return err
	}
	defer tel.Shutdown(ctx)

	// 3. The gateway itself.
	srv, err := server.New(ctx, cfg, tel)
	if err != nil {
		return err
	}
	defer srv.Close()

	// 4. Serve until SIGINT or SIGTERM, then drain in-flight requests.
	return httpserver.ListenAndServe(ctx, tel.Logger, cfg.HTTP, srv.Handler())
}
