package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// wakeCost is what this machine charges for waking a thread that is
// blocked waiting for another. Every hop between two of the platform's
// processes pays it when the other end is idle, so the same code's latency
// differs widely between hosts of the same size: the figure says how much
// of a latency figure is the host.
type wakeCost struct {
	// crossCore is a round trip between threads pinned to two different
	// cores: each read sleeps, and each write wakes the other core. Zero
	// with a single core.
	crossCore time.Duration
	// sameCore is the same round trip with both threads on one core: the
	// two context switches alone.
	sameCore time.Duration
	err      error
}

const (
	wakeRounds = 4000
	wakeTrials = 3
)

// measureWakeCost passes a byte back and forth between two threads through
// pipes, as `perf bench sched pipe` does, on two CPUs and then on one, and
// keeps the median of a few trials of each. It runs before the platform
// starts, on an otherwise quiet machine.
func measureWakeCost(ctx context.Context) wakeCost {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return wakeCost{err: fmt.Errorf("read the CPUs this process may use: %w", err)}
	}
	var cpus []int
	for cpu := 0; cpu < len(allowed)*64 && len(cpus) < 2; cpu++ {
		if allowed.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	if len(cpus) == 0 {
		return wakeCost{err: errors.New("no CPU in this process's affinity mask")}
	}
	var c wakeCost
	c.sameCore, c.err = medianRoundTrip(ctx, cpus[0], cpus[0])
	if c.err == nil && len(cpus) == 2 {
		c.crossCore, c.err = medianRoundTrip(ctx, cpus[0], cpus[1])
	}
	return c
}

func medianRoundTrip(ctx context.Context, cpuA, cpuB int) (time.Duration, error) {
	trials := make([]time.Duration, 0, wakeTrials)
	for range wakeTrials {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		d, err := pipeRoundTrip(cpuA, cpuB, wakeRounds)
		if err != nil {
			return 0, err
		}
		trials = append(trials, d)
	}
	slices.Sort(trials)
	return trials[len(trials)/2], nil
}

// pipeRoundTrip returns the mean time for a byte to go from a thread on
// cpuA to one on cpuB and back. The pipes are blocking and read with plain
// system calls, not through Go's netpoller, so each turn is the kernel
// waking a sleeping thread and nothing else.
func pipeRoundTrip(cpuA, cpuB, rounds int) (time.Duration, error) {
	var there, back [2]int // [0] reads, [1] writes
	// Close-on-exec: a process started meanwhile must not hold a write
	// end open, or a side that fails would leave the other reading forever.
	if err := unix.Pipe2(there[:], unix.O_CLOEXEC); err != nil {
		return 0, fmt.Errorf("pipe: %w", err)
	}
	if err := unix.Pipe2(back[:], unix.O_CLOEXEC); err != nil {
		unix.Close(there[0])
		unix.Close(there[1])
		return 0, fmt.Errorf("pipe: %w", err)
	}
	defer unix.Close(there[0])
	defer unix.Close(back[0])

	// Each side closes its write end when it stops, so a side that fails
	// lets the other's read see the end of its pipe instead of waiting
	// forever. Both goroutines keep their threads locked to the end: the
	// runtime then retires the threads, so their pinning cannot leak to
	// other goroutines.
	echoed := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer unix.Close(back[1])
		echoed <- echo(cpuB, there[0], back[1], rounds)
	}()
	type timing struct {
		d   time.Duration
		err error
	}
	timed := make(chan timing, 1)
	go func() {
		runtime.LockOSThread()
		defer unix.Close(there[1])
		d, err := ping(cpuA, there[1], back[0], rounds)
		timed <- timing{d, err}
	}()
	t := <-timed
	if err := errors.Join(t.err, <-echoed); err != nil {
		return 0, err
	}
	return t.d / time.Duration(rounds), nil
}

func ping(cpu, w, r, rounds int) (time.Duration, error) {
	if err := pin(cpu); err != nil {
		return 0, err
	}
	buf := []byte{1}
	// One unmeasured exchange first: the echo thread may not be running,
	// or not on its CPU, until it has answered once.
	if err := writeByte(w, buf); err != nil {
		return 0, err
	}
	if err := readByte(r, buf); err != nil {
		return 0, err
	}
	start := time.Now()
	for range rounds {
		if err := writeByte(w, buf); err != nil {
			return 0, err
		}
		if err := readByte(r, buf); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

func echo(cpu, r, w, rounds int) error {
	if err := pin(cpu); err != nil {
		return err
	}
	buf := []byte{0}
	for range rounds + 1 { // and the unmeasured first
		if err := readByte(r, buf); err != nil {
			return err
		}
		if err := writeByte(w, buf); err != nil {
			return err
		}
	}
	return nil
}

func pin(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin a thread to CPU %d: %w", cpu, err)
	}
	return nil
}

func readByte(fd int, buf []byte) error {
	for {
		n, err := unix.Read(fd, buf)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return fmt.Errorf("read pipe: %w", err)
		case n == 0:
			return errors.New("read pipe: the other thread stopped")
		}
		return nil
	}
}

func writeByte(fd int, buf []byte) error {
	for {
		_, err := unix.Write(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("write pipe: %w", err)
		}
		return nil
	}
}
