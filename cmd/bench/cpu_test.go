package main

import (
	"crypto/sha256"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestCPUMeterAttributesBusyTimeToProcesses(t *testing.T) {
	// A fixed amount of CPU rather than of wall-clock time: on a loaded
	// machine 200 ms of wall clock may hold a few ms of CPU. The kernel's
	// own count (getrusage) says when it is spent, so the meter, which
	// reads /proc, is checked against it rather than against itself.
	const burn = 200 * time.Millisecond // 20 clock ticks
	const requests = 4
	m := startCPUMeter([]proc{{"self", os.Getpid()}})
	burned := burnCPU(t, burn, time.Minute)
	shares, use := m.perRequest(requests)
	if len(shares) != 3 {
		t.Fatalf("shares %+v, want self, everything else, total", shares)
	}
	self, rest, total := shares[0], shares[1], shares[2]
	// /proc counts whole clock ticks: the meter may be a tick off at each
	// end of its interval. The interval also holds the moments just
	// before and after the burn, which add a little.
	measured := self.perRequest * requests
	if measured < burned-2*clockTick || measured > burned+burned/10+2*clockTick {
		t.Fatalf("self %s per request over %d requests = %s; the kernel counted %s of this process's CPU",
			self.perRequest, requests, measured, burned)
	}
	// A process's CPU time is measured by the scheduler, the machine's in
	// clock ticks, part of which go to "steal" on a shared host: the total
	// may come out a tick or a stolen share below one process's time, but
	// not far below.
	slack := max(2*clockTick/requests, total.perRequest/4)
	if total.perRequest+slack < self.perRequest || rest.perRequest < 0 || total.name != "total" {
		t.Fatalf("inconsistent shares %+v", shares)
	}
	if use.busy <= 0 || use.busy > 1 || use.steal < 0 || use.busy+use.steal > 1 {
		t.Fatalf("machine usage %+v: busy must be a positive share, and busy plus stolen at most all of it", use)
	}
	if shares, _ := startCPUMeter([]proc{{"gone", 1 << 30}}).perRequest(1); shares != nil {
		t.Fatal("an unreadable process must give no table, not a wrong one")
	}
}

// burnCPU keeps a core busy until this process has used at least half of
// cpu in user mode and half in the kernel, where the services spend much of
// theirs, so that a meter leaving out either comes out far short. It
// returns the CPU used in all, and fails the test if that takes longer than
// wallLimit, which only a machine starving it for that long would cause.
func burnCPU(t *testing.T, cpu, wallLimit time.Duration) time.Duration {
	t.Helper()
	sum := sha256.Sum256(nil)
	page := os.Getpagesize()
	user0, sys0 := ownCPU(t)
	deadline := time.Now().Add(wallLimit)
	for {
		user, sys := ownCPU(t)
		user, sys = user-user0, sys-sys0
		if user >= cpu/2 && sys >= cpu/2 {
			return user + sys
		}
		if time.Now().After(deadline) {
			t.Fatalf("got only %s of user and %s of system CPU in %s of wall-clock time, wanted %s of each",
				user, sys, wallLimit, cpu/2)
		}
		if user < sys {
			for range 1000 {
				sum = sha256.Sum256(sum[:])
			}
			continue
		}
		// Page faults on fresh memory: the kernel maps and zeroes each
		// page. (Reading /dev/zero would not do: under the race
		// detector, checking the buffer costs more user time than the
		// kernel spends filling it.)
		mem, err := syscall.Mmap(-1, 0, 1<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(mem); i += page {
			mem[i] = 1
		}
		if err := syscall.Munmap(mem); err != nil {
			t.Fatal(err)
		}
	}
}

// ownCPU is this process's user and system CPU time as the kernel counts
// it, to the microsecond.
func ownCPU(t *testing.T) (user, sys time.Duration) {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
