package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/esimplatform/esim/services/ordering"
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

// stored is an order's outbox row.
type stored struct {
	EventID, Type string
	CreatedAt     time.Time
	TraceContext  map[string]string
	Sent          bool
}

// outboxRows returns the order's outbox rows.
func outboxRows(t *testing.T, pool *pgxpool.Pool, orderID uuid.UUID) []stored {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		"SELECT event_id, type, created_at, trace_context, sent_at IS NOT NULL FROM outbox WHERE order_id = $1 ORDER BY seq", orderID)
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
				"SELECT status, EXISTS (SELECT 1 FROM outbox WHERE order_id = o.id) FROM orders o WHERE id = $1", orderID).Scan(&status, &event)
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

// RelayEvents publishes oldest first, marks what was published, leaves
// what failed, and never hands an event one relay holds to another.
func TestRelayEventsClaimsEachEventOnce(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t)
	var written []uuid.UUID
	for i := range 3 {
		written = append(written, complete(t, s, insert(t, s, newOrder(acme, "k"+string(rune('a'+i)), at(0)))).ID)
	}
	orderIDs := func(events []ordering.OutboxEvent) []uuid.UUID {
		var ids []uuid.UUID
		for _, e := range events {
			ids = append(ids, e.OrderID)
		}
		return ids
	}

	if n, err := s.RelayEvents(ctx, 10, func(context.Context, []ordering.OutboxEvent) error { return errors.New("broker down") }); err == nil || n != 0 {
		t.Fatalf("RelayEvents with publish failing = %d, %v", n, err)
	}
	if n, err := s.UnpublishedEvents(ctx); err != nil || n != 3 {
		t.Fatalf("UnpublishedEvents after a failure = %d, %v; want 3", n, err)
	}

	// A holds the two oldest while B relays: B gets the third alone.
	holding, release := make(chan []ordering.OutboxEvent), make(chan struct{})
	var wg sync.WaitGroup
	var aN int
	var aErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		aN, aErr = s.RelayEvents(ctx, 2, func(_ context.Context, events []ordering.OutboxEvent) error {
			holding <- events
			<-release
			return nil
		})
	}()
	a := <-holding
	var b []ordering.OutboxEvent
	bN, err := s.RelayEvents(ctx, 10, func(_ context.Context, events []ordering.OutboxEvent) error {
		b = events
		return nil
	})
	close(release)
	wg.Wait()
	if aErr != nil || aN != 2 || err != nil || bN != 1 {
		t.Fatalf("relays published %d (%v) and %d (%v); want 2 and 1", aN, aErr, bN, err)
	}
	if got := orderIDs(a); !slices.Equal(got, written[:2]) {
		t.Errorf("the first relay got the events of %v; want the oldest two, %v", got, written[:2])
	}
	if got := orderIDs(b); !slices.Equal(got, written[2:]) {
		t.Errorf("the second relay got the events of %v; want the one left, %v", got, written[2:])
	}
	rows := outboxRows(t, pool, written[0])
	if len(rows) != 1 || !rows[0].Sent || a[0].ID != rows[0].EventID || a[0].Type != ordering.EventOrderCompleted || !a[0].CreatedAt.Equal(rows[0].CreatedAt) {
		t.Errorf("the first event as relayed %+v, as stored %+v", a[0], rows)
	}
	if n, err := s.UnpublishedEvents(ctx); err != nil || n != 0 {
		t.Errorf("UnpublishedEvents = %d, %v; want 0", n, err)
	}
	if n, err := s.RelayEvents(ctx, 10, func(context.Context, []ordering.OutboxEvent) error {
		t.Error("publish called with nothing to publish")
		return nil
	}); err != nil || n != 0 {
		t.Errorf("RelayEvents with nothing waiting = %d, %v", n, err)
	}
}

// Only events published before the retention's limit go; those waiting
// stay however old.
func TestDeletePublishedBefore(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t)
	old := complete(t, s, insert(t, s, newOrder(acme, "old", at(0))))
	recent := complete(t, s, insert(t, s, newOrder(acme, "recent", at(0))))
	if _, err := s.RelayEvents(ctx, 10, func(context.Context, []ordering.OutboxEvent) error { return nil }); err != nil {
		t.Fatal(err)
	}
	waiting := complete(t, s, insert(t, s, newOrder(acme, "waiting", at(0))))
	if _, err := pool.Exec(ctx, "UPDATE outbox SET sent_at = now() - interval '8 days' WHERE order_id = $1", old.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE outbox SET created_at = now() - interval '30 days'"); err != nil {
		t.Fatal(err)
	}
	n, err := s.DeletePublishedBefore(ctx, time.Now().Add(-7*24*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("DeletePublishedBefore = %d, %v; want 1", n, err)
	}
	for id, want := range map[uuid.UUID]int{old.ID: 0, recent.ID: 1, waiting.ID: 1} {
		if got := len(outboxRows(t, pool, id)); got != want {
			t.Errorf("order %s has %d outbox rows, want %d", id, got, want)
		}
	}
}
