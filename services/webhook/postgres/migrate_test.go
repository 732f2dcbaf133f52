package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/services/webhook"
	"github.com/esimplatform/esim/services/webhook/postgres"
)

// Two replicas starting at once on a new database both come up: River's
// migrations and goose's each run once.
func TestTwoReplicasStartAtOnce(t *testing.T) {
	pgtest.CheckReplicasStartTogether(t, 2, func(ctx context.Context, url string) (*pgxpool.Pool, error) {
		return postgres.Open(ctx, url)
	})
}

// A database of the hand-built queue keeps its pending deliveries: the
// migration to River moves each into a River job, due when it was (a
// leased one once its lease runs out), with its attempts counted, and the
// attempt a lease held is recorded as interrupted by the job's next run.
func TestPendingDeliveriesMoveIntoRiver(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	old, err := libpostgres.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(old)
	provider, err := goose.NewProvider(goose.DialectPostgres, db, postgres.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.UpTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s := scope()
	if _, err := old.Exec(ctx, `INSERT INTO endpoints (account_id, environment, url, secret, secret_created_at, updated_at) VALUES ($1, 'sandbox', 'https://example.com/', 'sealed', now(), now())`, s.AccountID); err != nil {
		t.Fatal(err)
	}
	fresh, retry, leased := eventID(), eventID(), eventID()
	lease := time.Now().Add(time.Minute).UTC().Truncate(time.Microsecond)
	for _, d := range []struct {
		id          string
		attempts    int
		lockedUntil *time.Time
	}{{fresh, 0, nil}, {retry, 1, nil}, {leased, 2, &lease}} {
		if _, err := old.Exec(ctx, `INSERT INTO events (id, type, account_id, environment, order_id, created_at, payload, status, url) VALUES ($1, 'order.completed', $2, 'sandbox', $3, now(), '{}', 'pending', 'https://example.com/')`, d.id, s.AccountID, uuid.New()); err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= d.attempts; n++ {
			finished := d.lockedUntil == nil || n < d.attempts
			if _, err := old.Exec(ctx, `INSERT INTO attempts (event_id, number, started_at, finished, error) VALUES ($1, $2, now(), $3, CASE WHEN $3 THEN 'status 500' ELSE '' END)`, d.id, n, finished); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := old.Exec(ctx, `INSERT INTO deliveries (event_id, account_id, environment, attempts, next_attempt_at, locked_until) VALUES ($1, $2, 'sandbox', $3, now(), $4)`, d.id, s.AccountID, d.attempts, d.lockedUntil); err != nil {
			t.Fatal(err)
		}
	}
	_ = db.Close()
	old.Close()

	pool, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, want := range []struct {
		id                string
		priority, attempt int
		notBefore         time.Time
	}{{fresh, 1, 0, time.Time{}}, {retry, 2, 1, time.Time{}}, {leased, 2, 2, lease}} {
		var queue, state string
		var priority, attempt, maxAttempts int
		var scheduledAt time.Time
		err := pool.QueryRow(ctx, `SELECT queue, state::text, priority, attempt, max_attempts, scheduled_at FROM river_job WHERE kind = 'webhook_delivery' AND args->>'event_id' = $1`, want.id).
			Scan(&queue, &state, &priority, &attempt, &maxAttempts, &scheduledAt)
		if err != nil {
			t.Fatalf("the job of %s: %v", want.id, err)
		}
		if queue != "webhook_sandbox" || state != "available" || priority != want.priority || attempt != want.attempt || maxAttempts != webhook.MaxAttempts+1 || scheduledAt.Before(want.notBefore) {
			t.Errorf("the job of %s: %s %s priority %d attempt %d of %d at %s; want webhook_sandbox available priority %d attempt %d of %d, not before %s",
				want.id, queue, state, priority, attempt, maxAttempts, scheduledAt, want.priority, want.attempt, webhook.MaxAttempts+1, want.notBefore)
		}
	}
	st, err := postgres.NewStore(pool, rules.MaxPerScope)
	if err != nil {
		t.Fatal(err)
	}
	if j := start(t, st, leased); j.Attempt != 3 {
		t.Errorf("the leased delivery's next run makes attempt %d, want 3", j.Attempt)
	}
	got, err := st.Event(ctx, &s, leased)
	if err != nil || len(got.Attempts) != 3 || got.Attempts[1].Error != webhook.Interrupted {
		t.Errorf("the leased delivery's attempts: %+v, %v; want its second interrupted", got.Attempts, err)
	}
}
