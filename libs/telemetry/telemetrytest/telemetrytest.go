// Package telemetrytest helps tests read what a service logs.
package telemetrytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"testing"
	"time"
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

// Listening returns a writer to pass as a service's log output, and the
// Listeners that learn from its "listening" log lines where it listens:
// how a test finds the ports a service bound on port 0. Close the writer
// when the service has returned.
func Listening() (io.WriteCloser, *Listeners) {
	r, w := io.Pipe()
	l := &Listeners{addr: make(chan string, 1), metricsAddr: make(chan string, 1)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var line struct{ Msg, Addr, Serving string }
			if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "listening" {
				continue
			}
			to := l.addr
			if line.Serving == "metrics" {
				to = l.metricsAddr
			}
			select {
			case to <- line.Addr:
			default:
			}
		}
		// Drain, so the service never blocks on its log after a scan error.
		_, _ = io.Copy(io.Discard, r)
	}()
	return w, l
}

// Listeners are the addresses a service logged as it started listening.
type Listeners struct{ addr, metricsAddr chan string }

// Wait returns the service's address and, when withMetrics, its separate
// metrics listener's (METRICS_ADDR). It fails the test if the service
// returns first, its error arriving on exited, or has not listened within
// 30 s.
func (l *Listeners) Wait(t testing.TB, exited <-chan error, withMetrics bool) (addr, metricsAddr string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for addr == "" || withMetrics && metricsAddr == "" {
		select {
		case addr = <-l.addr:
		case metricsAddr = <-l.metricsAddr:
		case err := <-exited:
			t.Fatalf("the service returned before listening: %v", err)
		case <-timeout:
			t.Fatal("the service did not listen within 30 s")
		}
	}
	return addr, metricsAddr
}
