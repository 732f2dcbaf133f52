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
	"github.com/esimplatform/esim/services/wallet"
	"github.com/esimplatform/esim/services/wallet/postgres"
	"github.com/esimplatform/esim/services/wallet/twirpserver"
)

// Server is the assembled wallet service: its database pool and its HTTP
// handler. It does not listen; run (or a test) serves Handler on a listener
// of its choosing, so it can start in-process on port 0.
type Server struct {
	pool    *pgxpool.Pool
	handler http.Handler
	log     *slog.Logger
}

// New connects to the wallet database, applies pending migrations and
// builds the handler. The database must exist: `make run` and the charts
// create it, so the service needs no rights to create databases.
func New(ctx context.Context, cfg Config, tel *telemetry.Telemetry) (*Server, error) {
	if tel == nil {
		return nil, errors.New("wallet server: telemetry is required")
	}
	pool, err := libpostgres.Open(ctx, cfg.DatabaseURL.Reveal(), postgres.Migrations,
		libpostgres.WithTracerProvider(tel.TracerProvider))
	if err != nil {
		return nil, fmt.Errorf("wallet database: %w", err)
	}
	svc := wallet.NewService(postgres.NewStore(pool))

	return &Server{
		pool: pool,
		log:  tel.Logger,
		handler: httpserver.Handler(httpserver.Routes{
			// Every Twirp call needs a caller's credential (cfg.Callers)
			// and the policy's leave; the probes need none.
			App:       twirpserver.Handler(svc, tel.Logger, cfg.Callers),
			Telemetry: tel,
			Ready:     map[string]httpserver.Check{"postgres": pool.Ping},
			// Only names that point inside (see httpserver.InternalHost)
			// reach it.
			AllowedHosts: cfg.AllowedHosts,
		}),
	}, nil
}

// Handler serves the Twirp API plus /healthz and /readyz; /metrics is
// httpserver.ListenAndServe's.
func (s *Server) Handler() http.Handler { return s.handler }

// Close releases the database pool; call it after the HTTP server stopped.
func (s *Server) Close() {
	if err := libpostgres.Close(s.pool); err != nil {
		s.log.Warn("closing the database pool", "err", err)
	}
}
