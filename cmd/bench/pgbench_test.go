package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/esimplatform/esim/libs/postgres/pgtest"
)

// What pgbench 15 prints at the end of a run of the bench's script.
const pgbench15Output = `pgbench (15.20 (Debian 15.20-0+deb12u1))
transaction type: /work/main/.run/bench/pgbench/order.sql
scaling factor: 1
query mode: prepared
number of clients: 4
number of threads: 2
maximum number of tries: 1
duration: 2 s
number of transactions actually processed: 2393
number of failed transactions: 7 (0.292%)
latency average = 3.330 ms
initial connection time = 19.324 ms
tps = 1201.220195 (without initial connection time)
`

func TestParsePgbench(t *testing.T) {
	s, err := parsePgbench(pgbench15Output)
	if err != nil || s.processed != 2393 || s.failed != 7 || s.tps != 1201.220195 {
		t.Fatalf("parsePgbench: %+v, %v", s, err)
	}
	// pgbench 14 prints no failures.
	s, err = parsePgbench(strings.Replace(pgbench15Output, "number of failed transactions: 7 (0.292%)\n", "", 1))
	if err != nil || s.failed != 0 || s.processed != 2393 {
		t.Errorf("without failures: %+v, %v", s, err)
	}
	// pgbench 13 and older count the connections in; their tps lines are
	// not the figure asked for.
	old := strings.Replace(pgbench15Output, "tps = 1201.220195 (without initial connection time)", "tps = 1190.1 (including connections establishing)\ntps = 1201.2 (excluding connections establishing)", 1)
	for name, out := range map[string]string{"pgbench 13": old, "no count": strings.Replace(pgbench15Output, "number of transactions actually processed", "transactions", 1), "nothing": ""} {
		if _, err := parsePgbench(out); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}

	// As a load phase: its rate is pgbench's tps, its errors the failures.
	res := pgbenchResult(s, []time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond})
	if rps := res.RPS(); rps < 1201.2 || rps > 1201.3 || res.Requests != 2393 || res.Errors != 0 || res.P50 != 2*time.Millisecond || res.P99 != 2*time.Millisecond {
		t.Errorf("pgbenchResult: %.3f/s, %+v", rps, res)
	}
	s.failed = 7
	if res := pgbenchResult(s, nil); res.Requests != 2400 || res.Errors != 7 || !strings.Contains(res.FirstErr, "7 failed") {
		t.Errorf("with failures: %+v", res)
	}
}

func TestReadPgbenchLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tx.123")
	log := "0 1 7368 0 1795773889 680499\n1 1 10879 0 1795773889 684136\n2 4 failed 0 1795773889 685000\n\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	lat, err := readPgbenchLog(path)
	if err != nil || !slices.Equal(lat, []time.Duration{7368 * time.Microsecond, 10879 * time.Microsecond}) {
		t.Errorf("readPgbenchLog: %v, %v", lat, err)
	}
}

// pgbench gets the connection from the environment, never a password on
// its command line, and nothing of the caller's own libpq settings.
func TestPgbenchConnectsThroughTheEnvironment(t *testing.T) {
	env, err := pgbenchConnEnv("postgres://bench:s3cret@db.internal:6543/esim_bench_pgbench?sslmode=require")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PGHOST=db.internal", "PGPORT=6543", "PGUSER=bench", "PGDATABASE=esim_bench_pgbench", "PGPASSWORD=s3cret", "PGSSLMODE=require"}
	if !slices.Equal(env, want) {
		t.Errorf("env %q, want %q", env, want)
	}
	if got := withoutLibpqSettings([]string{"PATH=/bin", "PGSERVICE=x", "PGPASSWORD=y", "HOME=/root"}); !slices.Equal(got, []string{"PATH=/bin", "HOME=/root"}) {
		t.Errorf("withoutLibpqSettings: %q", got)
	}
	if _, err := databaseURL("host=127.0.0.1 user=postgres", "x"); err == nil {
		t.Error("a key=value server accepted")
	}
}

// The script runs on a real Postgres and does what an order does: every
// transaction completes one order with one eSIM, one ledger row and its
// debit.
func TestPgbenchScriptPlacesOrders(t *testing.T) {
	if _, err := findPgbench(); err != nil {
		t.Skip(err)
	}
	db := pgtest.NewDatabase(t)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := preparePgbench(ctx, db, strings.TrimPrefix(u.Path, "/"), t.TempDir(), pgbenchScript)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := maxClients(ctx, db); err != nil || n < 2 {
		t.Fatalf("maxClients: %d, %v", n, err)
	}
	res, err := b.run(ctx, 2, 500*time.Millisecond) // runs a whole second
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests < 10 || res.Errors != 0 || res.P50 <= 0 || res.P99 < res.P50 || res.RPS() < float64(res.Requests)/2 {
		t.Fatalf("pgbench: %d transactions, %d failed, p50 %s, p99 %s, %.0f/s", res.Requests, res.Errors, res.P50, res.P99, res.RPS())
	}
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var completed, pending, esims, ledger int
	var debited int64
	err = conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM orders WHERE status = 'completed'), (SELECT count(*) FROM orders WHERE status <> 'completed'),
		(SELECT count(*) FROM esims), (SELECT count(*) FROM ledger),
		(SELECT 9000000000000000000 - amount_minor FROM balances WHERE account_id = 1)`).Scan(&completed, &pending, &esims, &ledger, &debited)
	if err != nil {
		t.Fatal(err)
	}
	if completed != res.Requests || pending != 0 || esims != completed || ledger != completed || debited != int64(completed)*pgbenchOrderPrice {
		t.Errorf("%d transactions left %d orders completed, %d not, %d eSIMs, %d ledger rows, %d debited", res.Requests, completed, pending, esims, ledger, debited)
	}

	// A second run starts from empty tables; the many-account script has
	// each client debit its own account.
	many, err := preparePgbench(ctx, db, strings.TrimPrefix(u.Path, "/"), t.TempDir(), pgbenchManyScript)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&completed); err != nil || completed != 0 {
		t.Errorf("%d orders after preparing again (%v)", completed, err)
	}
	if res, err = many.run(ctx, 3, 500*time.Millisecond); err != nil || res.Errors != 0 {
		t.Fatalf("many accounts: %v, %d failed", err, res.Errors)
	}
	var accounts int
	err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE amount_minor < 9000000000000000000), sum(9000000000000000000 - amount_minor)::bigint FROM balances`).Scan(&accounts, &debited)
	if err != nil {
		t.Fatal(err)
	}
	if accounts != 3 || debited != int64(res.Requests)*pgbenchOrderPrice {
		t.Errorf("3 clients' %d orders debited %d accounts by %d in all; want 3 accounts, %d", res.Requests, accounts, debited, int64(res.Requests)*pgbenchOrderPrice)
	}
}
