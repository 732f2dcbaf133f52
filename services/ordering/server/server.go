// Package server assembles the ordering service: its database, its clients
// of the catalogue and the wallet, the providers, the Twirp API with the
// probes, the recovery loop and the relay of order events to Kafka, ready
// to serve in a process or in-process in another service's tests.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"

	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/internalauth"
	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/es2plus"
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
	// stopRecovery ends the recovery loop and the cancellation loop,
	// which loops waits for.
	stopRecovery context.CancelFunc
	loops        sync.WaitGroup
	// smdp is the live provider's client, nil without one.
	smdp *es2plus.Client
	// stopRelay ends the relay loop between batches and stopPublishing
	// cuts short the batch it is publishing; relayed is closed once the
	// loop has returned.
	stopRelay, stopPublishing context.CancelFunc
	relayed                   chan struct{}
	publisher                 *orderingkafka.Publisher
	published                 metric.Int64Counter
	waitingMetric             metric.Registration
}

// New opens and migrates the ordering database, builds the handler and
// starts the recovery loop and the relay of order events to Kafka. The
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
	pool, err := libpostgres.Open(ctx, cfg.DatabaseURL.Reveal(), postgres.Migrations,
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
		Outbox:          store,
		Publisher:       publisher,
	})
	published, waitingMetric, err := relayMetrics(tel.MeterProvider, svc)
	if err != nil {
		pool.Close()
		if smdp != nil {
			smdp.Close()
		}
		return nil, fmt.Errorf("ordering metrics: %w", err)
	}

	loopCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &Server{
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
		stopRecovery:  stop,
		smdp:          smdp,
		relayed:       make(chan struct{}),
		publisher:     publisher,
		published:     published,
		waitingMetric: waitingMetric,
	}
	s.loops.Add(1)
	go s.recoveryLoop(loopCtx, svc, cfg.RecoveryInterval, cfg.RecoveryAfter)
	if live != nil {
		s.loops.Add(1)
		go s.cancelLoop(loopCtx, live, cfg.SMDP.CancelInterval)
	}
	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	publishCtx, stopPublishing := context.WithCancel(context.WithoutCancel(ctx))
	s.stopRelay, s.stopPublishing = stopRelay, stopPublishing
	go s.relayLoop(relayCtx, publishCtx, svc, cfg.RelayInterval, cfg.OutboxRetention)
	return s, nil
}

// recoveryLoop finishes, every interval, the orders left unfinished for
// longer than after. Every replica runs one; the orders' locks keep two
// from handling one order at once.
func (s *Server) recoveryLoop(ctx context.Context, svc *ordering.Service, interval, after time.Duration) {
	defer s.loops.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		results, err := svc.Recover(ctx, after)
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "recovery pass failed", "err", err)
			}
			continue
		}
		for _, r := range results {
			s.logRecovered(ctx, r)
		}
	}
}

func (s *Server) logRecovered(ctx context.Context, r ordering.Recovered) {
	attrs := []any{"order_id", r.OrderID.String(), "account_id", r.Scope.AccountID.String(), "environment", string(r.Scope.Environment)}
	switch {
	case r.Err != nil && ctx.Err() != nil:
		s.log.DebugContext(ctx, "recovery stopped by the shutdown; the order is left for the next start", attrs...)
	case r.Skipped:
		s.log.DebugContext(ctx, "recovery skipped an order someone else holds", attrs...)
	case r.Deleted:
		s.log.InfoContext(ctx, "recovery deleted an order the balance no longer covers", append(attrs, "reason", r.Err.Error())...)
	case r.Err != nil:
		// Left as it was, for the next pass: every step is idempotent.
		s.log.WarnContext(ctx, "recovery could not finish an order", append(attrs, "status", string(r.Status), "err", r.Err.Error())...)
	default:
		s.log.InfoContext(ctx, "recovery finished an order", append(attrs, "status", string(r.Status))...)
	}
}

// Handler serves the Twirp API under /twirp/, plus /healthz and /readyz;
// /metrics is httpserver.ListenAndServe's.
func (s *Server) Handler() http.Handler { return s.handler }

// recoveryStopBudget is the most Close waits for an order the recovery
// loop is finishing. Past it the pool closes under it, which leaves the
// order unfinished and safe: whoever takes it next resumes it.
const recoveryStopBudget = 5 * time.Second

// relayStopBudget is the most Close waits for a batch of events the relay
// is publishing, which takes milliseconds unless Kafka is slow. Past it
// the batch is cut short and left in the outbox, published again (at
// least once) by the next relay.
const relayStopBudget = 2 * time.Second

// Close stops the recovery loop, then the relay (the recovery may still
// write events; they wait for the next relay), and releases Kafka and the
// database pool; call it once the HTTP server stopped.
func (s *Server) Close() {
	s.stopRecovery()
	stopped := make(chan struct{})
	go func() { s.loops.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(recoveryStopBudget):
		s.log.Warn("the recovery loop was still finishing an order, or the canceller a profile; closing the database under it")
	}
	s.stopRelay()
	select {
	case <-s.relayed:
	case <-time.After(relayStopBudget):
		s.log.Warn("the relay was still publishing a batch of order events; cutting it short, to be published again by the next relay")
		s.stopPublishing()
		select {
		case <-s.relayed:
		case <-time.After(relayStopBudget):
			s.log.Warn("the relay did not stop; closing Kafka and the database under it")
		}
	}
	s.stopPublishing()
	if err := s.waitingMetric.Unregister(); err != nil {
		s.log.Warn("unregistering the outbox metric", "err", err)
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
