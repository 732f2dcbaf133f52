package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/scopegate"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/webhook"
)

// The delivery jobs, as River keeps them: one job per pending event, of
// kind jobKind, in the queue of the event's environment (queueOf), so
// that sandbox and live each have their own workers.
const (
	jobKind = "webhook_delivery"
	// Priorities, River's 1 (first) to 4: an event of a scope without a
	// backlog first, then retries, then the events of a scope with more
	// pending than it may send at once. A flood of one partner's events
	// thus never sits ahead of another partner's, whatever their order.
	priorityFirst      = 1
	priorityRetry      = 2
	priorityBacklogged = 3
	// riverMaxAttempts is one more run than attempts: the run after a
	// crash cut the last attempt short records it as interrupted and
	// fails the event (webhook.Store.StartAttempt).
	riverMaxAttempts = webhook.MaxAttempts + 1
	// fetchCooldown is the least time between two fetches of a queue, and
	// between two insert notifications: a job inserted is fetched within
	// a few milliseconds over LISTEN/NOTIFY.
	fetchCooldown = 2 * time.Millisecond
	// A job whose scope has its maximum in flight waits before it looks
	// again, keeping its priority: busyPause at first, so that a burst
	// of one scope's events goes out as soon as slots free, doubling with
	// each wait up to maxBusyPause, so that a long backlog behind a
	// hanging endpoint costs each of its jobs one look a second.
	busyPause    = 10 * time.Millisecond
	maxBusyPause = time.Second
	// recordMargin is how much longer than an attempt a run may last:
	// time to start the attempt and record its result. A run longer than
	// that and a second is one whose replica died, and River rescues it.
	recordMargin = 5 * time.Second
	// errorPause is how long a job waits after failing to start its
	// attempt (the database is down) before it tries again.
	errorPause = time.Second
)

func queueOf(env webhook.Environment) string { return "webhook_" + string(env) }

// deliveryArgs are a delivery job's arguments: the event, whose row holds
// everything else.
type deliveryArgs struct {
	EventID string `json:"event_id"`
	// AccountID and Environment are the event's scope, for the replica's
	// gate (scopegate); jobs inserted before they were carried have none.
	AccountID   string `json:"account_id,omitempty"`
	Environment string `json:"environment,omitempty"`
}

func (deliveryArgs) Kind() string { return jobKind }

func insertOpts(env webhook.Environment, backlogged bool) *river.InsertOpts {
	priority := priorityFirst
	if backlogged {
		priority = priorityBacklogged
	}
	return &river.InsertOpts{Queue: queueOf(env), Priority: priority, MaxAttempts: riverMaxAttempts}
}

// Deliverer makes a delivery job's attempt: the webhook Service.
type Deliverer interface {
	Deliver(ctx context.Context, eventID string) (webhook.Outcome, error)
}

// QueueConfig configures a Queue.
type QueueConfig struct {
	// Workers is how many attempts a replica makes at once per
	// environment.
	Workers int
	// AttemptTimeout bounds one attempt.
	AttemptTimeout time.Duration
	// PollInterval is how often an idle queue looks for jobs no
	// notification announced: retries falling due, jobs snoozed.
	PollInterval time.Duration
	Log          *slog.Logger
	// Meter, when set, gets webhook.deliveries.due: the deliveries due
	// and waiting for a worker, counted at each collection.
	Meter metric.MeterProvider
	// PerScope, when above 0, is the per-endpoint cap the store enforces
	// (webhook.AttemptRules.MaxPerScope): a run of a scope that has that
	// many attempts in flight in this replica waits here for one of them
	// (scopegate) instead of asking the database.
	PerScope int
}

// Queue works the delivery jobs of every replica with River: Start it,
// then Stop it.
type Queue struct {
	client  *river.Client[pgx.Tx]
	pool    *pgxpool.Pool
	log     *slog.Logger
	metrics metric.Registration
}

// NewQueue returns a Queue over pool, not yet started, that hands each
// run of a delivery job to d.
func NewQueue(pool *pgxpool.Pool, d Deliverer, cfg QueueConfig) (*Queue, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	q := &Queue{pool: pool, log: cfg.Log}
	workers := river.NewWorkers()
	w := &deliveryWorker{d: d, q: q, timeout: cfg.AttemptTimeout + recordMargin}
	if cfg.PerScope > 0 {
		// A run of a full scope would otherwise start a transaction, lock
		// the endpoint and count its attempts only to snooze until the
		// queue's next poll (issue 33's profile). Waiters: up to half the
		// workers, so a scope's slots rarely stand empty while its runs
		// snooze (a backlog drained at 88 events/s with an eighth, 271
		// with half), and a flood still leaves half to other scopes.
		w.gate = scopegate.New(cfg.PerScope, max(cfg.PerScope, cfg.Workers/2), max(cfg.PerScope, cfg.Workers/2))
	}
	if err := river.AddWorkerSafely(workers, w); err != nil {
		return nil, err
	}
	queues := map[string]river.QueueConfig{}
	for _, env := range webhook.Environments {
		queues[queueOf(env)] = river.QueueConfig{MaxWorkers: cfg.Workers}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            queues,
		Workers:           workers,
		FetchCooldown:     fetchCooldown,
		FetchPollInterval: cfg.PollInterval,
		RetryPolicy:       retryPolicy{},
		MaxAttempts:       riverMaxAttempts,
		// A run is an attempt and its records; one running longer was
		// cut off with its replica.
		JobTimeout:           cfg.AttemptTimeout + recordMargin,
		RescueStuckJobsAfter: cfg.AttemptTimeout + recordMargin + time.Second,
		// A failed attempt is recorded, not logged: River's own news
		// (errored jobs, start and stop) stays below warnings.
		Logger: telemetry.AtLeast(cfg.Log, slog.LevelWarn).With("component", "river"),
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	q.client = client
	if cfg.Meter != nil {
		if q.metrics, err = q.dueMetric(cfg.Meter); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// dueMetric registers webhook.deliveries.due, by environment: deliveries
// due now that no worker has taken yet. Retries waiting out their delay
// are not due; a count that stays up means the workers (or the endpoints
// they wait on) cannot keep up.
func (q *Queue) dueMetric(mp metric.MeterProvider) (metric.Registration, error) {
	meter := mp.Meter("github.com/esimplatform/esim/services/webhook/postgres")
	due, err := meter.Int64ObservableGauge("webhook.deliveries.due",
		metric.WithUnit("{delivery}"),
		metric.WithDescription("Deliveries due and waiting for a worker, by environment: growing while the workers cannot keep up."))
	if err != nil {
		return nil, fmt.Errorf("due deliveries gauge: %w", err)
	}
	envs := map[string]metric.ObserveOption{}
	for _, env := range webhook.Environments {
		envs[queueOf(env)] = metric.WithAttributeSet(attribute.NewSet(attribute.String("environment", string(env))))
	}
	return meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, dueCountBudget)
		defer cancel()
		counts, err := q.dueByQueue(ctx)
		if err != nil {
			return err
		}
		// Every environment, 0 included: a series that vanishes when
		// empty reads as no data, not as no backlog.
		for queue, opt := range envs {
			o.ObserveInt64(due, counts[queue], opt)
		}
		return nil
	}, due)
}

// dueCountBudget keeps a slow database from stalling /metrics.
const dueCountBudget = 2 * time.Second

// dueByQueue counts the available delivery jobs of each queue.
func (q *Queue) dueByQueue(ctx context.Context) (map[string]int64, error) {
	rows, err := q.pool.Query(ctx, `SELECT queue, count(*) FROM river_job
		WHERE kind = $1 AND state = 'available' GROUP BY queue`, jobKind)
	if err != nil {
		return nil, fmt.Errorf("count due deliveries: %w", err)
	}
	counts := map[string]int64{}
	for rows.Next() {
		var queue string
		var n int64
		if err := rows.Scan(&queue, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("count due deliveries: %w", err)
		}
		counts[queue] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count due deliveries: %w", err)
	}
	return counts, nil
}

// Start starts working jobs until Stop: ctx ending does not stop them,
// so that a stop always lets the attempts in flight finish first.
func (q *Queue) Start(ctx context.Context) error {
	return q.client.Start(context.WithoutCancel(ctx))
}

// Stop stops fetching jobs and lets the attempts in flight finish until
// ctx ends, then cuts them short: they are recorded as interrupted and
// retried by whichever replica runs their job next. It returns once every
// run has returned and River has recorded its result.
func (q *Queue) Stop(ctx context.Context) error {
	if q.metrics != nil {
		if err := q.metrics.Unregister(); err != nil {
			q.log.Warn("unregistering the due deliveries metric", "err", err)
		}
	}
	err := q.client.Stop(ctx)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	// StopAndCancel waits for the cancelled runs to record themselves;
	// they do within recordBudget.
	final, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordMargin+time.Second)
	defer cancel()
	return q.client.StopAndCancel(final)
}

// deliveryWorker runs a delivery job: one attempt per run.
type deliveryWorker struct {
	river.WorkerDefaults[deliveryArgs]
	d       Deliverer
	q       *Queue
	timeout time.Duration
	gate    *scopegate.Gate // nil: every run asks the database
}

func (w *deliveryWorker) Timeout(*river.Job[deliveryArgs]) time.Duration { return w.timeout }

// errRetry makes River retry the job, after retryPolicy's delay.
var errRetry = errors.New("the attempt failed; retrying")

func (w *deliveryWorker) Work(ctx context.Context, job *river.Job[deliveryArgs]) error {
	if w.gate != nil && job.Args.AccountID != "" {
		scope := job.Args.Environment + " " + job.Args.AccountID
		if !w.gate.Enter(ctx, scope, maxBusyPause) {
			// Turned away: the waiters take the scope's next slots, which
			// a receiver answering at once frees within milliseconds. A
			// fixed second left the slots idle most of it (issue 33's
			// drain: 88 events/s, no run in flight between fetches).
			return river.JobSnooze(busyWait(job.Metadata))
		}
		defer w.gate.Leave(scope)
	}
	out, err := w.d.Deliver(ctx, job.Args.EventID)
	switch {
	case err != nil && out.Attempt == 0:
		// No attempt started (the database is down): a snooze, which
		// spends none of the job's runs, however long the outage.
		if ctx.Err() == nil {
			w.q.log.WarnContext(ctx, "a delivery could not start its attempt; trying again", "event_id", job.Args.EventID, "in", errorPause.String(), "err", err)
		}
		return river.JobSnooze(errorPause)
	case err != nil:
		// The attempt was made but not recorded: its next run records
		// it as interrupted.
		return err
	case out.Busy:
		// Not an attempt: River counts a snooze as none.
		return river.JobSnooze(busyWait(job.Metadata))
	case out.Retry():
		// Retries go behind first attempts, even on a stop.
		update, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if _, err := w.q.pool.Exec(update, `UPDATE river_job SET priority = greatest(priority, $2) WHERE id = $1`, job.ID, priorityRetry); err != nil {
			w.q.log.WarnContext(ctx, "cannot lower a retry's priority", "event_id", job.Args.EventID, "err", err)
		}
		return errRetry
	}
	return nil
}

// busyWait is how long a job whose scope is full waits, after the
// snoozes River counted in its metadata.
func busyWait(metadata []byte) time.Duration {
	var m struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(metadata, &m) // none counted: the first wait
	return min(busyPause<<min(m.Snoozes, 16), maxBusyPause)
}

// retryPolicy waits webhook.RetryDelay after a failed attempt: 1 s, then
// 2 s. A run after a crash is retried as its attempt would have been.
type retryPolicy struct{}

func (retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	n := min(max(job.Attempt, 1), webhook.MaxAttempts-1)
	return time.Now().Add(webhook.RetryDelay(n))
}

// Open connects to the webhook database and migrates it: River's tables
// first, which the goose migrations move the old delivery queue into,
// then the goose migrations.
func Open(ctx context.Context, databaseURL string, opts ...libpostgres.Option) (*pgxpool.Pool, error) {
	return libpostgres.OpenWithRiver(ctx, databaseURL, Migrations, opts...)
}
