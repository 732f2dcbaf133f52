package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestMeasureWakeCost(t *testing.T) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	c := measureWakeCost(context.Background())
	if c.err != nil {
		t.Fatalf("measureWakeCost: %v", c.err)
	}
	if c.sameCore <= 0 {
		t.Errorf("same-core round trip %v, want > 0", c.sameCore)
	}
	if multi := allowed.Count() > 1; multi != (c.crossCore > 0) {
		t.Errorf("%d CPUs allowed, cross-core round trip %v", allowed.Count(), c.crossCore)
	}
}

// A thread that cannot be pinned must not leave the other waiting forever
// on its pipe: both sides' failures come back as an error.
func TestPipeRoundTripReportsAFailedSide(t *testing.T) {
	const noSuchCPU = 1023
	for _, cpus := range [][2]int{{noSuchCPU, 0}, {0, noSuchCPU}} {
		done := make(chan error, 1)
		go func() {
			_, err := pipeRoundTrip(cpus[0], cpus[1], 10)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "CPU 1023") {
				t.Errorf("pinned to CPUs %v: err %v, want one naming CPU 1023", cpus, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("pinned to CPUs %v: still waiting after 10s", cpus)
		}
	}
}

func TestReportWakeLine(t *testing.T) {
	for _, tc := range []struct {
		wake wakeCost
		want string
	}{
		{wakeCost{crossCore: 61 * time.Microsecond, sameCore: 6 * time.Microsecond}, "**61 µs a round trip with the threads on two CPUs**, 6 µs with both on one."},
		{wakeCost{sameCore: 7 * time.Microsecond}, "7 µs a round trip on one CPU; one CPU only"},
		{wakeCost{err: errors.New("pin a thread to CPU 1: operation not permitted")}, "not measured (pin a thread to CPU 1: operation not permitted)."},
	} {
		md := report{wake: tc.wake}.markdown()
		if !strings.Contains(md, "## Machine") || !strings.Contains(md, tc.want) {
			t.Errorf("report with %+v lacks %q:\n%s", tc.wake, tc.want, md)
		}
	}
}
