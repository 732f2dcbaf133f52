package server

import (
	"context"
	"errors"

	"github.com/esimplatform/esim/libs/service"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/wallet"
	"github.com/esimplatform/esim/services/wallet/postgres"
	"github.com/esimplatform/esim/services/wallet/twirpserver"
)

// Server is the assembled wallet service: its database pool and its HTTP
// handler. It does not listen; run (or a test) serves Handler on a listener
// of its choosing, so it can start in-process on port 0.
type Server struct {
	*service.Server
}

// New connects to the wallet database, applies pending migrations and
// builds the handler. The database must exist: `make run` and the charts
// create it, so the service needs no rights to create databases.
func New(ctx context.Context, cfg Config, tel *telemetry.Telemetry) (*Server, error) {
	if tel == nil {
		return nil, errors.New("wallet server: telemetry is required")
	}
	srv := service.NewServer(tel.Logger)
	pool, err := srv.OpenDatabase(ctx, cfg.DatabaseURL.Reveal(), postgres.Migrations, tel)
	if err != nil {
		return nil, err
	}
	svc := wallet.NewService(postgres.NewStore(pool))
	svc.ObserveMovements(movementMetrics(tel))
	srv.ServeInternal(twirpserver.Handler(svc, tel.Logger, cfg.Callers), tel, pool, cfg.AllowedHosts)
	return &Server{srv}, nil
}
