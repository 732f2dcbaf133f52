// Package telemetrytest helps tests read what a service logs.
package telemetrytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"
)

// LogBuffer collects a service's log lines, which request goroutines write
// concurrently; pass it as telemetry.Setup's log output.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Listening returns a writer to pass as a service's log output, and
// channels that receive the addresses from its "listening" log lines: the
// service's own, and its separate metrics listener's when METRICS_ADDR is
// set. It is how a test learns the ports a service bound on port 0. Close
// the writer when the service has returned.
func Listening() (w io.WriteCloser, addr, metricsAddr <-chan string) {
	r, pw := io.Pipe()
	api, metrics := make(chan string, 1), make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var line struct{ Msg, Addr, Serving string }
			if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "listening" {
				continue
			}
			to := api
			if line.Serving == "metrics" {
				to = metrics
			}
			select {
			case to <- line.Addr:
			default:
			}
		}
		// Drain, so the service never blocks on its log after a scan error.
		_, _ = io.Copy(io.Discard, r)
	}()
	return pw, api, metrics
}
