package main

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The targets the gateway is held to: its overhead may cost at most 4x the
// throughput of a bare handler on the same machine, and at a sustainable
// load (half its maximum) partners must see p99 under 10 ms.
const (
	targetRatio = 0.25
	targetP99   = 10 * time.Millisecond
)

// The order rows' goals (issue 20): orders at a quarter of what Postgres
// alone commits of their writes, reads at a quarter of a bare handler, and
// an order of 50 eSIMs at most five times the cost of one of one.
const (
	targetOrderRatio = 0.25
	targetReadRatio  = 0.25
	targetFiftyCost  = 5.0
)

type measurement struct {
	name string
	// closedRuns are the closed loops, one per concurrency tried.
	closedRuns []closedRun
	// loads are the open loops, one per fraction of openLoadFractions.
	loads []openLoad
}

// openLoad is the open-loop trials at one fraction of the maximum.
type openLoad struct {
	fraction float64
	trials   []result
}

// median is the trial whose p99 is the median of all trials'.
func (o openLoad) median() result {
	if len(o.trials) == 0 {
		return result{}
	}
	sorted := slices.Clone(o.trials)
	slices.SortFunc(sorted, func(a, b result) int { return cmp.Compare(a.P99, b.P99) })
	return sorted[(len(sorted)-1)/2]
}

// errors totals the errors of every trial.
func (o openLoad) errors() (n int, first string) {
	for _, t := range o.trials {
		n += t.Errors
		if first == "" {
			first = t.FirstErr
		}
	}
	return n, first
}

// maxSteal is the largest share of the machine the hypervisor took during
// any trial.
func (o openLoad) maxSteal() float64 {
	var s float64
	for _, t := range o.trials {
		s = max(s, t.Usage.steal)
	}
	return s
}

// judged is the open load the latency target is judged at: half the
// maximum.
func (m measurement) judged() openLoad {
	if len(m.loads) == 0 {
		return openLoad{}
	}
	return m.loads[0]
}

// closedRun is one closed loop at a given concurrency.
type closedRun struct {
	workers int
	// clients, where set and not workers, is how many connections pgbench
	// had for this concurrency: no more than the server could spare.
	clients int
	result  result
}

// workersText is the run's concurrency, and pgbench's clients where the
// server allowed fewer.
func (c closedRun) workersText() string {
	if c.clients > 0 && c.clients != c.workers {
		return fmt.Sprintf("%d (%d clients)", c.workers, c.clients)
	}
	return strconv.Itoa(c.workers)
}

// best is the closed loop with the highest throughput: the maximum.
func (m measurement) best() closedRun {
	var b closedRun
	for _, c := range m.closedRuns {
		if c.result.RPS() > b.result.RPS() || b.workers == 0 {
			b = c
		}
	}
	return b
}

// callRows are the gateway's calls to its backends, one row each wherever
// a table shows them: how many requests a call carried, and how long it
// took. A request that finds a call in flight waits for it, then rides the
// next, so the mean call measures its wait at each hop.
var callRows = []struct {
	label string
	value func(callStats) string
}{
	{"plan lookups per catalogue call", func(c callStats) string { return perCallText(c.catalogue) }},
	{"mean catalogue call", func(c callStats) string { return meanCallText(c.catalogue) }},
	{"rate-limit checks per Redis call", func(c callStats) string { return perCallText(c.redis) }},
	{"mean Redis call", func(c callStats) string { return meanCallText(c.redis) }},
}

func perCallText(c backendCalls) string {
	if c.calls <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", c.perCall())
}

func meanCallText(c backendCalls) string {
	if c.calls <= 0 {
		return "-"
	}
	return ms(c.meanCall())
}

// hasCalls reports whether the gateway's calls were read for r.
func (r result) hasCalls() bool { return r.Calls.catalogue.calls > 0 || r.Calls.redis.calls > 0 }

type memory struct {
	name string
	pid  int
	hwm  string
}

type report struct {
	started   time.Time
	cfg       config
	cpus      int
	cpuModel  string
	goVersion string
	planID    string
	bodyBytes int
	rows      []measurement
	// orders are the order rows, nil when the run had none (-only plans).
	orders *orderResults
	// webhooks are the webhook rows, nil when the run had none; likewise
	// installs and usage.
	webhooks *webhookResults
	installs *installResults
	usage    *usageResults
	pipeline *pipelineResults
	lists    *listResults
	mem      []memory
	wake     wakeCost
}

// allRows are the plan rows, then the order rows.
func (r report) allRows() []measurement {
	rows := slices.Clone(r.rows)
	if o := r.orders; o != nil {
		rows = append(rows, o.rows()...)
	}
	return rows
}

func (r report) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	p("# Benchmarks\n\n")
	only := ""
	if r.cfg.only != "" {
		only = " -only " + r.cfg.only
	}
	switch {
	case r.cfg.runs(onlyWebhooks):
		only = fmt.Sprintf(" -webhook-rate %g -webhook-duration %s", r.cfg.webhookRate, r.cfg.webhookDuration) + only
	case r.cfg.runs(onlyLifecycle):
		only = fmt.Sprintf(" -webhook-duration %s", r.cfg.webhookDuration) + only
	}
	p("Generated by `make bench` (`bin/bench -duration %s -concurrency %s%s`) on %s.\n\n",
		r.cfg.duration, joinInts(r.cfg.workers), only, r.started.Format("2006-01-02 15:04 UTC"))

	p("## Machine\n\n")
	p("- CPUs (nproc): %d", r.cpus)
	if r.cpuModel != "" {
		p(" (%s)", r.cpuModel)
	}
	p("\n- Go: %s\n", r.goVersion)
	p("- %s\n", r.wakeLine())
	p("- Postgres and Redis: the local servers; every process (load generator, the platform's services, Postgres, Redis, pgbench, baseline servers) shares the same cores.\n\n")

	p("## Method\n\n")
	if len(r.rows) > 0 {
		r.planMethod(p)
	}
	if r.orders != nil {
		r.orders.method(p, r.cfg)
	}
	if r.webhooks != nil {
		r.webhooks.method(p)
	}
	if r.installs != nil {
		r.installs.method(p, r.cfg)
	}
	if r.usage != nil {
		r.usage.method(p, r.cfg)
	}
	if r.lists != nil {
		r.lists.method(p)
	}
	if r.pipeline != nil {
		r.pipeline.method(p)
	}
	p("- Errors: any non-2xx answer or transport failure. Requests/s counts successful answers only. An order refused with 429 for its account's cap of orders in flight (ORDERS_IN_FLIGHT_PER_ACCOUNT) is sent again after %s, as a partner's client would, and its latency runs from the first send.\n\n", throttlePause)

	if len(r.rows) > 0 {
		r.planResults(p)
	}
	if r.orders != nil {
		r.orders.section(p, r.cfg)
	}
	if r.webhooks != nil {
		r.webhooks.section(p)
	}
	if r.installs != nil {
		r.installs.section(p)
	}
	if r.usage != nil {
		r.usage.section(p)
	}
	if r.lists != nil {
		r.lists.section(p)
	}
	if r.pipeline != nil {
		r.pipeline.section(p)
	}

	p("## Peak memory (VmHWM from /proc/<pid>/status, after the run)\n\n")
	p("| process | pid | peak RSS |\n|---|---|---|\n")
	for _, m := range r.mem {
		p("| %s | %d | %s |\n", m.name, m.pid, m.hwm)
	}
	return b.String()
}

// planMethod says how the plan rows were measured.
func (r report) planMethod(p func(string, ...any)) {
	p("- Request: `GET /v1/plans/%s` (%d-byte JSON answer).\n", r.planID, r.bodyBytes)
	p("- **gateway**: the platform started as by `make run` (separate processes on loopback), with a real sandbox key: ")
	p("API-key authentication (accounts over Twirp, behind the gateway's auth cache), the Redis GCRA rate limiter ")
	p("(limit set far above the load so nothing is rejected), then catalogue over Twirp reading Postgres.\n")
	p("- **bare net/http**: a separate process serving the same bytes from a plain `net/http` handler, as a ceiling for this machine.\n")
	p("- Each target: %s unmeasured warm-up; then one closed loop of %s concurrent keep-alive workers for %s each; ", r.cfg.warmup, joinInts(r.cfg.workers), r.cfg.duration)
	p("the best of them is the target's maximum throughput. Then %d open-loop trials at each offered load (half that maximum, where the latency target is judged, then a quarter), each at a constant rate for %s ", r.cfg.trials, r.cfg.duration)
	p("over %d keep-alive connections, each connection sending its share of an evenly spaced schedule (as wrk2 does). ", openLoopConns)
	p("Latency counts from each request's scheduled time when its connection was still busy, so queueing counts, ")
	p("and from the end of the generator's sleep otherwise, so a late timer is not charged to the target.\n")
	p("- The load generator shares the cores with what it measures, so it is kept lean: each worker writes the same prebuilt request on its own connection ")
	p("and reads the answer with net/http's `ReadResponse` on its own goroutine, without the two extra goroutines per connection of net/http's client.\n")
	p("- Machine busy and stolen: from /proc/stat over each phase, as shares of all cores' time. Stolen time is what the hypervisor ")
	p("gave other guests while this one had work: where it is more than a few percent, the run was disturbed from outside.\n")
}

// planResults are the plan rows' sections: results, targets, CPU per
// request and the gateway's calls.
func (r report) planResults(p func(string, ...any)) {
	p("## Results\n\n")
	p("%s\n", r.table())
	p("Closed loops, requests/s by concurrency:\n\n%s\n", r.concurrencyTable())
	p("Open loops, by offered load:\n\n%s\n", r.loadTable())

	gw, okGW := r.row(gatewayTarget)
	bare, okBare := r.row(bareTarget)
	if okGW && okBare {
		ratio := rpsRatio(gw, bare)
		p("Throughput ratio, gateway / bare: **%.2f** (%.0f / %.0f req/s)\n\n", ratio, gw.best().result.RPS(), bare.best().result.RPS())

		p("## Targets\n\n")
		p("| target | measured | status |\n|---|---|---|\n")
		p("| gateway / bare throughput ratio >= %.2f | %.2f | %s |\n", targetRatio, ratio, metText(ratio >= targetRatio))
		judged := gw.judged()
		openErrs, firstErr := judged.errors()
		p99 := judged.median().P99
		p("| gateway p99 at half of max < %s (median of %d trials) | %s | %s |\n", ms(targetP99), len(judged.trials), ms(p99), metText(p99 < targetP99 && openErrs == 0))
		// The same latency bound, applied to the bare handler at half of its
		// own maximum, tells how much of a miss is the machine's: a handler
		// that does nothing cannot do better than it.
		bareP99 := bare.judged().median().P99
		p("| control: bare net/http p99 at half of its max < %s (median of %d trials) | %s | %s (not a target) |\n", ms(targetP99), len(bare.judged().trials), ms(bareP99), metText(bareP99 < targetP99))
		if openErrs > 0 {
			p("\nThe gateway's open loop had %d errors (e.g. %s), so its latency target is not met.\n", openErrs, firstErr)
		}
		if bareP99 >= targetP99 {
			// Said in words, not left to the reader of the table: a miss
			// here is the machine's before it is the code's.
			p("\nThe bare handler, which does nothing, missed the latency bound at half of its own maximum (%s): on this machine the gateway's latency target cannot be judged. See the wake-up cost under Machine and the stolen time of each open loop.\n", ms(bareP99))
		}
		p("\n")
	}

	p("## CPU per request\n\n")
	p("CPU time (user + system, from /proc) spent per answered request, by process; ")
	p("\"everything else\" is the rest of the machine's busy time: Postgres and Redis for the gateway, the kernel's network work for both. ")
	p("At the maximum (the best closed loop) and at each open load (its trial with the median p99). ")
	p("A request costs more at half load than at the maximum: fewer lookups share each catalogue call and fewer checks each Redis call, and every hop wakes ")
	p("an idle process instead of finding it running, so at half of the maximum the machine is far more than half busy.\n\n")
	for _, m := range r.rows {
		best := m.best()
		if len(best.result.CPU) == 0 {
			continue
		}
		// One column per open load, its median trial; a load whose CPU was
		// not read (a /proc failure) gets none.
		type column struct {
			label string // "50%", as in "at 50% of max"
			res   result
		}
		var cols []column
		for _, l := range m.loads {
			if med := l.median(); len(med.CPU) == len(best.result.CPU) {
				cols = append(cols, column{percent(l.fraction), med})
			}
		}
		p("| %s | at max (%d workers) |", m.name, best.workers)
		for _, c := range cols {
			p(" at %s of max |", c.label)
		}
		p("\n|---|---:|%s\n", strings.Repeat("---:|", len(cols)))
		var generator []string
		for i, share := range best.result.CPU {
			p("| %s | %s |", share.name, us(share.perRequest))
			for _, c := range cols {
				p(" %s |", us(c.res.CPU[i].perRequest))
			}
			p("\n")
			if share.name == loadGeneratorName {
				generator = append(generator, us(share.perRequest)+" at the maximum")
				for _, c := range cols {
					generator = append(generator, fmt.Sprintf("%s at %s of it", us(c.res.CPU[i].perRequest), c.label))
				}
			}
		}
		p("| machine busy | %s |", percent(best.result.Usage.busy))
		for _, c := range cols {
			p(" %s |", percent(c.res.Usage.busy))
		}
		p("\n\n")
		if len(generator) > 1 {
			// The generator is the control for the wake-up cost: its work per
			// request is the same at any load and none of it is platform code.
			last := len(generator) - 1
			p("The load generator does the same work for every request at any load, yet its CPU per request was %s and %s. ", strings.Join(generator[:last], ", "), generator[last])
			p("It runs none of the platform's code: the rise is this machine's cost of waking idle processes.\n\n")
		}
	}

	p("## How the gateway keeps up\n\n")
	p("The bare handler answers in one hop. Every gateway answer takes four in a row: client to gateway, ")
	p("gateway to Redis (the GCRA rate limit; the auth cache is served from memory on a hot key), gateway to catalogue (Twirp), ")
	p("catalogue to Postgres. Made one request at a time, each hop costs both ends a round trip of syscalls, parsing and ")
	p("scheduling on the same cores, and the path could not reach a quarter of the bare handler's throughput.\n\n")
	p("So the gateway coalesces (`libs/coalesce`) both calls it makes for every request. A plan lookup made while the catalogue is idle goes out alone, ")
	p("at once; lookups made while earlier ones are in flight share the next `GetPlans` call, one HTTP exchange and one query. ")
	p("Rate-limit checks made while earlier ones are in flight likewise share one Redis call, which takes a key's checks from its allowance in one script run. ")
	p("Batches grow only with load, so a quiet gateway adds no wait. Every request still reaches the catalogue and Postgres, so ")
	p("a retired plan is not found from the next call on (plans are not cached), and every check still draws on the key's one allowance in Redis, shared by all replicas.")
	p("\n\n")
	if okGW && gw.best().result.hasCalls() {
		// The gateway's own account of its calls (backend_call_* on its
		// /metrics), at the maximum and at each open load's median trial.
		best := gw.best()
		p("The gateway's calls, from its /metrics (`backend_call_batch_size`, `backend_call_duration_seconds`), at the maximum and at each open load (its trial with the median p99). ")
		p("A request that finds a call in flight waits for it to end, then rides the next one: at each hop it waits between one and two mean calls, one when the backend is idle.\n\n")
		p("| gateway's calls | at max (%d workers) |", best.workers)
		var opens []result
		for _, l := range gw.loads {
			p(" at %s of max |", percent(l.fraction))
			opens = append(opens, l.median())
		}
		p("\n|---|---:|%s\n", strings.Repeat("---:|", len(opens)))
		for _, row := range callRows {
			p("| %s | %s |", row.label, row.value(best.result.Calls))
			for _, o := range opens {
				p(" %s |", row.value(o.Calls))
			}
			p("\n")
		}
		p("\n")
	}
	p("Profile the gateway's own code with `go test -bench GetPlan -cpuprofile cpu.out ./services/gateway/server/`.\n\n")
}

func (r report) table() string {
	var b strings.Builder
	b.WriteString("| target | max req/s (best closed loop) | workers | p50 | p99 | errors | half-max open loop req/s | p50 | p99 (median trial) | p99 of each trial | errors |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range r.rows {
		judged := m.judged()
		open := judged.median()
		openErrs, _ := judged.errors()
		best := m.best()
		fmt.Fprintf(&b, "| %s | %.0f | %d | %s | %s | %d | %.0f | %s | %s | %s | %d |\n",
			m.name, best.result.RPS(), best.workers, ms(best.result.P50), ms(best.result.P99), m.closedErrors(),
			open.Rate, ms(open.P50), ms(open.P99), trialP99s(judged), openErrs)
	}
	return b.String()
}

// loadTable shows every open load: how latency falls with the offered load,
// and how busy the machine was and how much the hypervisor took meanwhile.
func (r report) loadTable() string {
	var b strings.Builder
	b.WriteString("| target | offered load | req/s | p50 | p99 (median trial) | p99 of each trial | machine busy (median trial) | stolen by the hypervisor (worst trial) | errors |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range r.rows {
		for _, l := range m.loads {
			med := l.median()
			errs, _ := l.errors()
			fmt.Fprintf(&b, "| %s | %s of max | %.0f | %s | %s | %s | %s | %s | %d |\n",
				m.name, percent(l.fraction), med.Rate, ms(med.P50), ms(med.P99), trialP99s(l), percent(med.Usage.busy), percent(l.maxSteal()), errs)
		}
	}
	return b.String()
}

func trialP99s(l openLoad) string {
	s := make([]string, len(l.trials))
	for i, t := range l.trials {
		s[i] = ms(t.P99)
	}
	return strings.Join(s, ", ")
}

// concurrencyTable shows every closed loop, and for the gateway how many
// lookups each catalogue call, and checks each Redis call, carried.
func (r report) concurrencyTable() string {
	var b strings.Builder
	b.WriteString("| target |")
	for _, w := range r.cfg.workers {
		fmt.Fprintf(&b, " %d workers |", w)
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(r.cfg.workers)) + "\n")
	for _, m := range r.rows {
		b.WriteString("| " + m.name + " |")
		for _, c := range m.closedRuns {
			fmt.Fprintf(&b, " %.0f |", c.result.RPS())
		}
		b.WriteString("\n")
		if m.name != gatewayTarget {
			continue
		}
		if !m.best().result.hasCalls() {
			continue
		}
		for _, row := range callRows {
			b.WriteString("| gateway: " + row.label + " |")
			for _, c := range m.closedRuns {
				fmt.Fprintf(&b, " %s |", row.value(c.result.Calls))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// closedErrors totals the errors of every closed loop.
func (m measurement) closedErrors() int {
	n := 0
	for _, c := range m.closedRuns {
		n += c.result.Errors
	}
	return n
}

// errors totals the errors of every phase.
func (m measurement) errors() (int, string) {
	var n int
	var first string
	for _, l := range m.loads {
		e, f := l.errors()
		n += e
		if first == "" {
			first = f
		}
	}
	for _, c := range m.closedRuns {
		if first == "" {
			first = c.result.FirstErr
		}
	}
	return n + m.closedErrors(), first
}

func (r report) row(name string) (measurement, bool) {
	for _, m := range r.rows {
		if m.name == name {
			return m, true
		}
	}
	return measurement{}, false
}

func rpsRatio(a, b measurement) float64 {
	if b.best().result.RPS() <= 0 {
		return 0
	}
	return a.best().result.RPS() / b.best().result.RPS()
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func metText(met bool) string {
	if met {
		return "met"
	}
	return "not met"
}

// wakeLine reports the host's wake-up cost, measured before the platform
// started (see wakeCost).
func (r report) wakeLine() string {
	const what = "Waking a sleeping thread (two threads passing a byte back and forth through pipes, as `perf bench sched pipe` does, measured before the platform started)"
	switch {
	case r.wake.err != nil:
		return what + ": not measured (" + r.wake.err.Error() + ")."
	case r.wake.crossCore == 0:
		return fmt.Sprintf("%s: %s a round trip on one CPU; one CPU only, so no wake-up across CPUs.", what, us(r.wake.sameCore))
	}
	return fmt.Sprintf("%s: **%s a round trip with the threads on two CPUs**, %s with both on one. "+
		"Every hop between two processes on the gateway's path pays the first whenever the other end is idle; "+
		"where it is tens of microseconds or more, latency under load says more about the host than about the code.",
		what, us(r.wake.crossCore), us(r.wake.sameCore))
}

func percent(f float64) string {
	return strconv.FormatFloat(100*f, 'f', 0, 64) + "%"
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + " ms"
}

// peakRSS reads the high-water mark of resident memory of a process.
func peakRSS(pid int) string {
	v := procField(fmt.Sprintf("/proc/%d/status", pid), "VmHWM:")
	if v == "" {
		return "unknown"
	}
	fields := strings.Fields(v) // "123456 kB"
	kb, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil {
		return v
	}
	return fmt.Sprintf("%.1f MiB", float64(kb)/1024)
}

func cpuModel() string {
	return procField("/proc/cpuinfo", "model name")
}

// procField returns the value after the first line starting with key.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := s.Text(); strings.HasPrefix(line, key) {
			_, v, _ := strings.Cut(line, ":")
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func us(d time.Duration) string { return fmt.Sprintf("%d µs", d.Microseconds()) }

// rows are the order rows, in the order they are measured.
func (o *orderResults) rows() []measurement {
	return []measurement{o.createOne, o.createFifty, o.pgbench, o.readGateway, o.readBare}
}

// method says how the order rows were measured.
func (o *orderResults) method(p func(string, ...any), cfg config) {
	p("- **Orders**: `POST /v1/orders` of one eSIM of the fixed plan %s through the gateway, each a real sandbox order with its own `Idempotency-Key` ", o.planID)
	p("(key checked, rate-limited, priced from the catalogue, debited by the wallet, issued by the sandbox provider; the orders stay in the bench's databases), ")
	p("against pgbench on the same Postgres running an order's writes in one transaction (insert the order pending, debit one balance, insert a ledger row and an eSIM, complete the order; ")
	p("`-M prepared`, as many clients as workers up to the %d connections the server had to spare, p50 and p99 from its per-transaction log); ", o.pgbenchMaxClients)
	p("then orders of 50 eSIMs at the concurrency best for one, whose cost is how many times fewer of them complete per second.\n")
	p("- **Order reads**: `GET /v1/orders/{id}` of a one-eSIM order (%d-byte JSON answer) through the gateway against a second bare handler serving the same bytes; ", o.orderBytes)
	p("every order row is closed loops only (%s warm-up, then %s workers for %s each, the best kept as the maximum), with no open loop.\n", cfg.warmup, joinInts(cfg.workers), cfg.duration)
}

// fiftyCost is how many times more a 50-eSIM order costs than a 1-eSIM
// one: orders of one per second over orders of 50 per second, at the
// same concurrency. ok is false when no 50-eSIM order succeeded.
func (o *orderResults) fiftyCost() (one closedRun, cost float64, ok bool) {
	fifty := o.createFifty.best()
	for _, c := range o.createOne.closedRuns {
		if c.workers == fifty.workers {
			one = c
		}
	}
	if fifty.result.RPS() <= 0 || one.workers == 0 {
		return one, 0, false
	}
	return one, one.result.RPS() / fifty.result.RPS(), true
}

// section is the report's Orders section: the rows, each ratio and the
// goals.
func (o *orderResults) section(p func(string, ...any), cfg config) {
	p("## Orders\n\n")
	p("| row | max orders, transactions or requests/s (best closed loop) | workers | p50 | p99 | errors |\n")
	p("|---|---:|---:|---:|---:|---:|\n")
	for _, m := range o.rows() {
		best := m.best()
		p("| %s | %.0f | %s | %s | %s | %d |\n", m.name, best.result.RPS(), best.workersText(), ms(best.result.P50), ms(best.result.P99), m.closedErrors())
	}
	p("\nClosed loops, per second by concurrency:\n\n| row |")
	for _, w := range cfg.workers {
		p(" %d workers |", w)
	}
	p("\n|---|%s\n", strings.Repeat("---:|", len(cfg.workers)))
	for _, m := range o.rows() {
		p("| %s |", m.name)
		for _, w := range cfg.workers {
			cell := "-"
			for _, c := range m.closedRuns {
				if c.workers == w {
					cell = fmt.Sprintf("%.0f", c.result.RPS())
				}
			}
			p(" %s |", cell)
		}
		p("\n")
	}

	orderRatio := rpsRatio(o.createOne, o.pgbench)
	readRatio := rpsRatio(o.readGateway, o.readBare)
	p("\nOrders / pgbench: **%.2f** (%.0f orders/s / %.0f transactions/s)\n\n", orderRatio, o.createOne.best().result.RPS(), o.pgbench.best().result.RPS())
	p("Reads, gateway / bare: **%.2f** (%.0f / %.0f req/s)\n\n", readRatio, o.readGateway.best().result.RPS(), o.readBare.best().result.RPS())
	one, cost, ok := o.fiftyCost()
	fifty := o.createFifty.best()
	costText := "-"
	if ok {
		costText = fmt.Sprintf("%.2f", cost)
		p50 := "-"
		if one.result.P50 > 0 {
			p50 = fmt.Sprintf("%.2f", float64(fifty.result.P50)/float64(one.result.P50))
		}
		p("A 50-eSIM order costs **%.2f** times a 1-eSIM one: %.0f against %.0f orders/s at %d workers (%.0f against %.0f eSIMs/s); its p50 is %s times (%s against %s).\n\n",
			cost, fifty.result.RPS(), one.result.RPS(), fifty.workers, 50*fifty.result.RPS(), one.result.RPS(), p50, ms(fifty.result.P50), ms(one.result.P50))
	} else {
		p("No 50-eSIM order succeeded (e.g. %s), so its cost is not known.\n\n", fifty.result.FirstErr)
	}

	p("### Targets (orders)\n\n")
	p("| target | measured | goal | status |\n|---|---:|---:|---|\n")
	p("| gateway POST /v1/orders (1 eSIM) / pgbench order-shaped transactions, per second | %.2f | >= %.2f | %s |\n", orderRatio, targetOrderRatio, metText(orderRatio >= targetOrderRatio))
	p("| gateway GET /v1/orders/{id} / bare net/http, requests per second | %.2f | >= %.2f | %s |\n", readRatio, targetReadRatio, metText(readRatio >= targetReadRatio))
	p("| cost of a 50-eSIM order / a 1-eSIM order (orders/s of 1 eSIM / orders/s of 50) | %s | <= %.2f | %s |\n", costText, targetFiftyCost, metText(ok && cost <= targetFiftyCost))
	var errs []string
	for _, m := range o.rows() {
		if n, first := m.errors(); n > 0 {
			errs = append(errs, fmt.Sprintf("%s %d (e.g. %s)", m.name, n, first))
		}
	}
	if len(errs) > 0 {
		p("\nErrors, which count against each row's rate: %s.\n", strings.Join(errs, "; "))
	}
	p("\n")
}

// method says how the webhook rows were measured.
func (w *webhookResults) method(p func(string, ...any)) {
	p("- **Webhooks**: a receiver in the bench process (`net/http` on a port of 127.0.0.1 of its own) is the demo partner's sandbox webhook URL (set with the webhook service's `SetEndpoint`, and put back afterwards): ")
	p("it reads each delivery, verifies its signature with the Standard Webhooks library (`github.com/standard-webhooks/standard-webhooks/libraries/go`) and the endpoint's secret, notes when it had read it by the order id in `data.id`, and answers 204. ")
	p("Sandbox orders of one eSIM of the fixed plan %s go through the gateway, each with its own `Idempotency-Key`, open-loop at a steady %g orders/s for %s after %s of unmeasured warm-up: ", w.planID, w.rate, w.duration, w.warmup)
	p("each order is sent when it is due, on a goroutine of its own over keep-alive connections, whatever became of the earlier ones. ")
	p("An order's latency runs from the moment its 201 had been read to the moment its webhook had been read: ordering's outbox row, its relay, Kafka (the broker embedded in the bench process), ")
	p("the webhook service's consumer, its worker's claim, signing and the POST. A webhook read before its order's 201 counts as 0 ms. ")
	p("Before the load, earlier phases' events are let through (ordering's outbox empty, the webhook service's consumer group caught up, no delivery pending), so none queues ahead; ")
	p("after it, webhooks still on their way get %s, and one not come by then is missing.\n", deliveryGrace)
	p("- **Webhook control**: the first delivery's bytes and headers (%d-byte body), signed afresh, posted by the bench to the same receiver, which verifies and reads them the same way, ", w.deliveryBytes)
	p("at the same rate for the same time over %d keep-alive connections (as many as the webhook service keeps to one endpoint), timed from sending to the answer read: one loopback hop on this machine, the floor under the pipeline's latency.\n", controlConns)
}

// section is the report's Webhooks section: the rows, what became of the
// deliveries, the goals and the split by stage.
func (w *webhookResults) section(p func(string, ...any)) {
	p("## Webhooks\n\n")
	p("| row | per second | measured | p50 | p90 | p99 | max | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	p("| %s | %g | %d | %s | %s | %s | %s | %d |\n", webhookTarget, w.rate, w.latency.Requests, ms(w.latency.P50), ms(w.latency.P90), ms(w.latency.P99), ms(w.latency.Max), w.errors)
	c := w.control
	if c.Requests > 0 {
		p("| %s | %g | %d | %s | %s | %s | %s | %d |\n", webhookControlTarget, c.Rate, c.Requests, ms(c.P50), ms(c.P90), ms(c.P99), ms(c.Max), c.Errors)
	} else {
		p("| %s (not run: no webhook came to copy) | - | - | - | - | - | - | - |\n", webhookControlTarget)
	}
	o := w.orders
	p("| %s | %g | %d | %s | %s | %s | %s | %d |\n\n", webhookOrdersRow, o.Rate, o.Requests, ms(o.P50), ms(o.P90), ms(o.P99), ms(o.Max), o.Errors)

	p("Deliveries: %d of the %d orders answered 201 had their webhook, verified; %d missing, %d unverified, %d duplicates (an event delivered again).", w.latency.Requests, w.placed, w.missing, w.unverified, w.duplicates)
	if w.early > 0 {
		p(" %d webhooks were read before their order's 201 (up to %s ahead), counted as 0 ms.", w.early, ms(-w.earliest))
	}
	if w.others > 0 {
		p(" The receiver also had %d webhooks of the warm-up's orders.", w.others)
	}
	if w.errors > 0 {
		p(" %d orders were not answered 201 (e.g. %s).", w.errors, w.firstErr)
	}
	if w.unverified > 0 {
		p(" Unverified, e.g.: %s.", w.firstUnverified)
	}
	if q := w.queues; q.reads > 0 {
		p(" The largest queue at each hop while the orders went out and their webhooks came (read every %s): %s", queueSampleInterval, q.peak)
		if q.failed > 0 {
			p(" (%d of %d reads failed, e.g. %s)", q.failed, q.reads, q.err)
		}
		p(".")
	}
	if w.backlog.total() > 0 {
		p(" The load started with earlier events still on their way (%s): the measured ones queued behind them.", w.backlog)
	}
	p("\n\n")
	if c.P50 > 0 && c.P99 > 0 {
		p("Webhook / control: p50 **%.0f×** (%s / %s), p99 **%.0f×** (%s / %s)\n\n",
			float64(w.latency.P50)/float64(c.P50), ms(w.latency.P50), ms(c.P50), float64(w.latency.P99)/float64(c.P99), ms(w.latency.P99), ms(c.P99))
	}

	p("### Targets (webhooks)\n\n")
	p("| target | measured | goal | status |\n|---|---:|---:|---|\n")
	// Latency of the webhooks that came says nothing of those that did
	// not: any missing, unverified or refused misses both goals.
	whole := w.missing == 0 && w.unverified == 0 && w.errors == 0 && w.latency.Requests > 0
	p("| webhook p50 after the order's 201, at %g orders/s | %s | < %s | %s |\n", w.rate, ms(w.latency.P50), ms(targetWebhookP50), metText(whole && w.latency.P50 < targetWebhookP50))
	p("| webhook p99 after the order's 201, at %g orders/s | %s | < %s | %s |\n", w.rate, ms(w.latency.P99), ms(targetWebhookP99), metText(whole && w.latency.P99 < targetWebhookP99))
	if c.Requests > 0 {
		p("| control: the receiver's round trip, p99 | %s | < %s | %s (not a target) |\n", ms(c.P99), ms(targetWebhookP99), metText(c.P99 < targetWebhookP99 && c.Errors == 0))
	}
	p("\n")

	if len(w.cpu) > 0 {
		p("CPU per order placed (user + system, from /proc, warm-up included) from the first order to the last webhook, by process; ")
		p("\"everything else\" is the rest of the machine's busy time: Postgres, Redis, the kernel, and whatever else the machine ran meanwhile. ")
		p("The machine was %s busy, %s stolen by the hypervisor.\n\n", percent(w.usage.busy), percent(w.usage.steal))
		p("| process | CPU per order |\n|---|---:|\n")
		for _, c := range w.cpu {
			p("| %s | %s |\n", c.name, us(c.perRequest))
		}
		p("\n")
	}

	if len(w.stages) > 0 || w.stagesErr != "" {
		p("### Where a webhook's time goes\n\n")
		p("Split at the points the platform records: the order's completion in ordering (the event's `created_at`, in the payload) and the start of the webhook service's attempt that delivered it (`ListEvents`); every clock is this machine's. ")
		p("A webhook's latency is the second and third rows less the first.\n\n")
		if w.stagesErr != "" {
			p("Attempts not read (%s): ", w.stagesErr)
		}
		if len(w.stages) > 0 {
			p("| stage | measured | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|---:|\n")
			for _, s := range w.stages {
				p("| %s | %d | %s | %s | %s | %s |\n", s.name, s.spread.Requests, ms(s.spread.P50), ms(s.spread.P90), ms(s.spread.P99), ms(s.spread.Max))
			}
		}
		p("\n")
	}
}

// method says how the install rows were measured.
func (i *installResults) method(p func(string, ...any), cfg config) {
	p("- **Installs**: sandbox eSIMs of the fixed plan %s, ordered through the gateway %d to an order beforehand, are installed with `POST /v1/sandbox/esims/{id}/simulate` `{\"action\":\"install\"}` through the gateway, each eSIM once; ", i.planID, installOrderSize)
	p("the same receiver as the webhooks' verifies each `esim.installed` delivery with the Standard Webhooks library and notes when it had read it by the eSIM id in `data.id`. ")
	p("The sustainable rate is found first: a closed loop of %d workers installs up to %d eSIMs for at most %s, and the rate the path keeps up with is the lower of the installs answered per second and their webhooks per second, from the loop's start to the last webhook. ", installProbeWorkers, cfg.installProbe, cfg.duration)
	p("Then installs go out open-loop at half of it for %s after %s of unmeasured warm-up, each when it is due, on a goroutine of its own; an install's latency runs from its 200 read to its webhook read ", i.duration, i.warmup)
	p("(ordering's transaction and River job, Kafka, the webhook service's consumer, its worker's claim, signing and the POST); a webhook read before its 200 counts as 0 ms. ")
	p("Before each loop earlier events are let through, as for the webhooks; after the open loop, webhooks still on their way get %s, and one not come by then is missing.\n", deliveryGrace)
	p("- **Install control**: the first `esim.installed` delivery's bytes and headers (%d-byte body), signed afresh, posted to the same receiver at the open loop's rate for as long over %d keep-alive connections, timed from sending to the answer read.\n", i.deliveryBytes, controlConns)
}

// section is the report's install rows, with the sustainable rate and
// the goal.
func (i *installResults) section(p func(string, ...any)) {
	p("## Install to webhook\n\n")
	p("Sustainable rate: a closed loop of %d workers installed %d eSIMs at %.0f/s (p50 %s, p99 %s a call, %d errors); %d of their webhooks came within %s of its start (%.0f/s): **%.0f installs/s**, so the open loop ran at %.0f/s.\n\n",
		installProbeWorkers, i.probe.Requests-i.probe.Errors, i.probe.RPS(), ms(i.probe.P50), ms(i.probe.P99), i.probe.Errors,
		i.probeWebhooks, i.probeSpan.Round(time.Millisecond), perSecond(i.probeWebhooks, i.probeSpan), i.sustainable, i.rate)
	p("| row | per second | measured | p50 | p90 | p99 | max | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	p("| %s | %.0f | %d | %s | %s | %s | %s | %d |\n", installTarget, i.rate, i.latency.Requests, ms(i.latency.P50), ms(i.latency.P90), ms(i.latency.P99), ms(i.latency.Max), i.errors)
	c := i.control
	if c.Requests > 0 {
		p("| %s | %.0f | %d | %s | %s | %s | %s | %d |\n", installControlTarget, c.Rate, c.Requests, ms(c.P50), ms(c.P90), ms(c.P99), ms(c.Max), c.Errors)
	} else {
		p("| %s (not run: no webhook came to copy) | - | - | - | - | - | - | - |\n", installControlTarget)
	}
	k := i.calls
	p("| %s | %.0f | %d | %s | %s | %s | %s | %d |\n\n", installCallsRow, k.Rate, k.Requests, ms(k.P50), ms(k.P90), ms(k.P99), ms(k.Max), k.Errors)
	p("Deliveries: %d of the %d installs answered 200 had their webhook, verified; %d missing, %d unverified, %d duplicates.", i.latency.Requests, i.installed, i.missing, i.unverified, i.duplicates)
	if i.early > 0 {
		p(" %d webhooks were read before their install's 200 (up to %s ahead), counted as 0 ms.", i.early, ms(-i.earliest))
	}
	if i.errors > 0 {
		p(" %d installs were not answered 200 (e.g. %s).", i.errors, i.firstErr)
	}
	if i.unverified > 0 {
		p(" Unverified, e.g.: %s.", i.firstUnverified)
	}
	if i.backlog.total() > 0 {
		p(" The open loop started with earlier events still on their way (%s): the measured ones queued behind them.", i.backlog)
	}
	p("\n\n")
	if c.P50 > 0 && c.P99 > 0 && i.latency.Requests > 0 {
		p("Install webhook / control: p50 **%.0f×** (%s / %s), p99 **%.0f×** (%s / %s)\n\n",
			float64(i.latency.P50)/float64(c.P50), ms(i.latency.P50), ms(c.P50), float64(i.latency.P99)/float64(c.P99), ms(i.latency.P99), ms(c.P99))
	}
	p("### Targets (install to webhook)\n\n")
	p("| target | measured | goal | status |\n|---|---:|---:|---|\n")
	p("| esim.installed webhook p99 after the install's 200, at half the sustainable rate (%.0f/s) | %s | <= %s | %s |\n", i.rate, ms(i.latency.P99), ms(targetInstallP99), metText(i.met()))
	if c.Requests > 0 {
		p("| control: the receiver's round trip, p99 | %s | <= %s | %s (not a target) |\n", ms(c.P99), ms(targetInstallP99), metText(c.P99 <= targetInstallP99 && c.Errors == 0))
	}
	p("\n")
}

// perSecond is n over d, 0 for no time.
func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// method says how the usage rows were measured.
func (u *usageResults) method(p func(string, ...any), cfg config) {
	p("- **Usage ingestion**: a scratch database `%s` on the same server, made anew each run with ordering's migrations (`ordering/postgres.Open`), holds %d ACTIVE live eSIMs of a 5 GB plan ", cfg.usageDatabase, u.esims)
	p("(orders of %d completed through ordering's store, their profiles issued by smdp-sim and their devices attached, activated by the network's first reading through `ApplyUsage`). ", usageOrderSize)
	p("Ordering's usage pass is played in the bench's process, one batch of %d (`ordering.UsageBatch`) after another over every eSIM in turn: the batch's readings %s, ", u.batch, usageReadingsSource)
	p("then applied by `ordering.Service.ApplyUsage` over the real store (`ordering/postgres`). No reading crosses a usage threshold, so each updates its row and publishes nothing. ")
	p("The devices' use before each batch is the network's doing and is not timed: the rate is readings over the time spent reading and applying them. ")
	p("A batch is one transaction: its rows locked by ICCID, each reading applied by the domain, the changed rows written in one statement.\n")
	p("- **Usage control**: pgbench (`-M prepared`, 1 client) on the same database updating one batch of the same rows (a random one of the %d batches, its ICCIDs read by number from a table of the bench's) in one statement: `used_bytes` and `data_updated_at`, found by ICCID as ordering finds them. ", u.esims/max(1, u.batch))
	p("Both run for %s after %s of warm-up, one batch at a time; readings/s is batches/s times %d.\n", cfg.duration, cfg.warmup, u.batch)
}

// section is the report's usage rows and their goal.
func (u *usageResults) section(p func(string, ...any)) {
	p("## Usage ingestion\n\n")
	p("| row | readings/s | batches | p50 a batch | p99 a batch | errors |\n|---|---:|---:|---:|---:|---:|\n")
	for _, r := range []struct {
		name string
		res  result
	}{{usageTarget, u.ordering}, {usageControlTarget, u.control}} {
		p("| %s | %.0f | %d | %s | %s | %d |\n", r.name, readingsPerSecond(r.res, u.batch), r.res.Requests, ms(r.res.P50), ms(r.res.P99), r.res.Errors)
	}
	ratio := u.ratio()
	p("\nOrdering / pgbench: **%.2f** (%.0f / %.0f readings/s)\n\n", ratio, readingsPerSecond(u.ordering, u.batch), readingsPerSecond(u.control, u.batch))
	p("Readings: %s.", usageReadingsSource)
	if u.ordering.Errors > 0 {
		p(" %d of ordering's batches failed (e.g. %s), %d readings changing no eSIM.", u.ordering.Errors, u.ordering.FirstErr, u.unchanged)
	}
	p("\n\n### Targets (usage ingestion)\n\n")
	p("| target | measured | goal | status |\n|---|---:|---:|---|\n")
	p("| usage readings applied by ordering / pgbench batch UPDATE of the same rows, per second | %.2f | >= %.2f | %s |\n\n", ratio, targetUsageRatio, metText(ratio >= targetUsageRatio && u.ordering.Errors == 0))
}
