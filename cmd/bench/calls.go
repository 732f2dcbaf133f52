package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// backendCalls is what the gateway's /metrics says of its calls to one
// backend so far (libs/telemetry's BatchObserver): every call, every
// outcome.
type backendCalls struct {
	calls   float64 // calls sent
	callers float64 // requests those calls served
	seconds float64 // the calls' summed duration
}

// perCall is the mean batch: requests served per call, or 0 with no call.
func (c backendCalls) perCall() float64 {
	if c.calls <= 0 {
		return 0
	}
	return c.callers / c.calls
}

// meanCall is how long a call took on average, or 0 with no call.
func (c backendCalls) meanCall() time.Duration {
	if c.calls <= 0 {
		return 0
	}
	return time.Duration(c.seconds / c.calls * float64(time.Second))
}

func (c backendCalls) minus(before backendCalls) backendCalls {
	return backendCalls{c.calls - before.calls, c.callers - before.callers, c.seconds - before.seconds}
}

// callStats are the gateway's calls to each of its backends.
type callStats struct {
	catalogue, redis backendCalls
}

func (c callStats) minus(before callStats) callStats {
	return callStats{c.catalogue.minus(before.catalogue), c.redis.minus(before.redis)}
}

// The series BatchObserver writes, as the Prometheus exporter names them.
const (
	batchSizeCount  = "backend_call_batch_size_count{"
	batchSizeSum    = "backend_call_batch_size_sum{"
	callDurationSum = "backend_call_duration_seconds_sum{"
)

// readCalls reads the gateway's /metrics at gatewayURL for what its calls
// to the catalogue and to Redis have carried so far.
func readCalls(ctx context.Context, gatewayURL string) (callStats, error) {
	var stats callStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gatewayURL+"/metrics", nil)
	if err != nil {
		return stats, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return stats, fmt.Errorf("read gateway metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return stats, fmt.Errorf("read gateway metrics: %s", resp.Status)
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		var backend *backendCalls
		switch {
		case strings.Contains(line, `backend="catalogue"`):
			backend = &stats.catalogue
		case strings.Contains(line, `backend="redis"`):
			backend = &stats.redis
		default:
			continue
		}
		var total *float64
		switch {
		case strings.HasPrefix(line, batchSizeCount):
			total = &backend.calls
		case strings.HasPrefix(line, batchSizeSum):
			total = &backend.callers
		case strings.HasPrefix(line, callDurationSum):
			total = &backend.seconds
		default:
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return stats, fmt.Errorf("gateway metrics: %q: %w", line, err)
		}
		// Durations come one series per outcome: a backend's calls are
		// their sum.
		*total += v
	}
	if err := lines.Err(); err != nil {
		return stats, fmt.Errorf("read gateway metrics: %w", err)
	}
	return stats, nil
}
