// Package service runs a service the same way everywhere: the process's
// signals, its configuration parsed once, telemetry, the server the
// service's own package assembles, its HTTP listeners, and a shutdown in
// a defined order:
//
//  1. a signal ends the listeners' accept loops; requests in flight get the
//     grace period (SHUTDOWN_TIMEOUT);
//  2. the server's Close stops its background tasks, newest first, each
//     within its own budget, then releases what it opened (Kafka, pools);
//  3. telemetry is flushed last, so the shutdown itself is recorded.
//
// A service's main is one call to Main, its run one call to Run; its
// server package builds on Server for the tasks and the closing.
package service

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/libs/twirperr"
)

// Settings is the part of every service's configuration the runner reads.
type Settings struct {
	HTTP      httpserver.Config
	Runtime   config.Runtime
	Telemetry telemetry.Config
}

// Config is a service's configuration: parsed from the environment by
// config.Parse (which runs its Validate), with the runner's part in it.
type Config interface {
	Settings() Settings
}

// Handler is what the runner serves of a service: the handler of its
// port (its API, /healthz and /readyz), and Close, called once the
// listeners have drained.
type Handler interface {
	Handler() http.Handler
	Close()
}

// Listener is a port a service serves beside its API, such as the
// simulator's ES2+ port.
type Listener struct {
	// Name is what logs and errors call it, and Setting the variable that
	// set Addr, for an error naming what to change.
	Name, Setting string
	Addr          string
	// TLS, when set, is the listener's TLS configuration.
	TLS     *tls.Config
	Handler http.Handler
}

// Listeners is implemented by a server with ports besides its API. They
// are bound before anything is served, so a taken port fails the start,
// and a failing one stops the others: half a service is worse than none.
type Listeners interface {
	Listeners() []Listener
}

// Stopping is implemented by a server that has something to end as the
// shutdown begins rather than after the drain, such as calls it holds
// open that would otherwise hold the drain for its whole grace period.
type Stopping interface {
	Stopping()
}

// Main binds run to the process: SIGINT and SIGTERM end its context (a
// second one, during the drain, stops the process at once), and an error
// is logged as JSON on stderr before exiting 1.
func Main(name string, run func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop() // os.Exit skips deferred calls
	if err != nil {
		telemetry.LogExit(os.Stderr, name, err)
		os.Exit(1)
	}
}

// Run is the whole program of the service called name, whose server
// package's New assembles it from its configuration. It takes no
// arguments: services are configured with environment variables only.
func Run[C Config, H Handler](ctx context.Context, name string, newServer func(context.Context, C, *telemetry.Telemetry) (H, error), args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 1 {
		return fmt.Errorf("unexpected arguments %q: configure %s with environment variables", args[1:], name)
	}

	// Configuration, parsed once; nothing below reads the environment.
	// The Go runtime's settings in it apply at once.
	var cfg C
	if err := config.Parse(ctx, config.Getenv(getenv), &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	settings := cfg.Settings()
	settings.Runtime.Apply()

	tel, err := telemetry.Setup(ctx, name, settings.Telemetry, stdout)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer tel.Shutdown(ctx)

	srv, err := newServer(ctx, cfg, tel)
	if err != nil {
		return err
	}
	defer srv.Close()
	if s, ok := any(srv).(Stopping); ok {
		context.AfterFunc(ctx, s.Stopping)
	}

	var extra []Listener
	if l, ok := any(srv).(Listeners); ok {
		extra = l.Listeners()
	}
	if len(extra) == 0 {
		return httpserver.ListenAndServe(ctx, tel.Logger, settings.HTTP, srv.Handler(), tel.MetricsHandler)
	}
	return serveAll(ctx, tel, settings.HTTP, srv.Handler(), extra)
}

// serveAll serves the API and the extra listeners until ctx ends or one
// of them fails, which stops the others.
func serveAll(ctx context.Context, tel *telemetry.Telemetry, cfg httpserver.Config, api http.Handler, extra []Listener) error {
	lns := make([]net.Listener, len(extra))
	for i, l := range extra {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			for _, bound := range lns[:i] {
				_ = bound.Close()
			}
			return fmt.Errorf("listen on %s (%s): %w", l.Addr, l.Setting, err)
		}
		if l.TLS != nil {
			ln = tls.NewListener(ln, l.TLS)
		}
		lns[i] = ln
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(extra)+1)
	go func() {
		err := httpserver.ListenAndServe(ctx, tel.Logger, cfg, api, tel.MetricsHandler)
		cancel()
		errc <- err
	}()
	for i, l := range extra {
		go func() {
			err := httpserver.Serve(ctx, tel.Logger.With("serving", l.Name), lns[i], l.Handler, cfg.ShutdownTimeout)
			if err != nil {
				err = fmt.Errorf("%s: %w", l.Name, err)
			}
			cancel()
			errc <- err
		}()
	}
	errs := make([]error, 0, len(extra)+1)
	for range len(extra) + 1 {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}

// Twirp serves impl, a service's Twirp implementation, through the
// generated newServer, only to callers whose token is in callers and whom
// policy lets call the method (internalauth.Protect). Its hooks log
// internal errors and calls cut short, whose causes callers never see.
func Twirp[I any, S internalauth.Service](newServer func(I, ...any) S, impl I, log *slog.Logger, callers internalauth.Callers, policy internalauth.Policy) http.Handler {
	return internalauth.Protect(newServer(impl, twirp.WithServerHooks(twirperr.ServerHooks(log))), callers, policy, log)
}
