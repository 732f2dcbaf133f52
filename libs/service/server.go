package service

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/telemetry"
)

// Server is what every service's server has in common: the handler it
// serves, the background tasks it runs and what it releases when closed.
// A service's server embeds it, adds what the service opened with
// OnClose and its background work with Go or Start, and serves with
// Serve.
type Server struct {
	log     *slog.Logger
	handler http.Handler

	mu      sync.Mutex
	closing []func()
}

// NewServer starts a service's server; log records what goes wrong while
// it closes.
func NewServer(log *slog.Logger) *Server { return &Server{log: log} }

// Serve sets the handler of the service's port.
func (s *Server) Serve(h http.Handler) { s.handler = h }

// Handler is the handler Serve set.
func (s *Server) Handler() http.Handler { return s.handler }

// OnClose adds a step to Close: steps run newest first, so what was
// opened last (a task using the pool) stops before what it uses (the
// pool). A step that fails is logged under what.
func (s *Server) OnClose(what string, close func() error) {
	s.add(func() {
		if err := close(); err != nil {
			s.log.Warn("closing "+what, "err", err)
		}
	})
}

// Go runs loop until Close: Close cancels loop's context and waits for it
// to return for at most budget, then logs that it is left behind and
// goes on closing (what the loop uses, such as the pool, then closes
// under it; a loop's work must be safe to cut short, as every step of an
// order or a delivery is).
func (s *Server) Go(ctx context.Context, name string, budget time.Duration, loop func(context.Context)) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop(ctx)
	}()
	s.add(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(budget):
			s.log.Warn(name+" did not stop within its budget; closing what it uses under it", "budget", budget.String())
		}
	})
}

// Task is background work with a lifecycle of its own, such as a River
// client: Start returns once it runs, Stop once it has stopped or ctx
// ended.
type Task interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Start starts t, and has Close stop it within budget.
func (s *Server) Start(ctx context.Context, name string, budget time.Duration, t Task) error {
	if err := t.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	s.OnClose(name, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		return t.Stop(ctx)
	})
	return nil
}

func (s *Server) add(step func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = append(s.closing, step)
}

// Close runs the steps OnClose, Go and Start added, newest first; call it
// once the HTTP server has drained. Calling it again does nothing.
func (s *Server) Close() {
	s.mu.Lock()
	steps := s.closing
	s.closing = nil
	s.mu.Unlock()
	for i := len(steps) - 1; i >= 0; i-- {
		steps[i]()
	}
}

// OpenDatabase opens the service's database and runs its migrations
// (libs/postgres.Open), traced by tel, and has Close close the pool after
// every step added later (the tasks and loops that use it).
func (s *Server) OpenDatabase(ctx context.Context, url string, migrations fs.FS, tel *telemetry.Telemetry, opts ...postgres.Option) (*pgxpool.Pool, error) {
	pool, err := postgres.Open(ctx, url, migrations, append([]postgres.Option{postgres.WithTracerProvider(tel.TracerProvider)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	s.OnClose("the database pool", func() error { return postgres.Close(pool) })
	return pool, nil
}

// ServeInternal serves app, an internal service's Twirp API, with the
// probes: /readyz checks the database pool. Only names that point inside
// (httpserver.InternalHost) and allowedHosts reach it: the Twirp API
// checks its callers' tokens, the probes and /metrics none.
func (s *Server) ServeInternal(app http.Handler, tel *telemetry.Telemetry, pool *pgxpool.Pool, allowedHosts []string) {
	s.Serve(httpserver.Handler(httpserver.Routes{
		App:          app,
		Telemetry:    tel,
		Ready:        map[string]httpserver.Check{"postgres": pool.Ping},
		AllowedHosts: allowedHosts,
	}))
}
