package main

import (
	"context"
	"fmt"
	"io"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/catalogue/server"
)

// run is the whole program with its inputs made explicit, so a test can
// start it on port 0 with its own environment. It returns when ctx ends
// (SIGINT, SIGTERM) and the server drained.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 1 {
		return fmt.Errorf("unexpected arguments %q: configure catalogue with environment variables", args[1:])
	}

	// 1. Configuration, read once: nothing below run reads the environment.
	// The Go runtime's settings in it apply at once.
	var cfg server.Config
	if err := config.Parse(ctx, getenv, &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	cfg.Runtime.Apply()

	// 2. Logs, traces and metrics.
	tel, err := telemetry.Setup(ctx, "catalogue", cfg.Telemetry, stdout)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer tel.Shutdown(ctx)

	// 3. The service: database, migrations, seed, handler.
	srv, err := server.New(ctx, cfg, tel)
	if err != nil {
		return err
	}
	defer srv.Close()

	// 4. Serve until SIGINT/SIGTERM, then let in-flight requests finish.
	return httpserver.ListenAndServe(ctx, tel.Logger, cfg.HTTP, srv.Handler(), tel.MetricsHandler)
}
