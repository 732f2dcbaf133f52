// Package jobs is ordering's durable background work over River
// (github.com/riverqueue/river, pgx/v5): the jobs written in the
// transaction of the change that makes them due (an order's event to
// publish), the periodic ones (the recovery scan), their workers, River's
// schema and the client the server starts and stops. River's leases,
// retries, notifications and clean-up replace the loops and claims ordering
// used to write by hand.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/esimplatform/esim/services/ordering"
)

// The queues, each with workers of its own, so that a backlog of one kind
// never holds up another.
const (
	queueEvents        = "events"
	queueRecovery      = "recovery"
	queueCancellations = "cancellations"
	// queueLifecycle: the expiry pass and the usage reader, one of each
	// at a time.
	queueLifecycle = "lifecycle"
)

// PublishEvent is an order's event to publish to Kafka, inserted in the
// transaction that moves the order to its final status.
type PublishEvent struct {
	EventID   string             `json:"event_id" river:"unique"`
	Type      ordering.EventType `json:"type"`
	OrderID   uuid.UUID          `json:"order_id"`
	CreatedAt time.Time          `json:"created_at"`
	// TraceContext is the W3C trace context of the order's processing
	// when the event was written ({} when untraced): the publication
	// joins the order's trace.
	TraceContext map[string]string `json:"trace_context"`
	// Esim is, on esim.* events, the eSIM as the event left it.
	Esim *ordering.Esim `json:"esim,omitempty"`
	// ThresholdPercent is esim.usage's.
	ThresholdPercent int32 `json:"threshold_percent,omitempty"`
}

// publishEvent is e's job.
func publishEvent(e ordering.Event, traceContext map[string]string) PublishEvent {
	if traceContext == nil {
		traceContext = map[string]string{}
	}
	return PublishEvent{
		EventID: e.ID, Type: e.Type, OrderID: e.OrderID, CreatedAt: e.CreatedAt, TraceContext: traceContext,
		Esim: e.Esim, ThresholdPercent: e.Threshold,
	}
}

// Event is the event a job publishes.
func (a PublishEvent) Event() ordering.Event {
	return ordering.Event{ID: a.EventID, Type: a.Type, OrderID: a.OrderID, CreatedAt: a.CreatedAt.UTC(), Esim: a.Esim, Threshold: a.ThresholdPercent}
}

// KindPublishEvent is PublishEvent's kind, as river_job.kind stores it
// (migration 00006 writes it too).
const KindPublishEvent = "ordering.publish_event"

// Kind implements river.JobArgs.
func (PublishEvent) Kind() string { return KindPublishEvent }

// InsertOpts implements river.JobArgsWithInsertOpts. An event is retried
// for as long as Kafka is away (the worker snoozes, which spends no
// attempt); the attempts count only the database failing under it. An
// event id is published once: consumers dedupe on it, and a second event
// under it would be lost to them (unique by EventID for as long as the
// job is kept, OUTBOX_RETENTION).
func (PublishEvent) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queueEvents, MaxAttempts: maxPublishAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// maxPublishAttempts: an event whose order cannot be read is retried with
// River's backoff (attempt⁴ seconds) for about three weeks.
const maxPublishAttempts = 25

// Recover is one pass of the recovery scan (ordering.Service.Recover).
type Recover struct{}

// Kind implements river.JobArgs.
func (Recover) Kind() string { return "ordering.recover" }

// InsertOpts implements river.JobArgsWithInsertOpts: one pass waits or
// runs at a time, and a failed pass is not retried, the next one is due
// within RECOVERY_INTERVAL anyway.
func (Recover) InsertOpts() river.InsertOpts { return passOpts(queueRecovery) }

// Expire is one expiry pass (ordering.Service.ExpireDue): eSIMs expiring
// within a day are told so, those past their expiry expire.
type Expire struct{}

// Kind implements river.JobArgs.
func (Expire) Kind() string { return "ordering.expire" }

// InsertOpts implements river.JobArgsWithInsertOpts: as Recover's, one
// pass at a time, the next due within EXPIRY_INTERVAL anyway.
func (Expire) InsertOpts() river.InsertOpts { return passOpts(queueLifecycle) }

// ReadUsage is one pass of the usage reader (ordering.Service.ReadUsage):
// the networks' readings of every eSIM in use, applied.
type ReadUsage struct{}

// Kind implements river.JobArgs.
func (ReadUsage) Kind() string { return "ordering.read_usage" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ReadUsage) InsertOpts() river.InsertOpts { return passOpts(queueLifecycle) }

// passOpts are the options of a periodic pass: never two of a kind
// waiting or running, and a failed one not retried.
func passOpts(queue string) river.InsertOpts {
	return river.InsertOpts{Queue: queue, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

// ErrEventIDTaken: another event was written under the id.
var ErrEventIDTaken = errors.New("the event id is taken")

// CancelProfiles is the canceller's work on one order: give back the
// profiles of it still due for cancellation (es2plus.Provider.CancelDue),
// inserted in the transaction that makes them due.
type CancelProfiles struct {
	OrderID uuid.UUID `json:"order_id"`
}

// Kind implements river.JobArgs (migration 00006 writes it too).
func (CancelProfiles) Kind() string { return "ordering.cancel_profiles" }

// InsertOpts implements river.JobArgsWithInsertOpts. A cancellation the
// SM-DP+ did not answer is tried again for as long as it takes (the
// worker snoozes); the attempts count only the database failing under it.
func (CancelProfiles) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queueCancellations, MaxAttempts: 25}
}

// Inserter writes jobs in the caller's transaction: the job exists if and
// only if the change that made it due committed.
type Inserter struct{ client *river.Client[pgx.Tx] }

// NewInserter returns an Inserter over pool; it works no job.
func NewInserter(pool *pgxpool.Pool) (*Inserter, error) {
	// An insert notifies the queue's workers at most once per
	// FetchCooldown: the insert of a second event within River's default
	// 100 ms stayed unnoticed until the next poll (RELAY_INTERVAL) when
	// the workers had fetched in between. River's least cooldown narrows
	// that window to a millisecond.
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{FetchCooldown: river.FetchCooldownMin})
	if err != nil {
		return nil, fmt.Errorf("river insert-only client: %w", err)
	}
	return &Inserter{client: client}, nil
}

// PublishEventTx inserts e's publication in tx.
func (i *Inserter) PublishEventTx(ctx context.Context, tx pgx.Tx, e ordering.Event, traceContext map[string]string) error {
	res, err := i.client.InsertTx(ctx, tx, publishEvent(e, traceContext), nil)
	if err != nil {
		return fmt.Errorf("insert the publication of event %s: %w", e.ID, err)
	}
	if res.UniqueSkippedAsDuplicate {
		return fmt.Errorf("insert the publication of event %s: %w", e.ID, ErrEventIDTaken)
	}
	return nil
}

// PublishEventsTx inserts the publications of events in tx, in one
// statement.
func (i *Inserter) PublishEventsTx(ctx context.Context, tx pgx.Tx, events []ordering.Event, traceContext map[string]string) error {
	if len(events) == 0 {
		return nil
	}
	params := make([]river.InsertManyParams, len(events))
	for k, e := range events {
		params[k] = river.InsertManyParams{Args: publishEvent(e, traceContext)}
	}
	res, err := i.client.InsertManyTx(ctx, tx, params)
	if err != nil {
		return fmt.Errorf("insert the publications of %d events: %w", len(events), err)
	}
	for k, r := range res {
		if r.UniqueSkippedAsDuplicate {
			return fmt.Errorf("insert the publication of event %s: %w", events[k].ID, ErrEventIDTaken)
		}
	}
	return nil
}

// CancelProfilesTx inserts the canceller's job for the order in tx.
func (i *Inserter) CancelProfilesTx(ctx context.Context, tx pgx.Tx, orderID uuid.UUID) error {
	if _, err := i.client.InsertTx(ctx, tx, CancelProfiles{OrderID: orderID}, nil); err != nil {
		return fmt.Errorf("insert the cancellation of order %s's profiles: %w", orderID, err)
	}
	return nil
}
