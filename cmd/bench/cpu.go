package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc CPU times: USER_HZ, 100 on every Linux the
// platform targets.
const clockTick = 10 * time.Millisecond

// processCPU is the user+system CPU time a process has used so far.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis are fixed: utime and stime are the 12th and 13th.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// machineTimes is how the machine's cores have spent their time so far.
type machineTimes struct {
	busy  time.Duration // running anything, kernel included
	steal time.Duration // taken by the hypervisor for other guests
	all   time.Duration // every core's time, idle included
}

func readMachineTimes() (machineTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTimes{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(fields) < 9 || fields[0] != "cpu" {
		return machineTimes{}, fmt.Errorf("/proc/stat: unexpected format")
	}
	var t machineTimes
	for i, f := range fields[1:9] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return machineTimes{}, fmt.Errorf("/proc/stat: %w", err)
		}
		d := time.Duration(n) * clockTick
		t.all += d
		switch i {
		case 3, 4: // idle, iowait
		case 7:
			// Steal is time the hypervisor gave to other guests: not ours
			// to count as busy, but a sign the run was disturbed.
			t.steal += d
		default:
			t.busy += d
		}
	}
	return t, nil
}

// usage is how much of the machine's capacity a phase used, and how much
// the hypervisor took from it, as fractions.
type usage struct {
	busy, steal float64
}

// totalShare names the machine's whole CPU per request among the shares.
const totalShare = "total"

// cpuShare is the CPU one process (or "everything else") spent per request.
type cpuShare struct {
	name       string
	perRequest time.Duration
}

// cpuMeter attributes the machine's CPU time over an interval to named
// processes, and the rest (Postgres, Redis, the kernel) to "everything else".
type cpuMeter struct {
	procs    []proc
	start    []time.Duration
	machine0 machineTimes
	failed   bool
}

// proc names a process whose CPU is measured.
type proc struct {
	name string
	pid  int
}

func startCPUMeter(procs []proc) *cpuMeter {
	m := &cpuMeter{procs: procs}
	for _, p := range procs {
		t, err := processCPU(p.pid)
		m.failed = m.failed || err != nil
		m.start = append(m.start, t)
	}
	var err error
	m.machine0, err = readMachineTimes()
	m.failed = m.failed || err != nil
	return m
}

// perRequest returns each process's CPU per request over the interval, then
// everything else and the total, and the machine's usage; nil and zero
// when /proc could not be read.
func (m *cpuMeter) perRequest(requests int) ([]cpuShare, usage) {
	machine1, err := readMachineTimes()
	if m.failed || err != nil || requests == 0 {
		return nil, usage{}
	}
	var shares []cpuShare
	var named time.Duration
	for i, p := range m.procs {
		t, err := processCPU(p.pid)
		if err != nil {
			return nil, usage{}
		}
		used := t - m.start[i]
		named += used
		shares = append(shares, cpuShare{p.name, used / time.Duration(requests)})
	}
	total := machine1.busy - m.machine0.busy
	var u usage
	if all := machine1.all - m.machine0.all; all > 0 {
		u = usage{busy: float64(total) / float64(all), steal: float64(machine1.steal-m.machine0.steal) / float64(all)}
	}
	return append(shares,
		cpuShare{"everything else (Postgres, Redis, kernel)", max(0, total-named) / time.Duration(requests)},
		cpuShare{totalShare, total / time.Duration(requests)}), u
}
