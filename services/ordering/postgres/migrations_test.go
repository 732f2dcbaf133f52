package postgres_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/jobs"
	"github.com/esimplatform/esim/services/ordering/postgres"
)

// Replicas starting at once on a new database both come up: River's
// migrations, which take no lock of their own, wait for each other, as
// goose's do.
func TestReplicasStartingAtOnceBothMigrate(t *testing.T) {
	pgtest.CheckReplicasStartTogether(t, 3, func(ctx context.Context, dbURL string) (*pgxpool.Pool, error) {
		return postgres.Open(ctx, dbURL)
	})
}

// A database an older version left with events in its outbox and
// cancellations due loses none of them: migration 00006 moves them into
// River's jobs, the events each once with what the publication needs,
// and drops the outbox.
func TestTheOutboxAndDueCancellationsMoveToRiver(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	// The schema as the version before River left it.
	old := fstest.MapFS{}
	if err := fs.WalkDir(postgres.Migrations, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path >= "00006" {
			return err
		}
		b, err := fs.ReadFile(postgres.Migrations, path)
		old[path] = &fstest.MapFile{Data: b}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	pool, err := libpostgres.Open(ctx, dbURL, old)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := libpostgres.MigrateRiver(ctx, pool); err != nil {
		t.Fatal(err)
	}
	sent, waiting, cancelling := insertOld(t, pool, newOrder(acme, "sent", at(0))), insertOld(t, pool, newOrder(acme, "waiting", at(0))), insertOld(t, pool, newOrder(acme, "cancelling", at(0)))
	waitingID := "evt_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{"INSERT INTO outbox (event_id, type, order_id, created_at, sent_at) VALUES ('evt_' || md5('sent'), 'order.completed', $1, now(), now())", []any{sent.ID}},
		{`INSERT INTO outbox (event_id, type, order_id, created_at, trace_context) VALUES ($2, 'order.failed', $1, '2026-03-01T12:00:00Z', '{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}')`, []any{waiting.ID, waitingID}},
		{"INSERT INTO es2plus_reservations (order_id, position, state, call_id, profile_type, next_attempt_at) VALUES ($1, 0, 'cancel_due', 'c0', 'esim-travel', now()), ($1, 1, 'cancel_due', 'c1', 'esim-travel', now())", []any{cancelling.ID}},
	} {
		if _, err := pool.Exec(ctx, stmt.sql, stmt.args...); err != nil {
			t.Fatal(err)
		}
	}

	upgraded, err := postgres.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(upgraded.Close)
	rows, err := upgraded.Query(ctx, "SELECT kind, queue, state, args FROM river_job ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type job struct{ Kind, Queue, State, Args string }
	var got []job
	for rows.Next() {
		var j job
		if err := rows.Scan(&j.Kind, &j.Queue, &j.State, &j.Args); err != nil {
			t.Fatal(err)
		}
		got = append(got, j)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Kind != jobs.KindPublishEvent || got[0].Queue != "events" || got[0].State != "available" ||
		got[1].Kind != (jobs.CancelProfiles{}).Kind() || got[1].Queue != "cancellations" || got[1].State != "available" {
		t.Fatalf("jobs after the migration: %+v; want the waiting event's publication and the order's cancellations", got)
	}
	var event jobs.PublishEvent
	if err := json.Unmarshal([]byte(got[0].Args), &event); err != nil {
		t.Fatal(err)
	}
	if event.EventID != waitingID || event.Type != "order.failed" || event.OrderID != waiting.ID || !event.CreatedAt.Equal(at(0).Truncate(time.Second)) ||
		event.TraceContext["traceparent"] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("the moved publication: %+v", event)
	}
	var cancel jobs.CancelProfiles
	if err := json.Unmarshal([]byte(got[1].Args), &cancel); err != nil || cancel.OrderID != cancelling.ID {
		t.Errorf("the moved cancellation: %s (%v); want order %s", got[1].Args, err, cancelling.ID)
	}
	var outbox bool
	if err := upgraded.QueryRow(ctx, "SELECT to_regclass('outbox') IS NOT NULL").Scan(&outbox); err != nil || outbox {
		t.Errorf("the outbox is still there (%v)", err)
	}
}

// insertOld inserts a pending order as the schema before 00007 has it.
func insertOld(t *testing.T, pool *pgxpool.Pool, o ordering.Order) ordering.Order {
	t.Helper()
	_, err := pool.Exec(context.Background(), `INSERT INTO orders (id, account_id, environment, idempotency_key, fingerprint,
		plan_id, plan_name, per_day, unlimited, total_bytes, validity_days, quantity, days, currency, unit_minor, total_minor,
		status, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, false, false, $8, $9, $10, 0, $11, $12, $13, 'pending', $14)`,
		o.ID, o.Scope.AccountID, string(o.Scope.Environment), o.IdempotencyKey, o.Fingerprint, o.PlanID, o.PlanName,
		o.TotalBytes, o.ValidityDays, o.Quantity, string(o.Currency), o.UnitMinor, o.TotalMinor, o.CreatedAt)
	if err != nil {
		t.Fatalf("insert order into the old schema: %v", err)
	}
	return o
}
