package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/esimplatform/esim/cmd/internal/platform"
	"github.com/esimplatform/esim/cmd/internal/platform/redistest"
	"github.com/esimplatform/esim/cmd/internal/services/servicestest"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
)

// testSecret is a signing secret as the webhook service makes them.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// post sends body to url signed as event id with secret (none when
// empty), and returns the status.
func post(t *testing.T, url, secret, id string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	req.Header.Set(standardwebhooks.HeaderWebhookID, id)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, fmt.Sprint(now.Unix()))
	if secret != "" {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign(id, now, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The receiver records an order's first verified delivery, and counts
// deliveries it cannot verify and events delivered again apart.
func TestReceiverVerifiesAndCountsDeliveries(t *testing.T) {
	rcv, err := startReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.close()
	if err := rcv.verifyWith(testSecret); err != nil {
		t.Fatal(err)
	}
	order := func(id string) []byte {
		return fmt.Appendf(nil, `{"id":"evt_1","event":"order.completed","created_at":"2026-01-02T03:04:05.123456Z","environment":"sandbox","data":{"id":%q}}`, id)
	}
	for _, c := range []struct {
		url, secret, id string
		body            []byte
		want            int
	}{
		{rcv.url, testSecret, "evt_1", order("o1"), http.StatusNoContent},
		{rcv.url, testSecret, "evt_1", order("o1"), http.StatusNoContent}, // delivered again
		{rcv.url, testSecret, "evt_2", order("o2"), http.StatusNoContent},
		{rcv.url, "whsec_" + strings.Repeat("A", 40), "evt_3", order("o3"), http.StatusUnauthorized},  // another secret
		{rcv.url, "", "evt_4", order("o4"), http.StatusUnauthorized},                                  // no signature
		{rcv.url, testSecret, "evt_5", []byte(`{"event":"ping","data":{}}`), http.StatusUnauthorized}, // no order
		{strings.TrimSuffix(rcv.url, "/webhooks") + controlPath, testSecret, "evt_6", order("o6"), http.StatusNoContent},
		{strings.TrimSuffix(rcv.url, "/webhooks") + controlPath, "", "evt_7", order("o7"), http.StatusUnauthorized},
	} {
		if got := post(t, c.url, c.secret, c.id, c.body); got != c.want {
			t.Errorf("%s %s: %d, want %d", c.url, c.body, got, c.want)
		}
	}
	got := rcv.snapshot()
	if len(got.arrivals) != 2 || got.duplicates != 1 || got.unverified != 3 || !strings.Contains(got.firstUnverified, "no matching signature") {
		t.Errorf("arrivals %v, %d duplicates, %d unverified (%s): want o1 and o2, 1 and 3", got.arrivals, got.duplicates, got.unverified, got.firstUnverified)
	}
	want := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	if a := got.arrivals["o1"]; !a.completed.Equal(want) || a.at.IsZero() {
		t.Errorf("o1 arrived %v, completed %v", a.at, a.completed)
	}
	if d, ok := rcv.sample(); !ok || !bytes.Equal(d.body, order("o1")) || d.header.Get(standardwebhooks.HeaderWebhookID) != "evt_1" {
		t.Errorf("sample %q %v", d.body, d.header)
	}

	// The control is the sample, signed afresh, and verifies.
	sample, _ := rcv.sample()
	control, err := rcv.controlTarget(sample)
	if err != nil {
		t.Fatal(err)
	}
	res := openLoop(context.Background(), control, 100, 2, 100*time.Millisecond)
	if res.Requests != 10 || res.Errors != 0 || len(rcv.snapshot().arrivals) != 2 {
		t.Errorf("control: %d requests, %d errors (%s), %d arrivals", res.Requests, res.Errors, res.FirstErr, len(rcv.snapshot().arrivals))
	}
}

// A webhook read before its order's 201 counts as 0 ms and is counted;
// the percentiles come from the measured orders only.
func TestTallyClampsWebhooksThatBeatTheirOrder(t *testing.T) {
	start := time.Now()
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	placed := []placedOrder{
		{id: "warm", due: at(-10), read: at(0)},
		{id: "a", due: at(0), read: at(10), measured: true},
		{id: "b", due: at(10), read: at(20), measured: true},
		{id: "c", due: at(20), read: at(30), measured: true},
		{id: "d", due: at(30), read: at(40), measured: true},
		{due: at(40), read: at(50), measured: true, err: errors.New("HTTP 402")},
	}
	got := receiverState{
		arrivals: map[string]arrival{
			"warm": {at: at(5)}, "a": {at: at(15)}, "b": {at: at(17)}, "c": {at: at(130)}, "elsewhere": {at: at(1)},
		},
		unverified: 2, duplicates: 1, firstUnverified: "bad",
	}
	res := webhookResults{rate: 100}
	res.tally(placed, got)
	if res.placed != 4 || res.errors != 1 || res.firstErr != "HTTP 402" || res.missing != 1 || res.early != 1 || res.earliest != -3*time.Millisecond ||
		res.others != 1 || res.unverified != 2 || res.duplicates != 1 {
		t.Fatalf("%+v", res)
	}
	if l := res.latency; l.Requests != 3 || l.P50 != 5*time.Millisecond || l.P90 != 5*time.Millisecond || l.Max != 100*time.Millisecond || l.Rate != 100 {
		t.Errorf("latency %+v: want 0, 5 and 100 ms", l)
	}
	if o := res.orders; o.Requests != 4 || o.P50 != 10*time.Millisecond || o.Errors != 1 {
		t.Errorf("orders %+v", o)
	}
}

func TestOnlyWebhooksSelectsThePhase(t *testing.T) {
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"-help"}, func(string) string { return "" }, io.Discard, &stderr)
	for _, want := range []string{"webhooks (an order's 201", "-webhook-rate", "-webhook-duration"} {
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(stderr.String(), want) {
			t.Errorf("-help lacks %q (%v):\n%s", want, err, stderr.String())
		}
	}
	c := config{only: onlyWebhooks}
	if !c.runs(onlyWebhooks) || c.runs(onlyPlans) || c.runs(onlyOrders) || !(config{}).runs(onlyWebhooks) {
		t.Error("-only webhooks selects the wrong phases")
	}
	if err := run(context.Background(), []string{"-webhook-rate", "0"}, func(string) string { return "" }, io.Discard, io.Discard); err == nil {
		t.Error("-webhook-rate 0 accepted")
	}
}

func TestReportWebhooks(t *testing.T) {
	ms := time.Millisecond
	hooks := &webhookResults{
		planID: "plan-1", rate: 100, duration: 20 * time.Second, warmup: 2 * time.Second,
		latency: result{Requests: 1998, Rate: 100, P50: 12 * ms, P90: 30 * ms, P99: 140 * ms, Max: 300 * ms},
		orders:  result{Requests: 2000, Rate: 100, P50: 20 * ms, P90: 40 * ms, P99: 90 * ms, Max: 200 * ms, Errors: 1},
		placed:  2000, errors: 1, firstErr: "HTTP 402", missing: 2, early: 3, earliest: -2 * ms, others: 200,
		deliveryBytes: 2100,
		control:       result{Requests: 2000, Rate: 100, P50: ms / 4, P90: ms / 2, P99: 2 * ms, Max: 5 * ms},
		queues:        sampledQueues{peak: backlog{outbox: notRead, kafka: 5, pending: 2}, reads: 80, failed: 3, err: "ordering's metrics have no ordering_outbox_events_waiting"},
		stages:        []stage{{"order completed → attempt", result{Requests: 1998, P50: 10 * ms, P90: 20 * ms, P99: 30 * ms, Max: 40 * ms}}},
		cpu:           []cpuShare{{webhookBenchProcess, 900 * time.Microsecond}, {totalShare, 9 * ms}},
		usage:         usage{busy: 0.5},
		pgbenchCPU:    1500 * time.Microsecond, pgbenchRun: result{Requests: 2200}, pgbenchUsage: usage{busy: 0.2},
	}
	r := report{cfg: config{duration: time.Second, warmup: 2 * time.Second, workers: []int{8}, trials: 1, only: onlyWebhooks, webhookRate: 100, webhookDuration: 20 * time.Second},
		cpus: 2, goVersion: "go1.26", webhooks: hooks}
	md := r.markdown()
	for _, want := range []string{
		"-webhook-rate 100 -webhook-duration 20s -only webhooks`",
		"## Webhooks\n\nSandbox orders of one eSIM of plan plan-1", "steady 100 orders/s for 20s after 2s of warm-up", "(2100-byte body) ([method](docs/benchmarks.md#webhooks)).",
		"| order's 201 → its signed webhook read by the receiver | 100 | 1998 | 12.00 ms | 30.00 ms | 140.00 ms | 300.00 ms | 1 |",
		"| control: POST of a delivery to the same receiver, round trip | 100 | 2000 | 0.25 ms | 0.50 ms | 2.00 ms | 5.00 ms | 0 |",
		"| context: the orders themselves, from due to 201 read | 100 | 2000 | 20.00 ms | 40.00 ms | 90.00 ms | 200.00 ms | 1 |",
		"1998 of the 2000 orders answered 201 had their webhook, verified; 2 missing, 0 unverified, 0 duplicates",
		"3 webhooks were read before their order's 201 (up to 2.00 ms ahead)",
		"200 webhooks of the warm-up's orders", "1 orders were not answered 201 (e.g. HTTP 402)",
		"(read every 250ms): ? events in ordering's outbox, 5 in Kafka, 2 deliveries pending (3 of 80 reads failed, e.g. ordering's metrics have no ordering_outbox_events_waiting).",
		"Webhook / control: p50 **48×** (12.00 ms / 0.25 ms), p99 **70×** (140.00 ms / 2.00 ms)",
		// Missing webhooks miss both goals, whatever the percentiles.
		"| Webhooks | webhook p50 after the order's 201, at 100 orders/s: < 20.00 ms | 12.00 ms | not met |",
		"| Webhooks | webhook p99 after the order's 201, at 100 orders/s: < 100.00 ms | 140.00 ms | not met |",
		"| Webhooks | control: the receiver's round trip, p99: < 100.00 ms | 2.00 ms | met (not a target) |",
		"the machine was 50% busy, 0% stolen by the hypervisor ([method](docs/benchmarks.md#cpu-per-order)).", "| bench (orders, receiver, embedded Kafka) | 900 µs |",
		"| order completed → attempt | 1998 | 10.00 ms | 20.00 ms | 30.00 ms | 40.00 ms |",
		"| control: pgbench's order-shaped transaction at 100/s, the whole machine (2200 transactions; machine 20% busy) | 1500 µs |",
		"An order end to end with its webhook / pgbench's transaction, CPU: **6.0×** (9000 µs / 1500 µs)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	for _, unwanted := range []string{"## Results", "## Orders"} {
		if strings.Contains(md, unwanted) {
			t.Errorf("a webhooks-only report has %q:\n%s", unwanted, md)
		}
	}

	hooks.missing, hooks.errors = 0, 0
	if md := r.markdown(); !strings.Contains(md, "201, at 100 orders/s: < 20.00 ms | 12.00 ms | met |") || !strings.Contains(md, "201, at 100 orders/s: < 100.00 ms | 140.00 ms | not met |") {
		t.Errorf("with every webhook in, p50 meets its goal and p99 misses:\n%s", md)
	}
}

// TestWebhookPhaseAgainstThePlatform runs the phase, then the install
// rows' (installPhase), briefly against the real service binaries, started
// as `make run` starts them, on databases of its own.
func TestWebhookPhaseAgainstThePlatform(t *testing.T) {
	bin := t.TempDir()
	declared := servicestest.Build(t, bin)
	ctx := context.Background()
	rcv, err := startReceiver()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rcv.close)
	p, err := platform.Start(ctx, platform.Options{
		PGURL: pgtest.AdminURL(), RedisURL: redistest.URL(),
		Services: declared, Addrs: servicestest.FreeAddrs(t, declared),
		BinDir: bin, RunDir: t.TempDir(), KeyName: "bench webhooks test",
		DatabasePrefix: pgtest.DatabasePrefix(t, servicestest.Databases(declared)...),
		Env:            benchEnv(declared.Names(), rcv.addr),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := errors.Join(p.RevokeKeys(ctx), p.Stop(ctx)); err != nil {
			t.Error(err)
		}
	})

	// A URL set before the phase is set again after it.
	hooks := webhookv1.NewWebhookProtobufClient(p.URL(webhookService), internalauth.Client(http.DefaultClient, p.OperatorToken))
	scope := &webhookv1.Scope{AccountId: p.DemoAccountID, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX}
	const previous = "http://127.0.0.1:9/previous"
	if _, err := hooks.SetEndpoint(ctx, &webhookv1.SetEndpointRequest{Scope: scope, Url: previous}); err != nil {
		t.Fatal(err)
	}

	cfg := config{webhookRate: 20, webhookDuration: time.Second}
	b, err := receiveWebhooks(ctx, p, rcv)
	if err != nil {
		t.Fatal(err)
	}
	res, err := webhookPhase(ctx, cfg, p, b, t.Logf)
	if err != nil {
		t.Fatal(errors.Join(err, b.close(ctx, t.Logf)))
	}
	// The install rows, on the same platform and receiver.
	installCfg := config{duration: time.Second, webhookDuration: time.Second, installProbe: 2 * installOrderSize}
	installs, err := installPhase(ctx, installCfg, p, b, t.Logf)
	if err := errors.Join(err, b.close(ctx, t.Logf)); err != nil {
		t.Fatal(err)
	}
	const orders = 20
	l := res.latency
	if res.placed != orders || res.errors != 0 || res.missing != 0 || res.unverified != 0 || res.duplicates != 0 || res.others != 0 || l.Requests != orders {
		t.Errorf("%d orders placed, %d errors (%s), %d webhooks of which %d missing, %d unverified (%s), %d duplicates, %d of other orders: want every order's webhook once",
			res.placed, res.errors, res.firstErr, l.Requests, res.missing, res.unverified, res.firstUnverified, res.duplicates, res.others)
	}
	if l.P50 > l.P90 || l.P90 > l.P99 || l.P99 > l.Max || l.Max <= 0 || l.Max > deliveryGrace {
		t.Errorf("latency p50 %s, p90 %s, p99 %s, max %s", l.P50, l.P90, l.P99, l.Max)
	}
	if c := res.control; c.Requests != orders || c.Errors != 0 || c.P50 <= 0 || c.P50 > c.P99 || res.deliveryBytes < 100 {
		t.Errorf("control: %d requests, %d errors (%s), p50 %s, p99 %s, of a %d-byte delivery", c.Requests, c.Errors, c.FirstErr, c.P50, c.P99, res.deliveryBytes)
	}
	if len(res.stages) != 3 || res.stagesErr != "" {
		t.Fatalf("stages %+v (%s)", res.stages, res.stagesErr)
	}
	for _, s := range res.stages {
		if s.spread.Requests != orders || s.spread.P50 > s.spread.Max {
			t.Errorf("stage %q: %+v", s.name, s.spread)
		}
	}
	if q := res.queues; q.reads == 0 || q.failed > 0 || res.backlog.total() != 0 || len(res.cpu) == 0 {
		t.Errorf("queues %s (%d of %d reads failed: %s), backlog at start %s, CPU %v", q.peak, q.failed, q.reads, q.err, res.backlog, res.cpu)
	}
	checkInstalls(t, installs)
	ep, err := hooks.GetEndpoint(ctx, &webhookv1.GetEndpointRequest{Scope: scope})
	if err != nil || ep.GetUrl() != previous {
		t.Errorf("endpoint after the phase %q (%v), want %q back", ep.GetUrl(), err, previous)
	}
}
