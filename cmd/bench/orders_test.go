package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// orderServer accepts the bench's orders: POST /v1/orders with key
// sk_test, a JSON body of exactly want, and an Idempotency-Key, each
// counted. hangUp, when set, decides whether to end a connection without
// answering, given how many requests that connection carried before.
func orderServer(t *testing.T, want []byte, hangUp func(earlier int) bool) (url string, keys map[string]int, mu *sync.Mutex) {
	t.Helper()
	keys, mu = map[string]int{}, new(sync.Mutex)
	perConn := map[net.Conn]int{}
	type connKey struct{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.Method != http.MethodPost || r.URL.Path != "/v1/orders" || r.Header.Get("Authorization") != "Bearer sk_test" ||
			r.Header.Get("Content-Type") != "application/json" || r.ContentLength != int64(len(want)) || !bytes.Equal(body, want) {
			t.Errorf("unexpected request %s %s %q (%v)", r.Method, r.URL, body, r.Header)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		nc := r.Context().Value(connKey{}).(net.Conn)
		mu.Lock()
		keys[key]++
		earlier := perConn[nc]
		perConn[nc]++
		mu.Unlock()
		if hangUp != nil && hangUp(earlier) {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"data":{"id":"o1"}}`))
	}))
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) }
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + "/v1/orders", keys, mu
}

// Every order carries a key no other carries: a repeated key would be a
// replay, not an order.
func TestEveryOrderHasItsOwnIdempotencyKey(t *testing.T) {
	body := []byte(`{"plan_id":"p1","quantity":1}`)
	url, keys, mu := orderServer(t, body, nil)
	tg, err := newOrderTarget("orders", url, "sk_test", "bench-ab12-q1-", body)
	if err != nil {
		t.Fatal(err)
	}
	res := closedLoop(context.Background(), tg, 4, 200*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if res.Requests < 20 || res.Errors != 0 || len(keys) != res.Requests {
		t.Fatalf("%d requests, %d errors (%s), %d distinct keys", res.Requests, res.Errors, res.FirstErr, len(keys))
	}
	for k, n := range keys {
		seq, ok := strings.CutPrefix(k, "bench-ab12-q1-")
		if _, err := strconv.ParseUint(seq, 10, 64); !ok || err != nil || n != 1 {
			t.Errorf("key %q sent %d times", k, n)
		}
	}
}

// An order whose connection broke before its answer goes again with the
// same key, so the platform replays it rather than placing a second.
func TestAnOrderSentAgainKeepsItsKey(t *testing.T) {
	body := []byte(`{"plan_id":"p1","quantity":50}`)
	// Every second request of a connection is read, then left unanswered.
	url, keys, mu := orderServer(t, body, func(earlier int) bool { return earlier == 1 })
	tg, err := newOrderTarget("orders", url, "sk_test", "k-", body)
	if err != nil {
		t.Fatal(err)
	}
	res := closedLoop(context.Background(), tg, 1, 100*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	twice := 0
	for k, n := range keys {
		switch n {
		case 1:
		case 2:
			twice++
		default:
			t.Errorf("key %q sent %d times", k, n)
		}
	}
	if res.Errors != 0 || len(keys) != res.Requests || twice == 0 {
		t.Errorf("%d requests, %d errors (%s), %d keys of which %d sent again: want every request answered, some after going again with their key",
			res.Requests, res.Errors, res.FirstErr, len(keys), twice)
	}
}

func TestOnlySelectsThePhases(t *testing.T) {
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"-help"}, func(string) string { return "" }, io.Discard, &stderr)
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(stderr.String(), "-only phases") || !strings.Contains(stderr.String(), "POST /v1/orders against pgbench") {
		t.Errorf("-help does not document -only (%v):\n%s", err, stderr.String())
	}
	if err := run(context.Background(), []string{"-only", "everything"}, func(string) string { return "" }, io.Discard, io.Discard); err == nil {
		t.Error("-only everything accepted")
	}
	for only, want := range map[string][2]bool{"": {true, true}, onlyPlans: {true, false}, onlyOrders: {false, true}} {
		c := config{only: only}
		if c.runs(onlyPlans) != want[0] || c.runs(onlyOrders) != want[1] {
			t.Errorf("-only %q: plans %v, orders %v", only, c.runs(onlyPlans), c.runs(onlyOrders))
		}
	}
}

// orderRow is a measurement with one closed loop per concurrency given,
// each of n successful requests in one second at the p50 and p99 given.
func orderRow(name string, runs ...closedRun) measurement {
	return measurement{name: name, closedRuns: runs}
}

func loop(workers, n int, p50, p99 time.Duration) closedRun {
	return closedRun{workers: workers, result: result{Requests: n, Elapsed: time.Second, P50: p50, P99: p99}}
}

func TestReportOrders(t *testing.T) {
	ms := time.Millisecond
	orders := &orderResults{
		planID: "plan-1", orderID: "order-1", orderBytes: 1234, pgbenchMaxClients: 40,
		createOne:   orderRow(orderOneTarget, loop(8, 250, 20*ms, 60*ms), loop(32, 300, 90*ms, 200*ms)),
		createFifty: orderRow(orderFiftyTarget, loop(32, 75, 400*ms, 900*ms)),
		pgbench: orderRow(pgbenchTarget, loop(8, 1100, 7*ms, 15*ms),
			closedRun{workers: 64, clients: 40, result: result{Requests: 1000, Elapsed: time.Second, P50: 30 * ms, P99: 80 * ms}}),
		createMany:  orderRow(ordersManyTarget, loop(8, 400, 20*ms, 60*ms), loop(32, 600, 50*ms, 100*ms)),
		pgbenchMany: orderRow(pgbenchManyTarget, loop(8, 1000, 7*ms, 15*ms), loop(32, 1000, 30*ms, 80*ms)),
		readGateway: orderRow(orderReadTarget, loop(8, 900, 5*ms, 12*ms), loop(32, 1000, 25*ms, 50*ms)),
		readBare:    orderRow(bareReadTarget, loop(8, 5000, ms, 3*ms), loop(32, 4000, 6*ms, 15*ms)),
	}
	orders.createOne.closedRuns[0].result.Requests, orders.createOne.closedRuns[0].result.Errors, orders.createOne.closedRuns[0].result.FirstErr = 260, 10, "HTTP 402"
	r := report{cfg: config{duration: time.Second, warmup: time.Second, workers: []int{8, 32, 64}, trials: 1, only: onlyOrders}, cpus: 2, goVersion: "go1.26", orders: orders}
	md := r.markdown()
	for _, want := range []string{
		"-concurrency 8,32,64 -only orders`",
		"## Orders\n\n`POST /v1/orders` of 1 eSIM of plan plan-1 through the gateway for one partner, then for 64 partners at once, each against pgbench running an order's writes on one balance, then on 64 (up to 40 clients)",
		"(1234-byte JSON answer)", "closed loops of 8,32,64 workers for 1s each, each phase once the last one's events are delivered ([method](docs/benchmarks.md#orders)).",
		"| gateway POST /v1/orders (1 eSIM), 64 partners | 600 | 32 | 50.00 ms | 100.00 ms | 0 |",
		"| gateway POST /v1/orders (1 eSIM) | 300 | 32 | 90.00 ms | 200.00 ms | 10 |",
		"| gateway POST /v1/orders (50 eSIMs) | 75 | 32 | 400.00 ms | 900.00 ms | 0 |",
		"| pgbench order-shaped transaction | 1100 | 8 | 7.00 ms | 15.00 ms | 0 |",
		"| gateway GET /v1/orders/{id} | 1000 | 32 | 25.00 ms | 50.00 ms | 0 |",
		"| bare net/http GET /v1/orders/{id} | 5000 | 8 | 1.00 ms | 3.00 ms | 0 |",
		"| row | 8 workers | 32 workers | 64 workers |",
		"| gateway POST /v1/orders (50 eSIMs) | - | 75 | - |", "| pgbench order-shaped transaction | 1100 | - | 1000 |",
		"Orders / pgbench: **0.27** (300 orders/s / 1100 transactions/s); by concurrency 8: 0.23, 32: -, 64: -",
		"64 partners' orders / pgbench on 64 balances: **0.60** (600 orders/s / 1000 transactions/s); by concurrency 8: 0.40, 32: 0.60, 64: -",
		"Reads, gateway / bare: **0.20** (1000 / 5000 req/s)",
		"A 50-eSIM order costs **4.00** times a 1-eSIM one: 75 against 300 orders/s at 32 workers (3750 against 300 eSIMs/s); its p50 is 4.44 times (400.00 ms against 90.00 ms).",
		"| Orders | gateway POST /v1/orders (1 eSIM) / pgbench order-shaped transactions, per second, one partner, 8 workers: >= 0.50 | 0.23 | not met |",
		"| Orders | gateway POST /v1/orders (1 eSIM) / pgbench order-shaped transactions, per second, one partner, 32 workers: >= 0.50 | - | not met |",
		"| Orders | gateway POST /v1/orders (1 eSIM) / pgbench order-shaped transactions, per second, 64 partners, 8 workers: >= 0.50 | 0.40 | not met |",
		"| Orders | gateway POST /v1/orders (1 eSIM) / pgbench order-shaped transactions, per second, 64 partners, 32 workers: >= 0.50 | 0.60 | met |",
		"| Orders | gateway GET /v1/orders/{id} at 32 workers / at its best: >= 0.90 | 1.00 | met |",
		"| Orders | gateway GET /v1/orders/{id} / bare net/http, requests per second: >= 0.25 | 0.20 | not met |",
		"| Orders | cost of a 50-eSIM order / a 1-eSIM order (orders/s of 1 eSIM / orders/s of 50): <= 5.00 | 4.00 | met |",
		"Errors, which count against each row's rate: gateway POST /v1/orders (1 eSIM) 10 (e.g. HTTP 402).",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	// Without plan rows, none of their sections.
	for _, unwanted := range []string{"## Plans", "## CPU per request", "How the gateway keeps up", "GET /v1/plans/"} {
		if strings.Contains(md, unwanted) {
			t.Errorf("an orders-only report has %q:\n%s", unwanted, md)
		}
	}

	// pgbench capped by the server's connections says so where it was best;
	// a 50-eSIM order too dear, or none at all, misses its goal.
	orders.pgbench.closedRuns[1].result.Requests = 2000
	orders.createFifty.closedRuns[0].result.Requests = 50
	md = r.markdown()
	for _, want := range []string{
		"| pgbench order-shaped transaction | 2000 | 64 (40 clients) |",
		"Orders / pgbench: **0.15** (300 orders/s / 2000 transactions/s)",
		"(orders/s of 1 eSIM / orders/s of 50): <= 5.00 | 6.00 | not met |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	orders.createFifty.closedRuns[0].result.Errors = 50
	orders.createFifty.closedRuns[0].result.FirstErr = "HTTP 402"
	md = r.markdown()
	for _, want := range []string{"No 50-eSIM order succeeded (e.g. HTTP 402)", "(orders/s of 1 eSIM / orders/s of 50): <= 5.00 | - | not met |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if rows := r.allRows(); len(rows) != 7 || rows[0].name != orderOneTarget {
		t.Errorf("allRows: %d rows", len(rows))
	}
}
