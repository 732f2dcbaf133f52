package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/esimplatform/esim/libs/postgres/pgtest"
)

// The control's script runs on a real Postgres and leaves what a
// delivery does: every transaction an event delivered, its job completed
// and one attempt.
func TestPipelineControlDeliversEvents(t *testing.T) {
	if _, err := findPgbench(); err != nil {
		t.Fatal(err)
	}
	db := pgtest.NewDatabase(t)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := preparePipelineControl(ctx, db, strings.TrimPrefix(u.Path, "/"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.run(ctx, 2, 500*time.Millisecond) // runs a whole second
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests < 10 || res.Errors != 0 || res.RPS() < float64(res.Requests)/2 {
		t.Fatalf("pgbench: %d transactions, %d failed, %.0f/s", res.Requests, res.Errors, res.RPS())
	}
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var delivered, others, completed, attempts int
	err = conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM events WHERE status = 'delivered'), (SELECT count(*) FROM events WHERE status <> 'delivered'),
		(SELECT count(*) FROM jobs j JOIN events e ON e.id = j.args->>'event_id' WHERE j.state = 'completed'),
		(SELECT count(*) FROM attempts WHERE status_code = 204)`).Scan(&delivered, &others, &completed, &attempts)
	if err != nil {
		t.Fatal(err)
	}
	if delivered != res.Requests || others != 0 || completed != delivered || attempts != delivered {
		t.Errorf("%d transactions left %d events delivered, %d not, %d jobs completed, %d attempts", res.Requests, delivered, others, completed, attempts)
	}
}

// The report gives both rows, the ratio and the latency at half the
// rate, each with its goal.
func TestReportPipeline(t *testing.T) {
	r := report{started: time.Now(), cfg: config{only: onlyPipeline, workers: []int{16}}, pipeline: &pipelineResults{
		placed: 100, delivered: 100, drain: 2 * time.Second,
		control: result{Requests: 300, Elapsed: time.Second},
		half:    &webhookResults{rate: 25, latency: result{Requests: 250, P99: 40 * time.Millisecond}},
	}}
	md := r.markdown()
	for _, want := range []string{
		"## Webhook pipeline\n\nA backlog of 2000 orders' webhooks", "with 4 clients; then an order's webhook at half that rate ([method](docs/benchmarks.md#webhook-pipeline)).",
		pipelineTarget + " | 50 | 100 | 2s", pipelineControlTarget + " | 300 |",
		"| Webhook pipeline | backlog delivered / pgbench control, events per second: >= 0.50 | 0.17 | not met |",
		"| Webhook pipeline | order's 201 → its webhook, p99 at half the pipeline's rate (25/s, 250 orders): <= 100.00 ms | 40.00 ms | met |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	// A half-rate run that failed misses its goal, and says why.
	r.pipeline.half, r.pipeline.halfErr = nil, "no rate measured"
	if md := r.markdown(); !strings.Contains(md, "| Webhook pipeline | order's 201 → its webhook, p99 at half the pipeline's rate: <= 100.00 ms | not measured: no rate measured | not met |") {
		t.Errorf("a half-rate run not made is not a missed goal:\n%s", md)
	}
	c := config{only: onlyPipeline}
	if !c.runs(onlyPipeline) || c.runs(onlyWebhooks) || !(config{}).runs(onlyPipeline) {
		t.Error("-only pipeline selects the wrong phases")
	}
}
