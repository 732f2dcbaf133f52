// Package server assembles the webhook service: its database, the Kafka
// consumer of ordering's events, the delivery queue (River) with its
// guarded HTTP client, and the Twirp API with the probes, ready to serve in a
// process or in-process in another service's tests.
package server

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"

	"github.com/esimplatform/esim/libs/httpserver"
	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/service"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/webhook"
	"github.com/esimplatform/esim/services/webhook/aesgcm"
	"github.com/esimplatform/esim/services/webhook/httpsender"
	"github.com/esimplatform/esim/services/webhook/kafkaconsumer"
	"github.com/esimplatform/esim/services/webhook/postgres"
	"github.com/esimplatform/esim/services/webhook/twirpserver"
)

// Server is a running webhook service: serve Handler, then Close, which
// stops the consumer, then the delivery queue (attempts in flight get
// workerStopBudget), then closes the sender and the pool.
type Server struct {
	*service.Server
}

// DefaultMaxConns is the pool size where the database URL sets none
// (pool_max_conns): a delivery holds a connection only to start its
// attempt and to record it, never while sending; River's notifier holds
// one more.
const DefaultMaxConns = 10

// New opens and migrates the webhook database, builds the handler and
// starts the delivery queue and the consumer. The database must exist: creating
// databases is the platform's job, not a service's. Kafka need not be up:
// the consumer waits for it in the background.
func New(ctx context.Context, cfg Config, tel *telemetry.Telemetry) (*Server, error) {
	if tel == nil {
		return nil, errors.New("webhook server: telemetry is required")
	}
	key, err := cfg.secretsKey()
	if err != nil {
		return nil, err
	}
	sealer, err := aesgcm.New(key)
	if err != nil {
		return nil, err
	}
	roots, err := endpointRoots(cfg.EndpointCAFile)
	if err != nil {
		return nil, err
	}
	private, err := cfg.privateEndpoints()
	if err != nil {
		return nil, err
	}
	var resolver webhook.Resolver = net.DefaultResolver
	if cfg.Resolver != nil {
		resolver = cfg.Resolver
	}
	srv := service.NewServer(tel.Logger)
	pool, err := postgres.Open(ctx, cfg.DatabaseURL.Reveal(),
		libpostgres.WithTracerProvider(tel.TracerProvider), withPoolDefaults())
	if err != nil {
		return nil, fmt.Errorf("webhook database: %w", err)
	}
	srv.OnClose("the database pool", func() error { return libpostgres.Close(pool) })
	store, err := postgres.NewStore(pool, cfg.PerEndpointConcurrency)
	if err != nil {
		srv.Close()
		return nil, err
	}

	sender := httpsender.New(httpsender.Options{
		PrivateEndpoints: private,
		RootCAs:          roots,
		TracerProvider:   tel.TracerProvider,
	})
	srv.OnClose("the HTTP sender", func() error { sender.Close(); return nil })
	svc := webhook.NewService(webhook.Deps{
		Store:            store,
		Sealer:           sealer,
		Poster:           sender,
		AttemptTimeout:   cfg.AttemptTimeout,
		MaxPerEndpoint:   cfg.PerEndpointConcurrency,
		PrivateEndpoints: private,
		Resolver:         resolver,
		Log:              tel.Logger,
		Observe:          attemptMetrics(tel),
		Trace:            traceContext,
	})
	if err := svc.CheckSecretsKey(ctx); err != nil {
		srv.Close()
		return nil, fmt.Errorf("SECRETS_KEY: %w", err)
	}
	queue, err := postgres.NewQueue(pool, svc, postgres.QueueConfig{
		Workers: cfg.Workers, AttemptTimeout: cfg.AttemptTimeout, PollInterval: cfg.PollInterval, Log: tel.Logger,
		Meter: tel.MeterProvider, PerScope: cfg.PerEndpointConcurrency,
	})
	if err == nil {
		err = srv.Start(ctx, "the delivery queue", workerStopBudget, queue)
	}
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("delivery queue: %w", err)
	}

	srv.Serve(httpserver.Handler(httpserver.Routes{
		App:       twirpserver.Handler(svc, tel.Logger, cfg.Callers),
		Telemetry: tel,
		// Kafka is not a readiness check: a replica without it still
		// delivers the jobs in the database and serves the API, and
		// its consumer catches up once the broker is back.
		Ready: map[string]httpserver.Check{"postgres": pool.Ping},
		// Only names that point inside (see httpserver.InternalHost)
		// reach it, and then only with a caller's token.
		AllowedHosts: cfg.AllowedHosts,
	}))
	consumer := kafkaconsumer.Start(kafkaconsumer.Options{
		Kafka: cfg.Kafka, Topic: cfg.Topic, Group: cfg.Group,
		Log: tel.Logger, TracerProvider: tel.TracerProvider,
	}, svc)
	srv.OnClose("the Kafka consumer", func() error { consumer.Stop(); return nil })
	return &Server{srv}, nil
}

// withPoolDefaults sizes the pool unless the database URL does.
func withPoolDefaults() libpostgres.Option {
	return func(c *pgxpool.Config) {
		if !strings.Contains(c.ConnString(), "pool_max_conns") {
			c.MaxConns = DefaultMaxConns
		}
	}
}

// privateEndpoints are the host:ports endpoints may reach though not
// public: SANDBOX_PRIVATE_ENDPOINTS, and any a test opens.
func (c Config) privateEndpoints() (webhook.PrivateEndpoints, error) {
	sandbox, err := c.sandboxPrivateEndpoints()
	if err != nil {
		return nil, err
	}
	listed := webhook.HostPorts{webhook.Sandbox: sandbox}
	if c.TestEndpoints == nil {
		return listed, nil
	}
	return eitherOf{listed, c.TestEndpoints}, nil
}

// eitherOf allows what either list allows.
type eitherOf [2]webhook.PrivateEndpoints

func (e eitherOf) Allows(env webhook.Environment, addr netip.AddrPort) bool {
	return e[0].Allows(env, addr) || e[1].Allows(env, addr)
}

// endpointRoots are the system's certificate authorities, and those of
// file when it is named.
func endpointRoots(file string) (*x509.CertPool, error) {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if file == "" {
		return roots, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("ENDPOINT_CA_FILE: %w", err)
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ENDPOINT_CA_FILE %s: no PEM certificate in it", file)
	}
	return roots, nil
}

// traceContext is the W3C trace context of ctx, for a test event's
// attempts to join the call that made it.
func traceContext(ctx context.Context) map[string]string {
	carrier := map[string]string{}
	propagation.TraceContext{}.Inject(ctx, propagation.MapCarrier(carrier))
	return carrier
}

// attemptMetrics counts attempts by outcome (webhook.attempts) and
// measures them (webhook.attempt.duration).
func attemptMetrics(tel *telemetry.Telemetry) func(context.Context, string, time.Duration) {
	meter := tel.MeterProvider.Meter("github.com/esimplatform/esim/services/webhook")
	// Constant names and options cannot fail in a way to handle here;
	// were they to, otel hands back no-op instruments and logs why.
	attempts, err := meter.Int64Counter("webhook.attempts",
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Delivery attempts, by outcome: delivered, failed or interrupted."))
	if err != nil {
		otel.Handle(err)
	}
	duration, err := meter.Float64Histogram("webhook.attempt.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of delivery attempts, from connecting to the end of the answer."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	if err != nil {
		otel.Handle(err)
	}
	// Label sets built once, not per attempt.
	outcomes := map[string]metric.MeasurementOption{}
	for _, o := range []string{"delivered", "failed", "interrupted"} {
		outcomes[o] = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", o)))
	}
	return func(ctx context.Context, outcome string, took time.Duration) {
		opt, ok := outcomes[outcome]
		if !ok {
			opt = metric.WithAttributes(attribute.String("outcome", outcome))
		}
		attempts.Add(ctx, 1, opt)
		duration.Record(ctx, took.Seconds(), opt)
	}
}

// workerStopBudget is how long Close lets attempts in flight finish.
// Past it they are cut short and recorded as interrupted, to be retried
// by whichever replica runs their job next.
const workerStopBudget = 5 * time.Second
