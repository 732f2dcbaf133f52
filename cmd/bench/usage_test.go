package main

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/jobs"
)

func TestBatchesOf(t *testing.T) {
	got := batchesOf([]int{1, 2, 3, 4, 5}, 2)
	if len(got) != 3 || !slices.Equal(got[0], []int{1, 2}) || !slices.Equal(got[1], []int{3, 4}) || !slices.Equal(got[2], []int{5}) {
		t.Errorf("batchesOf: %v", got)
	}
	// A batch has no room to grow into the next.
	got[0] = append(got[0], 9)
	if got[1][0] != 3 {
		t.Error("appending to a batch overwrote the next")
	}
	if got := batchesOf([]int(nil), 2); got != nil {
		t.Errorf("batchesOf(nil): %v", got)
	}
}

func TestUsageRatio(t *testing.T) {
	u := usageResults{batch: 500,
		ordering: result{Requests: 30, Errors: 0, Elapsed: time.Second},
		control:  result{Requests: 100, Elapsed: 2 * time.Second}}
	if r := readingsPerSecond(u.ordering, u.batch); r != 15000 {
		t.Errorf("readings/s %v, want 15000", r)
	}
	if r := u.ratio(); r != 0.6 {
		t.Errorf("ratio %v, want 0.6", r)
	}
	if r := (usageResults{batch: 500, ordering: u.ordering}).ratio(); r != 0 {
		t.Errorf("no control: ratio %v", r)
	}
}

func TestReportUsage(t *testing.T) {
	ms := time.Millisecond
	u := &usageResults{esims: 20000, batch: 500,
		ordering: result{Requests: 200, Elapsed: 10 * time.Second, P50: 40 * ms, P99: 100 * ms},
		control:  result{Requests: 240, Elapsed: 10 * time.Second, P50: 38 * ms, P99: 60 * ms}}
	r := report{cfg: config{duration: 10 * time.Second, warmup: 2 * time.Second, workers: []int{16}, only: onlyUsage, usageDatabase: "esim_bench_usage"},
		cpus: 2, goVersion: "go1.26", usage: u}
	md := r.markdown()
	for _, want := range []string{
		"-only usage`", "## Usage ingestion\n\nOrdering's usage pass over 20000 ACTIVE eSIMs in the scratch database `esim_bench_usage`, batches of 500",
		"each for 10s after 2s of warm-up ([method](docs/benchmarks.md#usage-ingestion)).",
		"| " + usageTarget + " | 10000 | 200 | 40.00 ms | 100.00 ms | 0 |",
		"| " + usageControlTarget + " | 12000 | 240 | 38.00 ms | 60.00 ms | 0 |",
		"Ordering / pgbench: **0.83** (10000 / 12000 readings/s)",
		"| Usage ingestion | usage readings applied by ordering / pgbench batch UPDATE of the same rows, per second: >= 0.25 | 0.83 | met |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "-webhook-duration") || strings.Contains(md, "## Install") {
		t.Errorf("a usage-only report has the install rows' parts:\n%s", md)
	}
	u.ordering.Errors, u.ordering.FirstErr, u.unchanged = 1, "3 of 500 readings changed no eSIM", 3
	if md := r.markdown(); !strings.Contains(md, "per second: >= 0.25 | 0.83 | not met |") || !strings.Contains(md, "1 of ordering's batches failed (e.g. 3 of 500 readings changed no eSIM), 3 readings") {
		t.Errorf("a failed batch misses the goal:\n%s", md)
	}
}

// The phase runs on a real Postgres: its eSIMs are ACTIVE live ones of
// ordering's schema, ordering and pgbench both apply every batch they
// take, and no reading crosses a usage threshold.
func TestUsagePhaseOnPostgres(t *testing.T) {
	if _, err := findPgbench(); err != nil {
		t.Fatal(err)
	}
	db := pgtest.NewDatabase(t)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	const esims = 2*ordering.UsageBatch + 120 // the last batch short, and the last order
	cfg := config{pgURL: pgtest.AdminURL(), usageDatabase: name, usageEsims: esims, duration: 500 * time.Millisecond}
	ctx := context.Background()
	res, err := usagePhase(ctx, cfg, t.TempDir(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if o := res.ordering; o.Requests < 1 || o.Errors != 0 || res.unchanged != 0 || o.P50 <= 0 || o.P99 < o.P50 {
		t.Errorf("ordering: %d batches, %d errors (%s), %d readings unchanged, p50 %s, p99 %s", o.Requests, o.Errors, o.FirstErr, res.unchanged, o.P50, o.P99)
	}
	if c := res.control; c.Requests < 1 || c.Errors != 0 {
		t.Errorf("pgbench: %d batches, %d failed (%s)", c.Requests, c.Errors, c.FirstErr)
	}
	if res.esims != esims || res.batch != ordering.UsageBatch {
		t.Errorf("%d eSIMs in batches of %d", res.esims, res.batch)
	}

	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var active, used, batches, inBatches, usageEvents int
	err = conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM esims WHERE environment = 'live' AND status = 'ACTIVE' AND activated_at IS NOT NULL),
		(SELECT count(*) FROM esims WHERE used_bytes > 0),
		(SELECT count(*) FROM bench_usage_batches),
		(SELECT count(DISTINCT i) FROM bench_usage_batches, unnest(iccids) AS i JOIN esims e ON e.iccid = i),
		(SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'type' = 'esim.usage')`, jobs.KindPublishEvent).Scan(&active, &used, &batches, &inBatches, &usageEvents)
	if err != nil {
		t.Fatal(err)
	}
	if active != esims || used == 0 || batches != 3 || inBatches != esims || usageEvents != 0 {
		t.Errorf("%d ACTIVE, %d used, %d batches of %d eSIMs, %d usage events: want %d ACTIVE, some used, 3 batches of every eSIM, no event",
			active, used, batches, inBatches, usageEvents, esims)
	}
}
