package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// result is one load phase against one target.
type result struct {
	Requests int           // completed requests, errors included
	Errors   int           // non-2xx answers and transport failures
	FirstErr string        // an example, for the report
	Elapsed  time.Duration // wall time of the phase
	P50, P99 time.Duration
	// Rate is the offered rate of an open-loop phase, 0 for closed loops.
	Rate float64
	// CPU is the CPU time per request during the phase, by process, and
	// Usage the machine's; both filled in by the caller, which knows the
	// processes.
	CPU   []cpuShare
	Usage usage
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
	if len(all) > 0 {
		slices.Sort(all)
		res.P50 = all[(len(all)-1)*50/100]
		res.P99 = all[(len(all)-1)*99/100]
	}
	return res
}

// target is what a phase requests: one URL, with or without a key.
type target struct {
	name   string
	url    string
	bearer string
	client *http.Client
}

func newTarget(name, url, bearer string, conns int) target {
	// One keep-alive connection per worker, kept between requests, as a
	// partner's HTTP client pool would.
	tr := &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	return target{name: name, url: url, bearer: bearer, client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// do sends one request and reads the whole answer, so the measured time
// includes the body; any non-2xx status counts as an error.
func (t target) do(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return err
	}
	if t.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+t.bearer)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	_, copyErr := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return copyErr
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
			for ctx.Err() == nil && time.Now().Before(end) {
				began := time.Now()
				err := t.do(ctx)
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
				err := t.do(ctx)
				rec.record(time.Since(from), err)
			}
		})
	}
	wg.Wait()
	res := merge(recs, time.Since(start))
	res.Rate = rate
	return res
}
