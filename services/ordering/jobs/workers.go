package jobs

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/metric"

	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/es2plus"
)

// publishWorker publishes an order's event with its order as GetOrder
// answers it.
type publishWorker struct {
	river.WorkerDefaults[PublishEvent]
	svc         *ordering.Service
	ensureTopic func(context.Context) error
	topicReady  atomic.Bool
	log         *slog.Logger
	published   metric.Int64Counter
	outage      outage
}

// The pause before an event whose publication failed is tried again,
// doubling with each failure of the outage up to its cap: an outage of
// Kafka costs each waiting event a try every few seconds, and its end is
// seen within as much.
const (
	minPause = 100 * time.Millisecond
	maxPause = 5 * time.Second
)

// Work implements river.Worker. A failure snoozes the job rather than
// failing it: snoozing spends no attempt, so an event waits out an outage
// of any length and is never discarded.
func (w *publishWorker) Work(ctx context.Context, job *river.Job[PublishEvent]) error {
	started := time.Now()
	err := w.publish(ctx, job.Args)
	if err != nil {
		if ctx.Err() != nil {
			// Cut short by Stop: due again at once, for whoever runs next.
			return river.JobSnooze(0)
		}
		return river.JobSnooze(w.outage.failed(ctx, w.log, started, err))
	}
	w.outage.succeeded(ctx, w.log, started)
	w.published.Add(ctx, 1)
	return nil
}

func (w *publishWorker) publish(ctx context.Context, a PublishEvent) error {
	if !w.topicReady.Load() {
		if err := w.ensureTopic(ctx); err != nil {
			return err
		}
		w.topicReady.Store(true)
	}
	return w.svc.PublishEvent(ctx, ordering.OutboxEvent{Event: a.Event(), TraceContext: a.TraceContext})
}

// outage is a run of failed publications, logged when it starts and when
// it ends rather than at every try. The workers publish side by side: a
// failure of a try that started before the last success ended belongs to
// an outage already over, and starts none.
type outage struct {
	mu     sync.Mutex
	since  time.Time
	tries  int
	pause  time.Duration
	lastOK time.Time
}

// failed records a failed try that started at started and returns the
// pause before the event is tried again.
func (o *outage) failed(ctx context.Context, log *slog.Logger, started time.Time, err error) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.tries == 0 && started.Before(o.lastOK):
		log.DebugContext(ctx, "an order event failed to publish in a try that began before publishing worked again", "err", err)
		return minPause
	case o.tries == 0:
		o.since, o.pause = time.Now(), minPause
		log.WarnContext(ctx, "order events cannot be published; orders go on and their events wait in the outbox, retried until Kafka takes them",
			"err", err)
	default:
		o.pause = min(2*o.pause, maxPause)
		log.DebugContext(ctx, "order events still cannot be published", "tries", o.tries+1, "err", err)
	}
	o.tries++
	return o.pause
}

// succeeded says when publishing works again after failing.
func (o *outage) succeeded(ctx context.Context, log *slog.Logger, started time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lastOK = time.Now()
	if o.tries == 0 || started.Before(o.since) {
		return
	}
	log.InfoContext(ctx, "order events are published again", "failed_tries", o.tries, "outage", time.Since(o.since).Round(time.Millisecond).String())
	o.tries = 0
}

// recoverWorker runs a recovery pass.
type recoverWorker struct {
	river.WorkerDefaults[Recover]
	svc   *ordering.Service
	after time.Duration
	log   *slog.Logger
}

// Work implements river.Worker. A failed pass is logged and not retried:
// the next is due within the interval.
func (w *recoverWorker) Work(ctx context.Context, _ *river.Job[Recover]) error {
	results, err := w.svc.Recover(ctx, w.after)
	if err != nil {
		if ctx.Err() == nil {
			w.log.WarnContext(ctx, "recovery pass failed", "err", err)
		}
		return nil
	}
	for _, r := range results {
		w.logRecovered(ctx, r)
	}
	return nil
}

func (w *recoverWorker) logRecovered(ctx context.Context, r ordering.Recovered) {
	attrs := []any{"order_id", r.OrderID.String(), "account_id", r.Scope.AccountID.String(), "environment", string(r.Scope.Environment)}
	switch {
	case r.Err != nil && ctx.Err() != nil:
		w.log.DebugContext(ctx, "recovery stopped by the shutdown; the order is left for the next start", attrs...)
	case r.Skipped:
		w.log.DebugContext(ctx, "recovery skipped an order someone else holds", attrs...)
	case r.Deleted:
		w.log.InfoContext(ctx, "recovery deleted an order the balance no longer covers", append(attrs, "reason", r.Err.Error())...)
	case r.Err != nil:
		// Left as it was, for the next pass: every step is idempotent.
		w.log.WarnContext(ctx, "recovery could not finish an order", append(attrs, "status", string(r.Status), "err", r.Err.Error())...)
	default:
		w.log.InfoContext(ctx, "recovery finished an order", append(attrs, "status", string(r.Status))...)
	}
}

// passWorker runs one pass of a periodic job over the eSIMs (expiry,
// usage reads). A failed pass is logged and not retried: the next is due
// within its interval, and each pass is idempotent.
type passWorker[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	name string
	run  func(context.Context) (int, error)
	log  *slog.Logger
}

// Work implements river.Worker.
func (w *passWorker[T]) Work(ctx context.Context, _ *river.Job[T]) error {
	n, err := w.run(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		w.log.WarnContext(ctx, w.name+" failed; the next pass tries again", "moved", n, "err", err)
	case n > 0:
		w.log.DebugContext(ctx, w.name+" done", "moved", n)
	}
	return nil
}

// cancelWorker gives back the profiles of a failed live order that are
// still due for cancellation.
type cancelWorker struct {
	river.WorkerDefaults[CancelProfiles]
	svc  *ordering.Service
	live *es2plus.Provider
	// backoff is the wait before an order whose cancellations did not
	// all go through, or whose lock was taken, is tried again.
	backoff time.Duration
	log     *slog.Logger
}

// Work implements river.Worker. It works under the order's lock, so never
// at once with the order's own cancellations, and for up to the cancel
// budget: an SM-DP+ that hangs holds a worker no longer, and the orders of
// other partners waiting in the queue get their turn. What is left is
// snoozed, which spends no attempt: a cancellation is tried until the
// SM-DP+ answers it.
func (w *cancelWorker) Work(ctx context.Context, job *river.Job[CancelProfiles]) error {
	left := 0
	locked, err := w.svc.WithOrderLocked(ctx, job.Args.OrderID, func(ctx context.Context, tx ordering.Locked) error {
		var err error
		left, err = w.live.CancelDue(ctx, tx, job.Args.OrderID)
		return err
	})
	switch {
	case errors.Is(err, ordering.ErrNotFound):
		return nil // an order with reservations is never deleted
	case err != nil:
		return err
	case !locked || left > 0:
		return river.JobSnooze(w.backoff)
	}
	return nil
}
