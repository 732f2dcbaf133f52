package postgres_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/jobs"
)

// tracedContext carries a sampled remote span, as a request's context
// does when tracing is on.
func tracedContext(t *testing.T) (context.Context, trace.SpanContext) {
	t.Helper()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
	return trace.ContextWithRemoteSpanContext(context.Background(), sc), sc
}

// stored is the publication of an order's event, as a River job.
type stored struct {
	EventID, Type string
	CreatedAt     time.Time
	TraceContext  map[string]string
	Sent          bool
}

// outboxRows returns the publications of the order's events.
func outboxRows(t *testing.T, pool *pgxpool.Pool, orderID uuid.UUID) []stored {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT args->>'event_id', args->>'type', (args->>'created_at')::timestamptz, args->'trace_context', state = 'completed'
		FROM river_job WHERE kind = $1 AND args->>'order_id' = $2 ORDER BY id`, jobs.KindPublishEvent, orderID.String())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []stored
	for rows.Next() {
		var r stored
		var tc []byte
		if err := rows.Scan(&r.EventID, &r.Type, &r.CreatedAt, &tc, &r.Sent); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(tc, &r.TraceContext); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// watchStatusAndEvent reads, until stop is closed, the order's status and
// whether its event exists, in one statement each time (one snapshot), and
// returns every combination seen.
func watchStatusAndEvent(t *testing.T, pool *pgxpool.Pool, orderID uuid.UUID, stop <-chan struct{}) func() map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var status string
			var event bool
			err := pool.QueryRow(context.Background(),
				"SELECT status, EXISTS (SELECT 1 FROM river_job WHERE kind = $2 AND args->>'order_id' = o.id::text) FROM orders o WHERE id = $1",
				orderID, jobs.KindPublishEvent).Scan(&status, &event)
			if err != nil {
				t.Error(err)
				return
			}
			seen[status+map[bool]string{true: "+event", false: ""}[event]] = true
		}
	}()
	return func() map[string]bool { <-done; return seen }
}

// An order's final status and its event commit together: never one
// without the other, and a failure in the transaction leaves neither.
func TestFinalStatusAndEventCommitTogether(t *testing.T) {
	ctx, span := tracedContext(t)
	s, pool := newStore(t)

	t.Run("completed", func(t *testing.T) {
		o := insert(t, s, newOrder(acme, "c", at(0)))
		e := event(ordering.EventOrderCompleted, o.ID)
		issued := esims(t, s, o)
		stop := make(chan struct{})
		seen := watchStatusAndEvent(t, pool, o.ID, stop)
		err := s.WithLock(ctx, "test/"+uuid.NewString(), func(ctx context.Context, l ordering.Locked) error {
			return l.Complete(ctx, o.ID, issued, e)
		})
		close(stop)
		if err != nil {
			t.Fatal(err)
		}
		if got := seen(); got["completed"] || got["pending+event"] {
			t.Errorf("a reader saw %v: the status and the event apart", got)
		}
		rows := outboxRows(t, pool, o.ID)
		if len(rows) != 1 || rows[0].EventID != e.ID || rows[0].Type != "order.completed" || !rows[0].CreatedAt.Equal(e.CreatedAt) || rows[0].Sent {
			t.Fatalf("outbox rows %+v; want one unsent order.completed %s", rows, e.ID)
		}
		if tp := rows[0].TraceContext["traceparent"]; !strings.Contains(tp, span.TraceID().String()) {
			t.Errorf("stored traceparent %q; want trace %s", tp, span.TraceID())
		}

		// A second order completed under the same event id fails in its
		// transaction: no eSIMs, no status, no event.
		o2 := insert(t, s, newOrder(acme, "c2", at(0)))
		dup := event(ordering.EventOrderCompleted, o2.ID)
		dup.ID = e.ID
		locked(t, s, func(ctx context.Context, l ordering.Locked) error {
			if err := l.Complete(ctx, o2.ID, esims(t, s, o2), dup); err == nil {
				t.Error("Complete with a taken event id succeeded")
			}
			return nil
		})
		got, err := s.Order(context.Background(), &acme, o2.ID)
		if err != nil || got.Status != ordering.StatusPending || len(got.Esims) != 0 {
			t.Errorf("after the failed Complete the order is %s with %d eSIMs (%v); want pending, none", got.Status, len(got.Esims), err)
		}
		if rows := outboxRows(t, pool, o2.ID); len(rows) != 0 {
			t.Errorf("after the failed Complete: outbox rows %+v", rows)
		}
	})

	t.Run("failed", func(t *testing.T) {
		o := insert(t, s, newOrder(acme, "f", at(0)))
		locked(t, s, func(ctx context.Context, l ordering.Locked) error {
			return l.MarkFailing(ctx, o.ID, ordering.OrderError{Code: "provider_error", Message: "down"})
		})
		// A taken event id: the status stays.
		taken := event(ordering.EventOrderFailed, o.ID)
		taken.ID = outboxRows(t, pool, complete(t, s, insert(t, s, newOrder(acme, "f2", at(0)))).ID)[0].EventID
		locked(t, s, func(ctx context.Context, l ordering.Locked) error {
			if err := l.MarkFailed(ctx, o.ID, taken); err == nil {
				t.Error("MarkFailed with a taken event id succeeded")
			}
			return nil
		})
		if got, _ := s.Order(context.Background(), &acme, o.ID); got.Status != ordering.StatusFailing || len(outboxRows(t, pool, o.ID)) != 0 {
			t.Fatalf("after the failed MarkFailed the order is %s; want failing, without an event", got.Status)
		}

		e := event(ordering.EventOrderFailed, o.ID)
		stop := make(chan struct{})
		seen := watchStatusAndEvent(t, pool, o.ID, stop)
		err := s.WithLock(ctx, "test/"+uuid.NewString(), func(ctx context.Context, l ordering.Locked) error {
			return l.MarkFailed(ctx, o.ID, e)
		})
		close(stop)
		if err != nil {
			t.Fatal(err)
		}
		if got := seen(); got["failed"] || got["failing+event"] {
			t.Errorf("a reader saw %v: the status and the event apart", got)
		}
		rows := outboxRows(t, pool, o.ID)
		if len(rows) != 1 || rows[0].EventID != e.ID || rows[0].Type != "order.failed" || !strings.Contains(rows[0].TraceContext["traceparent"], span.TraceID().String()) {
			t.Fatalf("outbox rows %+v; want one order.failed %s in trace %s", rows, e.ID, span.TraceID())
		}
	})
}

// The publications wait in River's events queue, due at once and in the
// order written, which River fetches them in (priority, then scheduled
// time, then id): oldest first, each job locked by the one worker that
// fetched it.
func TestEventsWaitOldestFirst(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t)
	var written []uuid.UUID
	for i := range 3 {
		written = append(written, complete(t, s, insert(t, s, newOrder(acme, "k"+string(rune('a'+i)), at(0)))).ID)
	}
	rows, err := pool.Query(ctx, `SELECT args->>'order_id', queue, state, scheduled_at <= now() FROM river_job
		WHERE kind = $1 ORDER BY priority, scheduled_at, id`, jobs.KindPublishEvent)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []uuid.UUID
	for rows.Next() {
		var id, queue, state string
		var due bool
		if err := rows.Scan(&id, &queue, &state, &due); err != nil {
			t.Fatal(err)
		}
		if queue != "events" || state != "available" || !due {
			t.Errorf("the publication of order %s is in queue %s, %s, due %t; want events, available, due", id, queue, state, due)
		}
		got = append(got, uuid.MustParse(id))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, written) {
		t.Errorf("publications in fetch order: %v; want the order written, %v", got, written)
	}
}
