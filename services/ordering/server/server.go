// Package server assembles the ordering service: its database, its clients
// of the catalogue and the wallet, the providers, the Twirp API with the
// probes, and its jobs (the publication of order events to Kafka, the
// recovery scan) on River, ready to serve in a process or in-process in
// another service's tests.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/internalauth"
	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/es2plus"
	"github.com/esimplatform/esim/services/ordering/jobs"
	orderingkafka "github.com/esimplatform/esim/services/ordering/kafka"
	"github.com/esimplatform/esim/services/ordering/postgres"
	"github.com/esimplatform/esim/services/ordering/sandbox"
	"github.com/esimplatform/esim/services/ordering/twirpclient"
	"github.com/esimplatform/esim/services/ordering/twirpserver"
)

// Server is a running ordering service: serve Handler, then Close.
type Server struct {
	pool    *pgxpool.Pool
	handler http.Handler
	log     *slog.Logger
	// jobs works ordering's River jobs: it publishes order events, runs
	// the recovery scan and gives back the profiles of failed live
	// orders.
	jobs *jobs.Queue
	// smdp is the live provider's client, nil without one.
	smdp      *es2plus.Client
	publisher *orderingkafka.Publisher
}

// New opens and migrates the ordering database (River's tables and
// ordering's), builds the handler and starts the jobs: the publication of
// order events to Kafka, the recovery scan and the canceller. The
// database must exist: creating databases is the platform's job, not a
// service's. Kafka need not be up: orders never wait for it.
func New(ctx context.Context, cfg Config, tel *telemetry.Telemetry) (*Server, error) {
	if tel == nil {
		return nil, errors.New("ordering server: telemetry is required")
	}
	smdp, err := newSMDPClient(cfg.SMDP, tel)
	if err != nil {
		return nil, err
	}
	pool, err := postgres.Open(ctx, cfg.DatabaseURL.Reveal(),
		libpostgres.WithTracerProvider(tel.TracerProvider), postgres.WithPoolDefaults())
	if err != nil {
		if smdp != nil {
			smdp.Close()
		}
		return nil, fmt.Errorf("ordering database: %w", err)
	}
	// Config.Validate checked that the pool has room for these; a
	// Config built by hand without them holds what the pool allows.
	holders := cmp.Or(cfg.OrderConcurrency, max(1, int(pool.Config().MaxConns)-postgres.ReservedConns))
	store := postgres.NewStore(pool, holders)
	live, err := newLiveProvider(cfg.SMDP, smdp, store, tel)
	if err != nil {
		smdp.Close()
		pool.Close()
		return nil, err
	}
	providers := map[ordering.Environment]ordering.Provider{ordering.Sandbox: sandbox.New(func(tx ordering.Locked) sandbox.Store { return store.Records(tx) }, cfg.SandboxSMDPAddress)}
	if live != nil {
		providers[ordering.Live] = live
	}
	publisher := orderingkafka.NewPublisher(cfg.Kafka, cfg.KafkaTopic, tel.TracerProvider)
	hc := internalauth.Client(tel.HTTPClient(cfg.ServiceTimeout), string(cfg.InternalToken.Reveal()))
	svc := ordering.NewService(ordering.Deps{
		Store:     store,
		Catalogue: twirpclient.NewCatalogue(string(cfg.CatalogueURL), hc),
		Wallet:    twirpclient.NewWallet(string(cfg.WalletURL), hc),
		// Live has no provider without an SM-DP+: its orders fail and
		// are refunded.
		Providers:       providers,
		QRBaseURL:       string(cfg.QRBaseURL),
		OrderTimeout:    cfg.OrderTimeout,
		ProviderTimeout: cfg.ProviderTimeout,
		LockWait:        cfg.IdempotencyWait,
		MaxInFlight:     cfg.InFlightPerAccount,
		Publisher:       publisher,
	})
	queue, err := jobs.New(pool, jobs.Config{
		Service: svc, EnsureTopic: publisher.EnsureTopic, Log: tel.Logger, Meter: tel.MeterProvider,
		PollInterval: cfg.RelayInterval, Retention: cfg.OutboxRetention,
		RecoveryInterval: cfg.RecoveryInterval, RecoveryAfter: cfg.RecoveryAfter,
		Live: live, CancelBackoff: cfg.SMDP.CancelInterval,
	})
	if err == nil {
		if err = queue.Start(ctx); err != nil {
			_ = queue.Stop(ctx) // unregisters its metrics; Start's error says why
		}
	}
	if err != nil {
		pool.Close()
		if smdp != nil {
			smdp.Close()
		}
		return nil, fmt.Errorf("ordering jobs: %w", err)
	}

	return &Server{
		pool: pool,
		log:  tel.Logger,
		handler: httpserver.Handler(httpserver.Routes{
			App:       twirpserver.Handler(svc, tel.Logger, cfg.Callers),
			Telemetry: tel,
			Ready:     map[string]httpserver.Check{"postgres": pool.Ping},
			// Only names that point inside (see httpserver.InternalHost)
			// reach it, and then only with a caller's token.
			AllowedHosts: cfg.AllowedHosts,
		}),
		jobs:      queue,
		smdp:      smdp,
		publisher: publisher,
	}, nil
}

// Handler serves the Twirp API under /twirp/, plus /healthz and /readyz;
// /metrics is httpserver.ListenAndServe's.
func (s *Server) Handler() http.Handler { return s.handler }

// jobsStopBudget is the most Close waits for the jobs running: River
// lets them finish for 5 s, then cancels them (a publication cut short is
// published again, a recovery pass stops between orders, a cancellation
// is recorded or tried again). Past it the pool closes under them, which
// leaves every order, event and profile safe: whoever takes them next
// resumes them.
const jobsStopBudget = 8 * time.Second

// Close stops the jobs, and releases Kafka and the database pool; call it
// once the HTTP server stopped.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), jobsStopBudget)
	defer cancel()
	if err := s.jobs.Stop(ctx); err != nil {
		s.log.Warn("the jobs did not stop in time; closing Kafka and the database under them", "err", err)
	}
	if err := s.publisher.Close(); err != nil {
		s.log.Warn("closing the Kafka writer", "err", err)
	}
	if s.smdp != nil {
		s.smdp.Close()
	}
	if err := libpostgres.Close(s.pool); err != nil {
		s.log.Warn("closing the database pool", "err", err)
	}
}
