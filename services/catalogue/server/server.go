// Package server assembles the catalogue service: its database, the domain
// service, the Twirp API and the probes, ready to serve in a process or
// in-process in another service's tests.
package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/esimplatform/esim/libs/service"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/catalogue"
	"github.com/esimplatform/esim/services/catalogue/postgres"
	"github.com/esimplatform/esim/services/catalogue/twirpserver"
)

// Server is a running catalogue: serve Handler, then Close.
type Server struct {
	*service.Server
}

// New opens and migrates the catalogue's database, seeds the bundled
// catalogue when cfg.SeedCatalogue is set, and builds the HTTP handler.
// The database must exist: creating databases is the platform's job, not
// a service's.
func New(ctx context.Context, cfg Config, tel *telemetry.Telemetry) (*Server, error) {
	if tel == nil {
		return nil, errors.New("catalogue server: telemetry is required")
	}
	srv := service.NewServer(tel.Logger)
	pool, err := srv.OpenDatabase(ctx, cfg.DatabaseURL.Reveal(), postgres.Migrations, tel)
	if err != nil {
		return nil, err
	}
	store := postgres.NewStore(pool)
	svc := catalogue.NewService(store, nil)

	if cfg.SeedCatalogue {
		res, err := svc.Seed(ctx)
		if err != nil {
			srv.Close() // the start failed: its error says why
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
		srv.Close()
		return nil, err
	}
	srv.ServeInternal(twirpserver.Handler(svc, tel.Logger, cfg.Callers), tel, pool, cfg.AllowedHosts)
	return &Server{srv}, nil
}
