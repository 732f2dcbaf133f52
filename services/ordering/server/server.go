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
	"time"

	"github.com/esimplatform/esim/libs/internalauth"
	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/service"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/jobs"
	orderingkafka "github.com/esimplatform/esim/services/ordering/kafka"
	"github.com/esimplatform/esim/services/ordering/postgres"
	"github.com/esimplatform/esim/services/ordering/sandbox"
	"github.com/esimplatform/esim/services/ordering/twirpclient"
	"github.com/esimplatform/esim/services/ordering/twirpserver"
)

// Server is a running ordering service: serve Handler, then Close, which
// stops the jobs (River's workers: the publication of order events, the
// recovery scan, the return of failed live orders' profiles) within
// jobsStopBudget, then closes Kafka, the pool and the SM-DP+ client.
type Server struct {
	*service.Server
	listeners []service.Listener
}

// Listeners is the ES2+ listener of the SM-DP+'s notifications, when
// ES2PLUS_ADDR is set: libs/service serves it beside the API.
func (s *Server) Listeners() []service.Listener { return s.listeners }

// New opens and migrates the ordering database (River's tables and
// ordering's), builds the handler and starts the jobs: the publication of
// order events to Kafka, the recovery scan and the canceller. The
// database must exist: creating databases is the platform's job, not a
// service's. Kafka need not be up: orders never wait for it.
func New(ctx context.Context, cfg Config, tel *telemetry.Telemetry) (*Server, error) {
	if tel == nil {
		return nil, errors.New("ordering server: telemetry is required")
	}
	// The SM-DP+ client and the ES2+ listener's TLS first: their
	// certificates are checked before the database is touched.
	smdp, err := newSMDPClient(cfg.SMDP, tel)
	if err != nil {
		return nil, err
	}
	es2TLS, err := es2plusTLS(cfg.ES2Plus)
	if err != nil {
		return nil, err
	}
	srv := service.NewServer(tel.Logger)
	if smdp != nil {
		srv.OnClose("the SM-DP+ client", func() error { smdp.Close(); return nil })
	}
	net, err := newNetworkClient(cfg.Network)
	if err != nil {
		srv.Close()
		return nil, err
	}
	networks := map[ordering.Environment]ordering.Network{}
	if net != nil {
		srv.OnClose("the network client", func() error { net.Close(); return nil })
		networks[ordering.Live] = net
	}
	pool, err := postgres.Open(ctx, cfg.DatabaseURL.Reveal(),
		libpostgres.WithTracerProvider(tel.TracerProvider), postgres.WithPoolDefaults())
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("ordering database: %w", err)
	}
	srv.OnClose("the database pool", func() error { return libpostgres.Close(pool) })
	// Config.Validate checked that the pool has room for these; a
	// Config built by hand without them holds what the pool allows.
	holders := cmp.Or(cfg.OrderConcurrency, max(1, int(pool.Config().MaxConns)-postgres.ReservedConns))
	store := postgres.NewStore(pool, holders)
	live, err := newLiveProvider(cfg.SMDP, smdp, store, tel)
	if err != nil {
		srv.Close()
		return nil, err
	}
	providers := map[ordering.Environment]ordering.Provider{ordering.Sandbox: sandbox.New(func(tx ordering.Locked) sandbox.Store { return store.Records(tx) }, cfg.SandboxSMDPAddress)}
	if live != nil {
		providers[ordering.Live] = live
	}
	publisher := orderingkafka.NewPublisher(cfg.Kafka, cfg.KafkaTopic, tel.TracerProvider)
	srv.OnClose("the Kafka writer", publisher.Close)
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
		Networks:        networks,
		Finished:        orderMetrics(tel),
	})
	queue, err := jobs.New(pool, jobs.Config{
		Service: svc, EnsureTopic: publisher.EnsureTopic, Log: tel.Logger, Meter: tel.MeterProvider,
		PollInterval: cfg.RelayInterval, Retention: cfg.OutboxRetention,
		RecoveryInterval: cfg.RecoveryInterval, RecoveryAfter: cfg.RecoveryAfter,
		Live: live, CancelBackoff: cfg.SMDP.CancelInterval,
		ExpiryInterval: cfg.ExpiryInterval, UsageInterval: cfg.UsageInterval,
	})
	if err == nil {
		if err = srv.Start(ctx, "the jobs", jobsStopBudget, queue); err != nil {
			_ = queue.Stop(ctx) // unregisters its metrics; Start's error says why
		}
	}
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("ordering jobs: %w", err)
	}
	srv.ServeInternal(twirpserver.Handler(svc, tel.Logger, cfg.Callers), tel, pool, cfg.AllowedHosts)
	return &Server{Server: srv, listeners: es2plusListener(cfg.ES2Plus, es2TLS, svc, tel)}, nil
}

// jobsStopBudget is the most Close waits for the jobs running: River
// lets them finish for 5 s, then cancels them (a publication cut short is
// published again, a recovery pass stops between orders, a cancellation
// is recorded or tried again). Past it the pool closes under them, which
// leaves every order, event and profile safe: whoever takes them next
// resumes them.
const jobsStopBudget = 8 * time.Second
