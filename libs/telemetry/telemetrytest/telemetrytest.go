// Package telemetrytest helps tests read what a service logs.
package telemetrytest

import (
	"bytes"
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
