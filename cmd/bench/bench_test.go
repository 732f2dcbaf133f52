package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// flaky answers 500 to every fourth request and takes about 1 ms.
func flaky() (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sk_test" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		time.Sleep(time.Millisecond)
		if n.Add(1)%4 == 0 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(`{"data":{}}`))
	}))
	return srv, &n
}

func mustTarget(t *testing.T, name, url, bearer string) target {
	t.Helper()
	tg, err := newTarget(name, url, bearer)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func TestClosedLoopCountsNon2xxAsErrors(t *testing.T) {
	srv, served := flaky()
	defer srv.Close()
	res := closedLoop(context.Background(), mustTarget(t, "flaky", srv.URL, "sk_test"), 4, 500*time.Millisecond)
	if res.Requests < 100 || int64(res.Requests) != served.Load() {
		t.Fatalf("requests %d, server saw %d", res.Requests, served.Load())
	}
	if want := res.Requests / 4; res.Errors < want-4 || res.Errors > want+4 || !strings.Contains(res.FirstErr, "HTTP 500") {
		t.Errorf("errors %d (%q), want about %d", res.Errors, res.FirstErr, want)
	}
	if res.P50 < time.Millisecond || res.P99 < res.P50 {
		t.Errorf("p50 %s p99 %s", res.P50, res.P99)
	}
	if rps := res.RPS(); rps <= 0 || rps > float64(res.Requests)/0.5 {
		t.Errorf("RPS %.0f from %d requests in %s", rps, res.Requests, res.Elapsed)
	}

	unauthorized := closedLoop(context.Background(), mustTarget(t, "no key", srv.URL, ""), 1, 100*time.Millisecond)
	if unauthorized.Errors != unauthorized.Requests || unauthorized.RPS() != 0 {
		t.Errorf("401s must all be errors: %+v", unauthorized)
	}
}

// planServer answers the bench's request for /v1/plans/p1?x=1 with key
// sk_test, counting requests and connections. closeEveryOther ends every
// second answer's connection (Connection: close); idleTimeout, when set,
// drops a connection idle that long.
func planServer(t *testing.T, closeEveryOther bool, idleTimeout time.Duration) (url string, served, conns *atomic.Int64) {
	served, conns = new(atomic.Int64), new(atomic.Int64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sk_test" || r.URL.RequestURI() != "/v1/plans/p1?x=1" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if served.Add(1)%2 == 0 && closeEveryOther {
			w.Header().Set("Connection", "close")
		}
		_, _ = w.Write([]byte(`{"data":{}}`))
	}))
	srv.Config.IdleTimeout = idleTimeout
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + "/v1/plans/p1?x=1", served, conns
}

// A server that ends a connection after its answer costs a dial, not a
// failed request.
func TestWorkersDialAgainWhenTheServerClosesTheConnection(t *testing.T) {
	url, served, conns := planServer(t, true, 0)
	res := closedLoop(context.Background(), mustTarget(t, "closing", url, "sk_test"), 2, 200*time.Millisecond)
	if res.Requests < 20 || res.Errors != 0 || int64(res.Requests) != served.Load() {
		t.Fatalf("%d requests (server saw %d), %d errors (%s): a closed connection must be dialled again", res.Requests, served.Load(), res.Errors, res.FirstErr)
	}
	if got := conns.Load(); got < int64(res.Requests)/2 {
		t.Errorf("%d connections for %d requests, half of them answered with Connection: close", got, res.Requests)
	}
}

// A connection the server dropped while idle fails only the exchange on
// it: the request goes again on a new connection.
func TestWorkersResendOnAConnectionDroppedWhileIdle(t *testing.T) {
	url, served, conns := planServer(t, false, 5*time.Millisecond)
	// One connection, a request every 25 ms: each finds the last dropped.
	res := openLoop(context.Background(), mustTarget(t, "idle", url, "sk_test"), 40, 1, 250*time.Millisecond)
	if res.Requests != 10 || res.Errors != 0 || served.Load() != 10 {
		t.Errorf("%d requests (server saw %d), %d errors (%s), want 10 and none", res.Requests, served.Load(), res.Errors, res.FirstErr)
	}
	if got := conns.Load(); got < 5 {
		t.Errorf("%d connections: the server's idle timeout did not drop them, so this test proves nothing", got)
	}
}

// A request that timed out is not sent again: only a connection found
// closed is.
func TestATimedOutRequestIsNotResent(t *testing.T) {
	var arrived atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) > 1 {
			<-r.Context().Done() // every request after the first hangs
		}
	}))
	defer srv.Close()
	tg := mustTarget(t, "hangs", srv.URL, "")
	tg.timeout = 100 * time.Millisecond
	// One connection, three requests: the second goes on the first's
	// connection and times out; the third dials anew and times out.
	res := openLoop(context.Background(), tg, 10, 1, 300*time.Millisecond)
	if res.Requests != 3 || res.Errors != 2 {
		t.Fatalf("%d requests, %d errors (%s), want 3 and 2", res.Requests, res.Errors, res.FirstErr)
	}
	if got := arrived.Load(); got != 3 {
		t.Errorf("the server saw %d requests for 3 sent", got)
	}
}

// Ctrl-C must not wait for answers that are not coming.
func TestCancellingAPhaseCutsTheRequestsInFlight(t *testing.T) {
	arrived := make(chan struct{}, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done() // answers nothing until the client hangs up
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result)
	go func() { done <- closedLoop(ctx, mustTarget(t, "hung", srv.URL, ""), 2, time.Hour) }()
	<-arrived
	<-arrived
	cancel()
	select {
	case res := <-done:
		if res.Requests != 2 || res.Errors != 2 {
			t.Errorf("%d requests, %d errors: want the 2 in flight, failed", res.Requests, res.Errors)
		}
	case <-time.After(requestTimeout / 2):
		t.Fatalf("the phase still waits %s after its context ended", requestTimeout/2)
	}
}

func TestTargetsMustBePlainHTTPURLs(t *testing.T) {
	for _, u := range []string{"https://127.0.0.1:8080/v1/plans/x", "127.0.0.1:8080/v1", "http:///v1", "http://[::1/x"} {
		if _, err := newTarget("bad", u, ""); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}

func TestOpenLoopOffersTheRequestedRate(t *testing.T) {
	srv, served := flaky()
	defer srv.Close()
	res := openLoop(context.Background(), mustTarget(t, "flaky", srv.URL, "sk_test"), 400, 16, time.Second)
	if res.Requests != 400 || served.Load() != 400 {
		t.Fatalf("sent %d, server saw %d, want 400", res.Requests, served.Load())
	}
	if res.Elapsed < 900*time.Millisecond || res.Elapsed > 2*time.Second {
		t.Errorf("400 requests at 400/s took %s", res.Elapsed)
	}
	if res.Errors != 100 {
		t.Errorf("errors %d, want 100", res.Errors)
	}
}

// An overloaded target must show its queueing in the open-loop latency.
func TestOpenLoopMeasuresFromTheScheduledTime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(10 * time.Millisecond)
	}))
	defer srv.Close()
	// One worker can do about 100/s; 300/s are offered for half a second.
	res := openLoop(context.Background(), mustTarget(t, "slow", srv.URL, ""), 300, 1, 500*time.Millisecond)
	if res.P99 < 500*time.Millisecond {
		t.Errorf("p99 %s hides the queue of a target serving a third of the offered rate", res.P99)
	}
}

func TestReportMarksTargets(t *testing.T) {
	trials := func(rate float64, p99s ...time.Duration) []result {
		out := make([]result, len(p99s))
		for i, p := range p99s {
			out[i] = result{Requests: int(rate), Rate: rate, P99: p, Elapsed: time.Second}
		}
		return out
	}
	// closed builds one closed loop per concurrency of the config (8, 32),
	// with the given successful requests in one second.
	row := func(name string, closed []int, open []result) measurement {
		m := measurement{name: name, loads: []openLoad{{fraction: 0.5, trials: open}, {fraction: 0.25, trials: slices.Clone(open[:1])}}}
		for i, n := range closed {
			m.closedRuns = append(m.closedRuns, closedRun{workers: []int{8, 32}[i], result: result{Requests: n, Elapsed: time.Second}})
		}
		return m
	}
	r := report{
		cfg: config{duration: time.Second, workers: []int{8, 32}, trials: 3}, cpus: 2, goVersion: "go1.26",
		rows: []measurement{
			// One stalled trial (30 ms) does not decide the gateway's p99;
			// the maximum is the best concurrency's, whichever it is.
			row("gateway", []int{200, 300}, trials(150, 4*time.Millisecond, 30*time.Millisecond, 3*time.Millisecond)),
			row("bare net/http", []int{1000, 900}, trials(500, time.Millisecond, time.Millisecond, time.Millisecond)),
		},
		mem: []memory{{name: "gateway", pid: 1, hwm: "20.0 MiB"}},
	}
	r.rows[0].closedRuns[1].result.Calls = callStats{
		catalogue: backendCalls{calls: 60, callers: 300, seconds: 0.12},
		redis:     backendCalls{calls: 30, callers: 300, seconds: 0.015},
	}
	for i := range r.rows[0].loads[0].trials {
		r.rows[0].loads[0].trials[i].Calls = callStats{catalogue: backendCalls{calls: 75, callers: 150, seconds: 0.075}}
	}
	cpu := func(generator, gateway, total int) []cpuShare {
		return []cpuShare{{loadGeneratorName, time.Duration(generator) * time.Microsecond}, {"gateway", time.Duration(gateway) * time.Microsecond}, {"total", time.Duration(total) * time.Microsecond}}
	}
	r.rows[0].closedRuns[1].result.CPU = cpu(30, 40, 120)
	r.rows[0].closedRuns[1].result.Usage = usage{busy: 0.97}
	for i := range r.rows[0].loads[0].trials {
		r.rows[0].loads[0].trials[i].CPU = cpu(45, 70, 210)
		r.rows[0].loads[0].trials[i].Usage = usage{busy: 0.85, steal: 0.01 * float64(i)}
	}
	r.rows[0].loads[1].trials[0].CPU = cpu(60, 90, 300)
	r.rows[0].loads[1].trials[0].Usage = usage{busy: 0.8}
	md := r.markdown()
	for _, want := range []string{
		"gateway / bare: **0.30** (300 / 1000 req/s)",
		"| Plans | gateway / bare throughput ratio: >= 0.25 | 0.30 | met |",
		"| Plans | gateway p99 at half of max (median of 3 trials): < 10.00 ms | 4.00 ms | met |",
		"| Plans | control: bare net/http p99 at half of its max (median of 3 trials): < 10.00 ms | 1.00 ms | met (not a target) |",
		"closed loops of 8,32 workers for 1s each, then 3 open-loop trials at 50% and 25% of the best ([method](docs/benchmarks.md#plans)).",
		"| gateway | 300 | 32 |", "| bare net/http | 1000 | 8 |",
		"| 4.00 ms | 4.00 ms, 30.00 ms, 3.00 ms | 0 |",
		"| gateway | 200 | 300 |", "| gateway: plan lookups per catalogue call | - | 5.0 |", "| gateway: mean catalogue call | - | 2.00 ms |",
		"| gateway: rate-limit checks per Redis call | - | 10.0 |", "| gateway: mean Redis call | - | 0.50 ms |",
		// At half of the maximum: the median trial's calls; at a quarter
		// none were read.
		"| gateway's calls | at max (32 workers) | at 50% of max | at 25% of max |",
		"| plan lookups per catalogue call | 5.0 | 2.0 | - |", "| mean catalogue call | 2.00 ms | 1.00 ms | - |",
		"| rate-limit checks per Redis call | 10.0 | - | - |",
		"| gateway | at max (32 workers) | at 50% of max | at 25% of max |", "| total | 120 µs | 210 µs | 300 µs |", "| machine busy | 97% | 85% | 80% |",
		"The load generator's CPU per request was 30 µs at the maximum, 45 µs at 50% of it and 60 µs at 25% of it.",
		"| gateway | 50% of max | 150 | 0.00 ms | 4.00 ms | 4.00 ms, 30.00 ms, 3.00 ms | 85% | 2% | 0 |",
		"| gateway | 25% of max | 150 |",
		"| gateway | 1 | 20.0 MiB |", "nproc): 2", "-concurrency 8,32",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}

	r.rows[0] = row("gateway", []int{200, 150}, trials(100, 12*time.Millisecond, 11*time.Millisecond, 3*time.Millisecond))
	md = r.markdown()
	for _, want := range []string{"| Plans | gateway / bare throughput ratio: >= 0.25 | 0.20 | not met |", "| Plans | gateway p99 at half of max (median of 3 trials): < 10.00 ms | 11.00 ms | not met |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "lookups per catalogue call") {
		t.Errorf("lookups per call reported without a count of calls:\n%s", md)
	}
	const cannotJudge = "on this machine the gateway's latency target cannot be judged"
	if strings.Contains(md, cannotJudge) {
		t.Errorf("the control met its bound, yet the report says the machine cannot judge:\n%s", md)
	}
	// The control missing its bound is said in words.
	r.rows[1] = row("bare net/http", []int{1000, 900}, trials(500, 9*time.Millisecond, 13*time.Millisecond, 12*time.Millisecond))
	md = r.markdown()
	for _, want := range []string{"(median of 3 trials): < 10.00 ms | 12.00 ms | not met (not a target) |", "missed the latency bound at half of its own maximum (12.00 ms): " + cannotJudge} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}

	// An error in any trial fails the latency target, however fast.
	r.rows[0] = row("gateway", []int{300, 300}, trials(150, time.Millisecond, time.Millisecond, time.Millisecond))
	r.rows[0].loads[0].trials[2].Errors, r.rows[0].loads[0].trials[2].FirstErr = 1, "HTTP 502"
	md = r.markdown()
	for _, want := range []string{"(median of 3 trials): < 10.00 ms | 1.00 ms | not met |", "open loop had 1 errors (e.g. HTTP 502)"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestParseWorkers(t *testing.T) {
	if got, err := parseWorkers("16, 64,256"); err != nil || fmt.Sprint(got) != "[16 64 256]" {
		t.Fatalf("parseWorkers: %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "16,x", "-4"} {
		if _, err := parseWorkers(bad); err == nil {
			t.Errorf("parseWorkers(%q) accepted", bad)
		}
	}
}
