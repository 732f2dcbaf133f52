package main

import (
	"crypto/sha256"
	"os"
	"testing"
	"time"
)

func TestCPUMeterAttributesBusyTimeToProcesses(t *testing.T) {
	m := startCPUMeter([]proc{{"self", os.Getpid()}})
	// Burn about 200 ms of CPU so the 10 ms clock tick can see it.
	deadline := time.Now().Add(200 * time.Millisecond)
	sum := sha256.Sum256(nil)
	for time.Now().Before(deadline) {
		sum = sha256.Sum256(sum[:])
	}
	shares, use := m.perRequest(10)
	if len(shares) != 3 {
		t.Fatalf("shares %+v, want self, everything else, total", shares)
	}
	self, rest, total := shares[0], shares[1], shares[2]
	if self.perRequest < 5*time.Millisecond { // >= 50 ms over 10 requests
		t.Fatalf("self %s per request, want at least 5ms", self.perRequest)
	}
	// A process's CPU time is measured by the scheduler, the machine's in
	// clock ticks, part of which go to "steal" on a shared host: the total
	// may come out a tick or a stolen share below one process's time, but
	// not far below.
	slack := max(2*clockTick/10, total.perRequest/4)
	if total.perRequest+slack < self.perRequest || rest.perRequest < 0 || total.name != "total" {
		t.Fatalf("inconsistent shares %+v", shares)
	}
	// 200 ms of one core's work within about 200 ms of the machine's.
	if use.busy <= 0 || use.busy > 1 || use.steal < 0 || use.busy+use.steal > 1 {
		t.Fatalf("machine usage %+v: busy must be a positive share, and busy plus stolen at most all of it", use)
	}
	if shares, _ := startCPUMeter([]proc{{"gone", 1 << 30}}).perRequest(1); shares != nil {
		t.Fatal("an unreadable process must give no table, not a wrong one")
	}
}
