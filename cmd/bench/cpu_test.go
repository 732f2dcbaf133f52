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
	if total.perRequest < self.perRequest || rest.perRequest < 0 || total.name != "total" {
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
