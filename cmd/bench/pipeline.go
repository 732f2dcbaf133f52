package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/esimplatform/esim/cmd/internal/platform"
	"github.com/esimplatform/esim/libs/internalauth"
)

// The pipeline rows (issue 33): how fast the webhook service clears a
// backlog of order events, against pgbench doing the same writes, and an
// order's webhook at half that rate.
const (
	pipelineTarget        = "webhook pipeline: backlog delivered (Kafka → event and job → attempt → POST → recorded)"
	pipelineControlTarget = "control: pgbench, an event and its job inserted, then its attempt inserted and its job completed"
)

// The pipeline's goals (issue 33): reported, not a condition of
// resolving it.
const (
	targetPipelineRatio = 0.5
	targetPipelineP99   = 100 * time.Millisecond
)

// pipelineBacklogOrders is the backlog: orders placed while delivery is
// paused. pipelinePlaceRate is how fast they are offered, above what
// ordering sustains on two cores, so that they go as fast as it takes
// them.
const (
	pipelineBacklogOrders = 2000
	pipelinePlaceRate     = 300
)

// pipelineControlClients is the control's concurrency: as many as the
// webhook service has attempts in flight to one endpoint
// (PER_ENDPOINT_CONCURRENCY's default), the bound on the pipeline's
// concurrency for the one partner the bench orders for.
const pipelineControlClients = 4

// pipelineDatabase is the control's scratch database, made anew each run.
const pipelineDatabase = "esim_bench_pipeline"

// pipelineSchema is the webhook service's rows a delivery writes, cut to
// what the control writes: the event (its columns and keys as the
// service's), its job (River's river_job cut to the columns a delivery
// touches) and its attempt.
const pipelineSchema = `
DROP TABLE IF EXISTS attempts, jobs, events;
CREATE TABLE events (
    id            text        PRIMARY KEY,
    type          text        NOT NULL,
    account_id    uuid        NOT NULL,
    environment   text        NOT NULL,
    order_id      uuid,
    created_at    timestamptz NOT NULL,
    payload       text        NOT NULL,
    trace_context jsonb       NOT NULL DEFAULT '{}',
    status        text        NOT NULL,
    url           text
);
CREATE INDEX ON events (account_id, environment, created_at DESC);
CREATE TABLE jobs (
    id           bigserial   PRIMARY KEY,
    args         jsonb       NOT NULL,
    kind         text        NOT NULL,
    queue        text        NOT NULL,
    priority     smallint    NOT NULL,
    state        text        NOT NULL,
    attempt      smallint    NOT NULL DEFAULT 0,
    scheduled_at timestamptz NOT NULL DEFAULT now(),
    finalized_at timestamptz
);
CREATE INDEX ON jobs (state, queue, priority, scheduled_at, id);
CREATE TABLE attempts (
    event_id      text        NOT NULL REFERENCES events (id),
    number        integer     NOT NULL,
    started_at    timestamptz NOT NULL,
    finished      boolean     NOT NULL DEFAULT false,
    duration_ms   integer,
    status_code   integer,
    error         text,
    response_body text,
    PRIMARY KEY (event_id, number)
);
`

// pipelineScript is one event's writes as the service makes them, in
// its two transactions: stored with its job (ingestion), then its
// attempt recorded and its job completed (delivery). The payload is a
// delivery's size.
const pipelineScript = `BEGIN;
INSERT INTO events (id, type, account_id, environment, order_id, created_at, payload, status, url) VALUES ('evt_' || md5(random()::text), 'order.completed', '00000000-0000-0000-0000-000000000001', 'sandbox', gen_random_uuid(), now(), repeat('x', 700), 'pending', 'http://127.0.0.1/hook') RETURNING id AS event_id \gset
INSERT INTO jobs (args, kind, queue, priority, state) VALUES (jsonb_build_object('event_id', :event_id::text), 'webhook_delivery', 'webhook_sandbox', 1, 'available') RETURNING id AS job_id \gset
END;
BEGIN;
INSERT INTO attempts (event_id, number, started_at, finished, duration_ms, status_code, response_body) VALUES (:event_id, 1, now(), true, 1, 204, '');
UPDATE events SET status = 'delivered' WHERE id = :event_id;
UPDATE jobs SET state = 'completed', attempt = 1, finalized_at = now() WHERE id = :job_id;
END;
`

// pipelineResults are the pipeline rows of a run.
type pipelineResults struct {
	// placed orders made the backlog (answered 201); placeErrors were
	// not placed (firstErr an example).
	placed, placeErrors int
	firstErr            string
	// paused is how long delivery was paused while the backlog was
	// placed.
	paused time.Duration
	// delivered of the backlog's webhooks came, missing did not within
	// the drain's bound; duplicates are deliveries of an event delivered
	// before, during the drain.
	delivered, missing, duplicates int
	// toFirst is from the release to the first webhook, drain from the
	// release to the last.
	toFirst, drain time.Duration
	control        result
	// half is the webhook phase at half the pipeline's rate.
	half    *webhookResults
	halfErr string
}

// rate is the webhooks delivered a second, from the release to the last.
func (r *pipelineResults) rate() float64 { return perSecond(r.delivered, r.drain) }

func (r *pipelineResults) ratio() float64 {
	if r.control.RPS() == 0 {
		return 0
	}
	return r.rate() / r.control.RPS()
}

// pipelineDrainTimeout bounds the wait for the backlog's webhooks.
const pipelineDrainTimeout = 3 * time.Minute

// pipelinePhase places a backlog of orders while the webhook service is
// stopped (SIGSTOP: its consumer reads nothing, its workers send
// nothing, while ordering publishes every event to Kafka), then lets it
// go on (SIGCONT) and times the backlog's webhooks to the receiver.
// Then the control, then the webhook phase at half the rate found.
func pipelinePhase(ctx context.Context, cfg config, p *platform.Platform, b *benchReceiver, runDir string, say func(string, ...any)) (res pipelineResults, err error) {
	if b == nil {
		return res, fmt.Errorf("no %s service in services.yaml to deliver webhooks", webhookService)
	}
	var pid int
	for _, svc := range p.Services() {
		if svc.Name == webhookService {
			pid = svc.PID
		}
	}
	if pid == 0 {
		return res, fmt.Errorf("no %s process to pause", webhookService)
	}
	operator := internalauth.Client(&http.Client{Timeout: 10 * time.Second}, p.OperatorToken)

	b.settle(ctx, p, "pipeline", say)
	planID, plan, err := pickPlan(ctx, p.APIBaseURL, p.SandboxKey, "type=fixed&")
	if err != nil {
		return res, err
	}
	if err := fundOrders(ctx, p, operator, plan, pipelineBacklogOrders, say); err != nil {
		return res, err
	}

	// 1. The backlog, delivery paused.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return res, fmt.Errorf("pause the %s service: %w", webhookService, err)
	}
	paused := time.Now()
	resumed := false
	resume := func() error {
		if resumed {
			return nil
		}
		resumed = true
		return syscall.Kill(pid, syscall.SIGCONT)
	}
	defer func() {
		if rerr := resume(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("resume the %s service: %w", webhookService, rerr))
		}
	}()
	say("pipeline: %s service paused; placing %d orders", webhookService, pipelineBacklogOrders)
	api := &partnerAPI{ctx: ctx, base: p.APIBaseURL, key: p.SandboxKey, client: orderClient()}
	body := fmt.Appendf(nil, `{"plan_id":%q,"quantity":1}`, planID)
	placed := placeOrders(ctx, api, body, "bench-"+randomHex(6)+"-pipeline-", pipelinePlaceRate, 0,
		time.Duration(pipelineBacklogOrders)*time.Second/pipelinePlaceRate)
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("interrupted: %w", err)
	}
	var ids []string
	for _, o := range placed {
		if o.err != nil {
			res.placeErrors++
			if res.firstErr == "" {
				res.firstErr = o.err.Error()
			}
			continue
		}
		ids = append(ids, o.id)
	}
	res.placed = len(ids)
	// Every event in Kafka before the release: ordering's outbox empty.
	for time.Since(paused) < drainTimeout {
		n, err := outboxWaiting(ctx, p.URL(orderingService))
		if err != nil || n <= 0 {
			break
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("interrupted: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}

	// 2. The release, and the backlog's webhooks.
	before := b.rcv.snapshot()
	res.paused = time.Since(paused)
	say("pipeline: releasing %d events after %s paused", res.placed, res.paused.Round(time.Millisecond))
	release := time.Now()
	if err := resume(); err != nil {
		return res, fmt.Errorf("resume the %s service: %w", webhookService, err)
	}
	b.rcv.await(ctx, ids, release.Add(pipelineDrainTimeout))
	got := b.rcv.snapshot()
	var first, last time.Time
	for _, id := range ids {
		a, ok := got.arrivals[id]
		if !ok {
			res.missing++
			continue
		}
		res.delivered++
		if first.IsZero() || a.at.Before(first) {
			first = a.at
		}
		if a.at.After(last) {
			last = a.at
		}
	}
	res.duplicates = got.duplicates - before.duplicates
	if res.delivered > 0 {
		res.toFirst, res.drain = first.Sub(release), last.Sub(release)
	}
	say("pipeline: %d webhooks in %s (%.0f/s; first after %s), %d missing, %d duplicates",
		res.delivered, res.drain.Round(time.Millisecond), res.rate(), ms(res.toFirst), res.missing, res.duplicates)

	// 3. The control.
	bench, err := preparePipelineControl(ctx, cfg.pgURL, pipelineDatabase, filepath.Join(runDir, "pgbench-pipeline"))
	if err != nil {
		return res, err
	}
	say("%s: %d clients, %s", pipelineControlTarget, pipelineControlClients, cfg.duration)
	if res.control, err = bench.run(ctx, pipelineControlClients, cfg.duration); err != nil {
		return res, err
	}
	say("pipeline control: %.0f events/s", res.control.RPS())

	// 4. An order's webhook at half the pipeline's rate.
	if res.rate() < 2 {
		res.halfErr = "no rate measured"
		return res, nil
	}
	half := cfg
	half.webhookRate = res.rate() / 2
	half.webhookDuration = cfg.duration
	say("pipeline: webhook latency at half the pipeline's rate, %.0f orders/s", half.webhookRate)
	w, err := webhookPhase(ctx, half, p, b, say)
	if err != nil {
		res.halfErr = err.Error()
		say("warning: pipeline: the half-rate run failed: %v", err)
		return res, nil
	}
	res.half = &w
	return res, nil
}

// preparePipelineControl makes the control's scratch database, name on
// the server of serverURL, its tables anew, and its script.
func preparePipelineControl(ctx context.Context, serverURL, name, dir string) (*pgbench, error) {
	return prepareControl(ctx, serverURL, name, dir, "the pipeline control's", pipelineSchema, "pipeline.sql", pipelineScript)
}

// pipelineSection names the pipeline rows' section, in its heading and
// in the Goals table.
const pipelineSection = "Webhook pipeline"

// section is the report's pipeline rows.
func (r *pipelineResults) section(p func(string, ...any)) {
	p("## %s\n\n", pipelineSection)
	methodLine(p, "webhook-pipeline", "A backlog of %d orders' webhooks delivered once the paused webhook service goes on, against pgbench doing a delivery's writes with %d clients; then an order's webhook at half that rate",
		pipelineBacklogOrders, pipelineControlClients)
	p("| row | events/s | events | time | errors |\n|---|---:|---:|---:|---:|\n")
	p("| %s | %.0f | %d | %s | %d missing, %d duplicates |\n", pipelineTarget, r.rate(), r.delivered, r.drain.Round(time.Millisecond), r.missing, r.duplicates)
	p("| %s | %.0f | %d | %s | %d |\n\n", pipelineControlTarget, r.control.RPS(), r.control.Requests, r.control.Elapsed.Round(time.Millisecond), r.control.Errors)
	p("Backlog: %d orders placed (%d not placed%s) during %s paused; the first webhook came %s after the release.\n\n",
		r.placed, r.placeErrors, exampleText(r.firstErr), r.paused.Round(time.Millisecond), ms(r.toFirst))
}

// goals are the pipeline rows' goals: a missing or duplicated delivery
// misses them, whatever the rate.
func (r *pipelineResults) goals() []goal {
	ratio := r.ratio()
	gs := []goal{{section: pipelineSection, name: "backlog delivered / pgbench control, events per second",
		measured: fmt.Sprintf("%.2f", ratio), want: fmt.Sprintf(">= %.2f", targetPipelineRatio), met: ratio >= targetPipelineRatio && r.missing+r.duplicates == 0}}
	want := "<= " + ms(targetPipelineP99)
	if h := r.half; h != nil {
		return append(gs, goal{section: pipelineSection, name: fmt.Sprintf("order's 201 → its webhook, p99 at half the pipeline's rate (%.0f/s, %d orders)", h.rate, h.latency.Requests),
			measured: ms(h.latency.P99), want: want, met: h.latency.P99 <= targetPipelineP99 && h.missing == 0 && h.errors == 0})
	}
	return append(gs, goal{section: pipelineSection, name: "order's 201 → its webhook, p99 at half the pipeline's rate",
		measured: "not measured: " + r.halfErr, want: want})
}

func exampleText(err string) string {
	if err == "" {
		return ""
	}
	return ", e.g. " + strings.ReplaceAll(err, "|", "/")
}
