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

// openLoop offers requests at a fixed rate whatever the target's latency.
// A request waiting for a free worker is the target's doing, so its latency
// counts from the moment it was due (no coordinated omission). The
// dispatcher itself wakes only about once a millisecond (the timer
// granularity of a busy machine), so a request counts from when it was due
// or from when the dispatcher could hand it out, whichever is later: the
// generator's own lateness is not the target's latency.
func openLoop(ctx context.Context, t target, rate float64, poolSize int, d time.Duration) result {
	total := int(rate * d.Seconds())
	// Room for every request, so a slow target fills the queue instead of
	// blocking the dispatcher and hiding its backlog.
	due := make(chan time.Time, total)
	recs := make([]*recorder, poolSize)
	var wg sync.WaitGroup
	for i := range recs {
		rec := &recorder{latencies: make([]time.Duration, 0, 1<<12)}
		recs[i] = rec
		wg.Go(func() {
			for from := range due {
				err := t.do(ctx)
				rec.record(time.Since(from), err)
			}
		})
	}
	start := time.Now()
	sent := 0
	for sent < total && ctx.Err() == nil {
		now := time.Now()
		owed := min(int(now.Sub(start).Seconds()*rate), total)
		for ; sent < owed; sent++ {
			at := start.Add(time.Duration(float64(sent) / rate * float64(time.Second)))
			if at.Before(now) {
				at = now
			}
			due <- at
		}
		time.Sleep(500 * time.Microsecond)
	}
	close(due)
	wg.Wait()
	res := merge(recs, time.Since(start))
	res.Rate = rate
	return res
}
