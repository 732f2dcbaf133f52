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
	"github.com/esimplatform/esim/services/accounts"
	"github.com/esimplatform/esim/services/accounts/postgres"
	"github.com/esimplatform/esim/services/accounts/twirpserver"
)

// Server is the assembled accounts service: its database pool and its HTTP
// handler. It does not listen; run (or a test) serves Handler on a listener
// of its choosing, so it can start in-process on port 0.
type Server struct {
	pool    *pgxpool.Pool
	handler http.Handler
	log     *slog.Logger
}

// New connects to the accounts database, applies pending migrations and
// builds the handler. The database must exist: `make run` and the charts
// create it, so the service needs no rights to create databases.
func New(ctx context.Context, cfg Config, tel *telemetry.Telemetry) (*Server, error) {
	if tel == nil {
		return nil, errors.New("accounts server: telemetry is required")
	}
	pool, err := libpostgres.Open(ctx, cfg.DatabaseURL.Reveal(), postgres.Migrations,
		libpostgres.WithTracerProvider(tel.TracerProvider))
	if err != nil {
		return nil, fmt.Errorf("accounts database: %w", err)
	}
	svc := accounts.NewService(postgres.NewStore(pool),
		accounts.WithSessionTTL(cfg.SessionTTL), accounts.WithInviteTTL(cfg.InviteTTL))

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

// Handler serves the Twirp API plus /healthz and /readyz; /metrics is
// httpserver.ListenAndServe's.
func (s *Server) Handler() http.Handler { return s.handler }

// Close releases the database pool; call it after the HTTP server stopped.
func (s *Server) Close() {
	if err := libpostgres.Close(s.pool); err != nil {
		s.log.Warn("closing the database pool", "err", err)
	}
}
