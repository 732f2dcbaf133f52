package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"go.opentelemetry.io/otel/metric"

	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/es2plus"
)

// Config is what the workers need and how River runs them.
type Config struct {
	Service *ordering.Service
	// EnsureTopic creates the topic of order events unless it exists; it
	// runs before the first publication rather than at start, so that
	// ordering starts, and takes orders, while Kafka is down.
	EnsureTopic func(context.Context) error
	Log         *slog.Logger
	Meter       metric.MeterProvider
	// PollInterval is how often each queue looks for jobs it was not
	// notified of (RELAY_INTERVAL): a notification is missed only while
	// the listening connection is being replaced.
	PollInterval time.Duration
	// Retention is how long finished jobs (published events) stay in
	// river_job before River's cleaner deletes them (OUTBOX_RETENTION).
	Retention time.Duration
	// RecoveryInterval is how often a recovery pass is due, and
	// RecoveryAfter how old an unfinished order must be for it.
	RecoveryInterval, RecoveryAfter time.Duration
	// Live is the ES2+ provider whose profiles the canceller gives back,
	// nil without an SM-DP+; CancelBackoff is the wait before a
	// cancellation that did not go through is tried again
	// (SMDP_CANCEL_INTERVAL).
	Live          *es2plus.Provider
	CancelBackoff time.Duration
	// ExpiryInterval is how often an expiry pass is due
	// (EXPIRY_INTERVAL); UsageInterval how often the networks' usage is
	// read (USAGE_INTERVAL).
	ExpiryInterval, UsageInterval time.Duration
}

// Queue is River's client working ordering's jobs: Start it, then Stop it.
type Queue struct {
	client  *river.Client[pgx.Tx]
	pool    *pgxpool.Pool
	log     *slog.Logger
	metrics metric.Registration
}

// The most jobs of each queue one replica works at once. Publications
// take milliseconds and are many (a thousand a second under the bench's
// load); one recovery pass at a time is enough, as it handles a batch.
const (
	eventWorkers = 64
	// cancelWorkers: each works an order for up to the cancel budget,
	// then goes to the back of the queue.
	cancelWorkers = 4
	// fetchCooldown is the least time between two fetches of a queue: an
	// event waits at most this long for its fetch after its order's
	// notification, against River's default of 100 ms.
	fetchCooldown = 5 * time.Millisecond
	// rescueAfter: a replica that crashed mid-job leaves it running; River
	// hands it to another replica after this. Longer than jobTimeout.
	rescueAfter = 2 * time.Minute
	jobTimeout  = time.Minute
	// softStop is how long Stop lets running jobs finish before it
	// cancels them: a publication cut short is published again, a
	// recovery pass stops between orders.
	softStop = 5 * time.Second
)

// New returns the queue over pool, not yet started; River's tables must
// exist (Migrate).
func New(pool *pgxpool.Pool, cfg Config) (*Queue, error) {
	if cfg.Service == nil || cfg.EnsureTopic == nil || cfg.Log == nil || cfg.Meter == nil {
		return nil, errors.New("jobs: a service, EnsureTopic, a logger and a meter provider are required")
	}
	published, waiting, err := eventMetrics(cfg.Meter)
	if err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &publishWorker{svc: cfg.Service, ensureTopic: cfg.EnsureTopic, log: cfg.Log, published: published})
	river.AddWorker(workers, &recoverWorker{svc: cfg.Service, after: cfg.RecoveryAfter, log: cfg.Log})
	river.AddWorker(workers, &passWorker[Expire]{name: "expiry pass", run: cfg.Service.ExpireDue, log: cfg.Log})
	river.AddWorker(workers, &passWorker[ReadUsage]{name: "usage read", run: cfg.Service.ReadUsage, log: cfg.Log})
	queues := map[string]river.QueueConfig{
		queueEvents:    {MaxWorkers: eventWorkers},
		queueRecovery:  {MaxWorkers: 1},
		queueLifecycle: {MaxWorkers: 2},
	}
	// Without an SM-DP+ no cancellation is worked: they wait, in the
	// database, for a configuration that has one.
	if cfg.Live != nil {
		river.AddWorker(workers, &cancelWorker{svc: cfg.Service, live: cfg.Live, backoff: cfg.CancelBackoff, log: cfg.Log})
		queues[queueCancellations] = river.QueueConfig{MaxWorkers: cancelWorkers}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Workers: workers,
		Queues:  queues,
		PeriodicJobs: []*river.PeriodicJob{
			periodic(cfg.RecoveryInterval, Recover{}),
			periodic(or(cfg.ExpiryInterval, DefaultExpiryInterval), Expire{}),
			periodic(or(cfg.UsageInterval, DefaultUsageInterval), ReadUsage{}),
		},
		FetchCooldown:               min(fetchCooldown, cfg.PollInterval),
		FetchPollInterval:           cfg.PollInterval,
		CompletedJobRetentionPeriod: cfg.Retention,
		JobTimeout:                  jobTimeout,
		RescueStuckJobsAfter:        rescueAfter,
		SoftStopTimeout:             softStop,
		// River says what it does at Info (starting, electing, stopping);
		// ordering's log keeps its warnings and errors.
		Logger: telemetry.AtLeast(cfg.Log, slog.LevelWarn).With("component", "river"),
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	q := &Queue{client: client, pool: pool, log: cfg.Log}
	q.metrics, err = cfg.Meter.Meter(meterName).RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, waitingCountBudget)
		defer cancel()
		n, err := q.EventsWaiting(ctx)
		if err != nil {
			return err
		}
		o.ObserveInt64(waiting, n)
		return nil
	}, waiting)
	if err != nil {
		return nil, fmt.Errorf("waiting events callback: %w", err)
	}
	return q, nil
}

// Defaults of the lifecycle passes' intervals.
const (
	DefaultExpiryInterval = time.Minute
	DefaultUsageInterval  = 5 * time.Minute
)

func or(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// periodic is a pass due every interval and at start.
func periodic(interval time.Duration, args river.JobArgs) *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) { return args, nil },
		&river.PeriodicJobOpts{ID: args.Kind(), RunOnStart: true})
}

// Start starts working jobs; they stop at Stop.
func (q *Queue) Start(ctx context.Context) error {
	// River's work runs on a context of its own: Stop ends it, not the
	// end of the caller's.
	if err := q.client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	return nil
}

// Stop stops fetching jobs, lets those running finish for up to softStop,
// then cancels them (a publication cut short is published again, by this
// replica's next start or another replica), and waits for them as long as
// ctx allows.
func (q *Queue) Stop(ctx context.Context) error {
	err := q.client.Stop(ctx)
	if uerr := q.metrics.Unregister(); uerr != nil {
		q.log.Warn("unregistering the waiting events metric", "err", uerr)
	}
	if err != nil {
		return fmt.Errorf("stop river: %w", err)
	}
	return nil
}

// EventsWaiting counts the order events not yet published.
func (q *Queue) EventsWaiting(ctx context.Context) (int64, error) {
	var n int64
	// In Go rather than sqlc, as Migrate's lock: River's table is not in
	// the schema sqlc compiles against.
	err := q.pool.QueryRow(ctx, `SELECT count(*) FROM river_job
		WHERE kind = $1 AND state IN ('available', 'pending', 'retryable', 'running', 'scheduled')`, KindPublishEvent).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count waiting order events: %w", err)
	}
	return n, nil
}

// waitingCountBudget keeps a slow database from stalling /metrics.
const waitingCountBudget = 2 * time.Second

const meterName = "github.com/esimplatform/esim/services/ordering/jobs"

// eventMetrics are the events published and, counted at each scrape, the
// events waiting; under the names the hand-built outbox relay gave them, which
// dashboards and cmd/bench read.
func eventMetrics(mp metric.MeterProvider) (metric.Int64Counter, metric.Int64ObservableGauge, error) {
	meter := mp.Meter(meterName)
	published, err := meter.Int64Counter("ordering.outbox.events.published",
		metric.WithDescription("Order events published to Kafka."), metric.WithUnit("{event}"))
	if err != nil {
		return nil, nil, fmt.Errorf("published events counter: %w", err)
	}
	waiting, err := meter.Int64ObservableGauge("ordering.outbox.events.waiting",
		metric.WithDescription("Order events not yet published: growing while Kafka is down."), metric.WithUnit("{event}"))
	if err != nil {
		return nil, nil, fmt.Errorf("waiting events gauge: %w", err)
	}
	return published, waiting, nil
}
