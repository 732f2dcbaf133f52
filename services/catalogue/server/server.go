// Package server assembles the catalogue service: its database, the domain
// service, the Twirp API and the probes, ready to serve in a process or
// in-process in another service's tests.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/esimplatform/esim/libs/httpserver"
	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/catalogue"
	"github.com/esimplatform/esim/services/catalogue/postgres"
	"github.com/esimplatform/esim/services/catalogue/twirpserver"
)

// Server is a running catalogue: serve Handler, then Close.
type Server struct {
	pool    *pgxpool.Pool
	handler http.Handler
	log     *slog.Logger
}

// New opens and migrates the catalogue's database, seeds the bundled
// catalogue when cfg.SeedCatalogue is set, and builds the HTTP handler.
// The database must exist: creating databases is the platform's job, not
// a service's.
func New(ctx context.Context, cfg Config, tel *telemetry.Telemetry) (*Server, error) {
	if tel == nil {
		return nil, errors.New("catalogue server: telemetry is required")
	}
	pool, err := libpostgres.Open(ctx, cfg.DatabaseURL.Reveal(), postgres.Migrations, libpostgres.WithTracerProvider(tel.TracerProvider))
	if err != nil {
		return nil, fmt.Errorf("catalogue database: %w", err)
	}
	store := postgres.NewStore(pool)
	svc := catalogue.NewService(store, nil)

	if cfg.SeedCatalogue {
		res, err := svc.Seed(ctx)
		if err != nil {
			_ = libpostgres.Close(pool) // the start failed: its error says why
			return nil, fmt.Errorf("seed catalogue: %w", err)
		}
		tel.Logger.InfoContext(ctx, "catalogue seeded",
			"created", res.Created, "updated", res.Updated, "unchanged", res.Unchanged)
	}
	// Every start, seeded or not (production does not seed): statistics
	// are the database's, and a database restored or migrated without them
	// would otherwise stay without them. On a catalogue's few tables it
	// takes milliseconds.
	if err := store.Analyze(ctx); err != nil {
		_ = libpostgres.Close(pool) // the start failed: its error says why
		return nil, err
	}

	return &Server{
		pool: pool,
		log:  tel.Logger,
		handler: httpserver.Handler(httpserver.Routes{
			App:       twirpserver.Handler(svc, tel.Logger, cfg.Callers),
			Telemetry: tel,
			Ready:     map[string]httpserver.Check{"postgres": pool.Ping},
			// Unauthenticated: only names that point inside (see
			// httpserver.InternalHost) reach it.
			AllowedHosts: cfg.AllowedHosts,
		}),
	}, nil
}

// Handler serves the Twirp API under /twirp/, plus /healthz and /readyz;
// /metrics is httpserver.ListenAndServe's.
func (s *Server) Handler() http.Handler { return s.handler }

// Close releases the database pool; call it once the HTTP server stopped.
func (s *Server) Close() {
	if err := libpostgres.Close(s.pool); err != nil {
		s.log.Warn("closing the database pool", "err", err)
	}
}
