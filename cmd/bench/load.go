package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// result is one load phase against one target.
type result struct {
	Requests int           // completed requests, errors included
	Errors   int           // non-2xx answers and transport failures
	FirstErr string        // an example, for the report
	Elapsed  time.Duration // wall time of the phase
	P50, P99 time.Duration
	// P90 and Max complete the spread where a table shows it whole.
	P90, Max time.Duration
	// Rate is the offered rate of an open-loop phase, 0 for closed loops.
	Rate float64
	// CPU is the CPU time per request during the phase, by process, and
	// Usage the machine's; both filled in by the caller, which knows the
	// processes.
	CPU   []cpuShare
	Usage usage
	// Calls are the gateway's calls to its backends during the phase
	// (gateway only), also filled in by the caller.
	Calls callStats
}

func (r result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests-r.Errors) / r.Elapsed.Seconds()
}

// recorder collects one worker's samples without locking; merge combines
// them once the phase is over.
type recorder struct {
	latencies []time.Duration
	errors    int
	firstErr  string
}

func (r *recorder) record(d time.Duration, err error) {
	r.latencies = append(r.latencies, d)
	if err != nil {
		r.errors++
		if r.firstErr == "" {
			r.firstErr = err.Error()
		}
	}
}

func merge(recs []*recorder, elapsed time.Duration) result {
	var all []time.Duration
	res := result{Elapsed: elapsed}
	for _, r := range recs {
		all = append(all, r.latencies...)
		res.Errors += r.errors
		if res.FirstErr == "" {
			res.FirstErr = r.firstErr
		}
	}
	res.Requests = len(all)
	slices.Sort(all)
	res.P50, res.P90, res.P99, res.Max = quantile(all, 50), quantile(all, 90), quantile(all, 99), quantile(all, 100)
	return res
}

// quantile is the q-th percentile of sorted, nearest rank below, or 0 for
// no sample.
func quantile(sorted []time.Duration, q int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*q/100]
}

// target is what a phase requests: one URL, with or without a key.
type target struct {
	name string
	addr string // host:port
	// request is the whole HTTP/1.1 request, serialized once: every
	// request of a phase is the same. Unused when build is set.
	request []byte
	// build, when set, makes each request instead, appending it to dst:
	// n is unique to the request among all of the target's connections
	// (seq, shared by every copy of the target).
	build   func(dst []byte, n uint64) []byte
	seq     *atomic.Uint64
	timeout time.Duration // of one request (requestTimeout)
	// throttled, set on order targets, counts the 429s of the account's
	// cap of orders in flight, each sent again after throttlePause as a
	// partner's client would: a closed loop of more workers than the cap
	// measures the orders the platform completes, not its refusals.
	throttled *atomic.Uint64
	// spread, when set, are the targets a closed loop's workers take in
	// turn: worker i sends spread[i % len(spread)]'s requests, as the
	// many-partner row's workers each order for a partner of their own.
	spread []target
}

// forWorker is the target closed-loop worker i sends to.
func (t target) forWorker(i int) target {
	if len(t.spread) == 0 {
		return t
	}
	return t.spread[i%len(t.spread)]
}

// throttlePause is how long an order refused for its account's orders in
// flight waits before it goes again: about one sandbox order's time, not
// the Retry-After a partner is told, which would idle the worker.
const throttlePause = 5 * time.Millisecond

// requestTimeout bounds one request, so a target that hangs fails the
// request instead of the benchmark.
const requestTimeout = 10 * time.Second

func newTarget(name, rawURL, bearer string) (target, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return target{}, fmt.Errorf("%s: want an http:// URL, got %q", name, rawURL)
	}
	req := "GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: esim-bench\r\n"
	if bearer != "" {
		req += "Authorization: Bearer " + bearer + "\r\n"
	}
	return target{name: name, addr: u.Host, request: []byte(req + "\r\n"), timeout: requestTimeout}, nil
}

// newOrderTarget is a POST of body as JSON, each request with its own
// Idempotency-Key: keyPrefix and a number no other request of the target
// carries. Everything but the number is serialized once, so a request
// costs the generator a copy into its connection's buffer, not an
// allocation.
func newOrderTarget(name, rawURL, bearer, keyPrefix string, body []byte) (target, error) {
	t, err := newTarget(name, rawURL, bearer)
	if err != nil {
		return target{}, err
	}
	// The GET's request line and headers, without the blank line that
	// ends them, made the POST's.
	get := string(t.request[:len(t.request)-len("\r\n")])
	head := []byte("POST" + get[len("GET"):] + "Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\nIdempotency-Key: " + keyPrefix)
	tail := append([]byte("\r\n\r\n"), body...)
	t.request = nil
	t.seq = new(atomic.Uint64)
	t.throttled = new(atomic.Uint64)
	t.build = func(dst []byte, n uint64) []byte {
		dst = append(dst, head...)
		dst = strconv.AppendUint(dst, n, 10)
		return append(dst, tail...)
	}
	return t, nil
}

// conn is one worker's keep-alive connection to a target, as one
// connection of a partner's client pool. The worker's own goroutine writes
// the request and reads the answer. net/http's client hands every request
// to two more goroutines (the connection's reader and writer), and the
// load generator shares the cores with everything it measures: every bit
// of its CPU per request is taken from the target.
type conn struct {
	target
	nc net.Conn
	br *bufio.Reader
	// req is the request do is sending, built into buf when the target
	// builds each one.
	req, buf []byte
	// unwatch stops the connection being closed when the phase's context
	// ends: the close is what cuts short a request in flight on Ctrl-C.
	unwatch func() bool
}

func (t target) conn() *conn { return &conn{target: t} }

// do sends one request and reads the whole answer, so the measured time
// includes the body; any non-2xx status counts as an error. A failed
// exchange closes the connection. One that found a connection kept from an
// earlier request closed is sent again on a new one, as net/http's client
// does for a GET: the server may have closed it while idle. A timeout is
// not retried. A request sent again is the same bytes: an order goes
// again with its Idempotency-Key, as a partner's retry must, so it is
// never placed twice.
func (c *conn) do(ctx context.Context) error {
	c.req = c.request
	if c.build != nil {
		c.buf = c.build(c.buf[:0], c.seq.Add(1))
		c.req = c.buf
	}
	for {
		reused := c.nc != nil
		status, err := c.exchange(ctx)
		if err != nil && reused && ctx.Err() == nil && connClosed(err) {
			status, err = c.exchange(ctx)
		}
		if err != nil {
			return err
		}
		if status != http.StatusTooManyRequests || c.throttled == nil || ctx.Err() != nil {
			return statusError(status)
		}
		c.throttled.Add(1)
		time.Sleep(throttlePause)
	}
}

// statusError is nil for a 2xx status.
func statusError(status int) error {
	if status < 200 || status > 299 {
		return fmt.Errorf("HTTP %d", status)
	}
	return nil
}

// connClosed reports an error of writing to or reading from a connection
// the other end had closed.
func connClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func (c *conn) exchange(ctx context.Context) (int, error) {
	if c.nc == nil {
		d := net.Dialer{Timeout: c.timeout}
		nc, err := d.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return 0, err
		}
		c.nc, c.br = nc, bufio.NewReader(nc)
		c.unwatch = context.AfterFunc(ctx, func() { nc.Close() })
	}
	status, closing, err := c.roundTrip()
	if err != nil || closing {
		c.close()
	}
	return status, err
}

// roundTrip reports whether the server ends the connection after this
// answer (Connection: close).
func (c *conn) roundTrip() (status int, closing bool, err error) {
	if err := c.nc.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, false, err
	}
	if _, err := c.nc.Write(c.req); err != nil {
		return 0, false, err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0, false, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Close, err
}

func (c *conn) close() {
	if c.nc != nil {
		c.unwatch()
		c.nc.Close()
		c.nc = nil
	}
}

// closedLoop runs workers that each send the next request as soon as the
// previous answer is read: the throughput it reaches is the maximum the
// target sustains at that concurrency. Requests in flight at the end are
// allowed to finish rather than cancelled, so the target never sees (and
// logs) aborted requests that are an artefact of the benchmark.
func closedLoop(ctx context.Context, t target, workers int, d time.Duration) result {
	recs := make([]*recorder, workers)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for i := range recs {
		rec := &recorder{latencies: make([]time.Duration, 0, 1<<14)}
		recs[i] = rec
		wg.Go(func() {
			c := t.forWorker(i).conn()
			defer c.close()
			for ctx.Err() == nil && time.Now().Before(end) {
				began := time.Now()
				err := c.do(ctx)
				rec.record(time.Since(began), err)
			}
		})
	}
	wg.Wait()
	return merge(recs, time.Since(start))
}

// openLoop offers requests at a fixed rate whatever the target's latency,
// over conns connections. Like wrk2, each connection keeps its own share
// of the schedule: request n is due at start + n/rate and goes out on
// connection n mod conns, so arrivals are evenly spaced rather than
// released in bursts by a dispatcher that wakes once a millisecond.
//
// A request sent late because its connection was still waiting for the
// target counts from when it was due (no coordinated omission). A request
// whose connection was idle counts from when the sleep to its due time
// ended: a timer that oversleeps is the generator's lateness, not the
// target's.
func openLoop(ctx context.Context, t target, rate float64, conns int, d time.Duration) result {
	total := int(rate * d.Seconds())
	interval := float64(time.Second) / rate
	recs := make([]*recorder, conns)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range recs {
		rec := &recorder{latencies: make([]time.Duration, 0, total/conns+1)}
		recs[w] = rec
		wg.Go(func() {
			c := t.conn()
			defer c.close()
			for n := w; n < total && ctx.Err() == nil; n += conns {
				due := start.Add(time.Duration(float64(n) * interval))
				from := due
				if wait := time.Until(due); wait > 0 {
					// Not a select on ctx: a wait is one connection's share
					// of the schedule (at most 128 / rate), and a timer
					// channel per request would add to the generator's own
					// cost, which the report uses as the machine's control.
					time.Sleep(wait)
					from = time.Now()
				}
				err := c.do(ctx)
				rec.record(time.Since(from), err)
			}
		})
	}
	wg.Wait()
	res := merge(recs, time.Since(start))
	res.Rate = rate
	return res
}
