// Command smdp-sim is an SM-DP+ simulator serving the SGP.22 ES2+
// functions over mutual TLS, with a control API for tests. It is
// configured only through environment variables (see server.Config).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/smdp-sim/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // a second signal, during the drain, stops the process at once
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop() // os.Exit skips deferred calls
	if err != nil {
		telemetry.LogExit(os.Stderr, "smdp-sim", err)
		os.Exit(1)
	}
}

// run is the whole program; main only binds it to the process, so tests
// can run it with their own environment and output.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 1 {
		return fmt.Errorf("unexpected arguments %q: configure smdp-sim with environment variables", args[1:])
	}

	// 1. Configuration, parsed once; nothing below reads the environment.
	var cfg server.Config
	if err := config.Parse(ctx, getenv, &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	cfg.Runtime.Apply()

	// 2. Logs, traces and metrics, flushed last.
	tel, err := telemetry.Setup(ctx, "smdp-sim", cfg.Telemetry, stdout)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer tel.Shutdown(ctx)

	// 3. The simulator: pools, certificates, handlers.
	srv, err := server.New(ctx, cfg, tel)
	if err != nil {
		return err
	}
	defer srv.Close()
	// Hanging calls end as the shutdown begins rather than holding the
	// drain for its whole grace period.
	context.AfterFunc(ctx, srv.Close)

	// 4. Bind ES2+ before serving anything, so a taken port fails the
	// start rather than leaving a simulator that only answers probes.
	ln, err := net.Listen("tcp", cfg.ES2PlusAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (ES2PLUS_ADDR): %w", cfg.ES2PlusAddr, err)
	}
	es2Log := tel.Logger.With("serving", "es2plus")
	es2Log.InfoContext(ctx, "smdp-sim starting",
		"es2plus_addr", ln.Addr().String(), "profile_types", cfg.ProfileTypes,
		"smdp_address", cfg.SMDPAddress, "control_api", cfg.ControlAPI)

	// 5. Serve both until SIGINT/SIGTERM, or until either fails, which
	// stops the other: half a simulator is worse than none.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	go func() {
		err := httpserver.ListenAndServe(ctx, tel.Logger, cfg.HTTP, srv.Handler(), tel.MetricsHandler)
		cancel()
		errc <- err
	}()
	go func() {
		err := httpserver.Serve(ctx, es2Log, tls.NewListener(ln, srv.TLSConfig()), srv.ES2PlusHandler(), cfg.HTTP.ShutdownTimeout)
		if err != nil {
			err = fmt.Errorf("es2plus: %w", err)
		}
		cancel()
		errc <- err
	}()
	return errors.Join(<-errc, <-errc)
}
