package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/esimplatform/esim/cmd/internal/platform"
	"github.com/esimplatform/esim/libs/internalauth"
)

// The install rows, in the order they are measured and reported.
const (
	installTarget        = "sandbox eSIM's install (simulate answered 200) → its signed esim.installed webhook read by the receiver"
	installControlTarget = "control: POST of an esim.installed delivery to the same receiver, round trip"
	installCallsRow      = "context: the simulate calls themselves, from due to 200 read"
)

// targetInstallP99 is issue 31's goal for an install's webhook, at half
// the sustainable rate: reported, not a condition of resolving it.
const targetInstallP99 = 100 * time.Millisecond

// eventInstalled is the event type an install sends.
const eventInstalled = "esim.installed"

// installOrderSize is the eSIMs of each order the installs are made on:
// the most an order takes, so preparing costs few orders.
const installOrderSize = 50

// installProbe is the closed loop that finds the sustainable rate: this
// many workers install, one eSIM after another, up to installProbeEsims
// eSIMs (cfg.installProbe) or cfg.duration, whichever ends first.
const (
	installProbeWorkers = 16
	installProbeEsims   = 2000
)

// installResults are the install rows of a run.
type installResults struct {
	planID string
	// probe is the closed loop's simulate calls (Requests: installs, RPS
	// their rate); probeWebhooks the webhooks of its installs that came,
	// the last probeSpan after the loop started.
	probe         result
	probeWebhooks int
	probeSpan     time.Duration
	// sustainable is the lower of the probe's installs and its webhooks
	// per second: the rate the whole path keeps up with.
	sustainable float64
	// rate is the open loop's, half of sustainable, for duration after
	// warmup.
	rate             float64
	duration, warmup time.Duration
	// latency is from each measured install's 200 read to its webhook
	// read, clamped at 0 (Requests: the webhooks that came); calls is how
	// long the simulate calls took, from due to 200 read.
	latency, calls result
	// installed counts measured installs answered 200, errors (with an
	// example) those answered otherwise or not at all.
	installed, errors int
	firstErr          string
	// early counts webhooks read before their install's 200, earliest
	// the furthest ahead (negative).
	early    int
	earliest time.Duration
	// missing counts measured installs whose webhook had not come
	// deliveryGrace after the last 200.
	missing                int
	unverified, duplicates int
	firstUnverified        string
	deliveryBytes          int
	control                result
	// backlog is what of earlier events was still on their way when the
	// open loop started.
	backlog backlog
}

// installCall is one simulated install.
type installCall struct {
	id string
	// due is when it was to be sent, read when its 200 had been read.
	due, read time.Time
	// measured is false for the warm-up's installs and the probe's.
	measured bool
	err      error
}

// installPhase finds the rate at which sandbox installs and their
// webhooks keep up, then installs at half of it, open-loop, timing each
// eSIM's signed esim.installed webhook from its simulate call's 200 to
// the receiver; then the receiver's own round trip as the control.
func installPhase(ctx context.Context, cfg config, p *platform.Platform, b *benchReceiver, say func(string, ...any)) (res installResults, err error) {
	res.duration, res.warmup = cfg.webhookDuration, cfg.warmup
	if b == nil {
		return res, fmt.Errorf("no %s service in services.yaml to deliver webhooks", webhookService)
	}
	operator := internalauth.Client(&http.Client{Timeout: 10 * time.Second}, p.OperatorToken)
	rcv := b.rcv
	planID, plan, err := pickPlan(ctx, p.APIBaseURL, p.SandboxKey, "type=fixed&")
	if err != nil {
		return res, err
	}
	res.planID = planID
	api := &partnerAPI{ctx: ctx, base: p.APIBaseURL, key: p.SandboxKey, client: orderClient()}
	runID := randomHex(6)
	// Each batch of orders has keys of its own: a key is one order.
	prepare := func(n int, batch string) ([]string, error) {
		if err := fundOrders(ctx, p, operator, plan, n, say); err != nil {
			return nil, err
		}
		say("installs: ordering %d sandbox eSIMs, %d an order", n, installOrderSize)
		return sandboxEsims(ctx, api, planID, n, "bench-"+runID+"-install-"+batch+"-")
	}
	drain := func() backlog { return b.settle(ctx, p, "installs", say) }

	// 1. The sustainable rate: a closed loop of installs, and how fast
	// their webhooks came.
	probeIDs, err := prepare(cfg.installProbe, "probe")
	if err != nil {
		return res, err
	}
	drain()
	say("installs: closed loop of %d workers over %d eSIMs, at most %s", installProbeWorkers, len(probeIDs), cfg.duration)
	start := time.Now()
	probe := installClosed(ctx, api, probeIDs, installProbeWorkers, cfg.duration)
	res.probe = spreadOfCalls(probe, time.Since(start))
	rcv.await(ctx, answered(probe), time.Now().Add(deliveryGrace))
	res.probeWebhooks, res.probeSpan = webhooksSince(probe, rcv.snapshot(), start)
	res.sustainable = sustainableRate(res.probe, res.probeWebhooks, res.probeSpan)
	say("installs: %.0f installs/s (p50 %s, p99 %s, %d errors), their webhooks %d in %s: sustainable %.0f/s",
		res.probe.RPS(), ms(res.probe.P50), ms(res.probe.P99), res.probe.Errors, res.probeWebhooks, res.probeSpan.Round(time.Millisecond), res.sustainable)
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("interrupted: %w", err)
	}
	res.rate = res.sustainable / 2
	if res.rate*cfg.webhookDuration.Seconds() < 1 {
		return res, fmt.Errorf("installs: a sustainable rate of %.2f/s is too low for an open loop (first error: %s)", res.sustainable, res.probe.FirstErr)
	}

	// 2. The open loop at half of it.
	ids, err := prepare(int(math.Ceil(res.rate*(cfg.warmup+cfg.webhookDuration).Seconds())), "open")
	if err != nil {
		return res, err
	}
	res.backlog = drain()
	say("installs: %.0f/s for %s (after %s of warm-up), each webhook timed from its install's 200", res.rate, cfg.webhookDuration, cfg.warmup)
	before := rcv.snapshot()
	calls := installOpen(ctx, api, ids, res.rate, cfg.warmup)
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("interrupted: %w", err)
	}
	rcv.await(ctx, answered(calls), time.Now().Add(deliveryGrace))
	// The receiver counts for the whole run: these installs' are what
	// it counted since.
	got := rcv.snapshot()
	got.unverified -= before.unverified
	got.duplicates -= before.duplicates
	if got.unverified == 0 {
		got.firstUnverified = ""
	}
	res.tally(calls, got)
	say("installs: %d installs, p50 %s, p90 %s, p99 %s, max %s; %d errors, %d missing, %d unverified, %d duplicates, %d before their 200",
		res.installed, ms(res.latency.P50), ms(res.latency.P90), ms(res.latency.P99), ms(res.latency.Max), res.errors, res.missing, res.unverified, res.duplicates, res.early)

	// 3. The control: an esim.installed delivery's bytes, signed afresh,
	// at the same rate to the same receiver.
	sample, ok := rcv.sampleOf(eventInstalled)
	if !ok {
		say("warning: installs: no webhook verified, so no delivery to send as the control")
		return res, nil
	}
	res.deliveryBytes = len(sample.body)
	control, err := rcv.controlTarget(sample)
	if err != nil {
		return res, err
	}
	control.name = installControlTarget
	say("%s: %.0f/s for %s", installControlTarget, res.rate, cfg.webhookDuration)
	res.control = openLoop(ctx, control, res.rate, controlConns, cfg.webhookDuration)
	say("%s: p50 %s, p99 %s, %d errors", installControlTarget, ms(res.control.P50), ms(res.control.P99), res.control.Errors)
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("interrupted: %w", err)
	}
	return res, nil
}

// sandboxEsims orders n sandbox eSIMs of planID, installOrderSize an
// order, a few orders at a time, and returns their ids.
func sandboxEsims(ctx context.Context, api *partnerAPI, planID string, n int, keyPrefix string) ([]string, error) {
	const parallel = 4
	orders := (n + installOrderSize - 1) / installOrderSize
	got := make([][]string, orders)
	errs := make([]error, orders)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < orders && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				quantity := min(installOrderSize, n-i*installOrderSize)
				body := fmt.Appendf(nil, `{"plan_id":%q,"quantity":%d}`, planID, quantity)
				answer, err := api.do(http.MethodPost, "/orders", body, fmt.Sprintf("%s%d", keyPrefix, i))
				if err == nil {
					got[i], err = esimIDs(answer, quantity)
				}
				errs[i] = err
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted: %w", err)
	}
	var ids []string
	for i := range got {
		if errs[i] != nil {
			return nil, fmt.Errorf("order sandbox eSIMs to install: %w", errs[i])
		}
		ids = append(ids, got[i]...)
	}
	return ids, nil
}

// esimIDs reads the ids of a completed order's eSIMs from its 201, which
// must have want of them.
func esimIDs(answer []byte, want int) ([]string, error) {
	var created struct {
		Data struct {
			Status string `json:"status"`
			Esims  []struct {
				ID string `json:"id"`
			} `json:"esims"`
		} `json:"data"`
	}
	if err := json.Unmarshal(answer, &created); err != nil {
		return nil, fmt.Errorf("read the order's eSIMs: %w", err)
	}
	ids := make([]string, 0, len(created.Data.Esims))
	for _, e := range created.Data.Esims {
		if e.ID != "" {
			ids = append(ids, e.ID)
		}
	}
	if len(ids) != want {
		return nil, fmt.Errorf("order %s with %d eSIM ids, want %d: %.300s", created.Data.Status, len(ids), want, answer)
	}
	return ids, nil
}

// simulateInstall installs sandbox eSIM id, as a partner's test would;
// only a 200 is an install.
func simulateInstall(api *partnerAPI, id string) error {
	status, answer, err := api.send(http.MethodPost, "/sandbox/esims/"+id+"/simulate", []byte(`{"action":"install"}`), "")
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("HTTP %d: %.200s", status, answer)
	}
	return err
}

// installClosed installs ids with workers, each taking the next eSIM as
// soon as its last install is answered, until every one is installed or
// d is over. A call's due is when it was sent.
func installClosed(ctx context.Context, api *partnerAPI, ids []string, workers int, d time.Duration) []installCall {
	calls := make([]installCall, len(ids))
	var next atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := int(next.Add(1) - 1)
				if i >= len(ids) {
					return
				}
				c := &calls[i]
				c.id, c.due = ids[i], time.Now()
				c.err = simulateInstall(api, ids[i])
				c.read = time.Now()
			}
		})
	}
	wg.Wait()
	// The eSIMs the loop had no time for were never called.
	return calls[:min(int(next.Load()), len(ids))]
}

// installOpen installs ids at rate, open-loop: install n is due at start
// + n/rate and goes out then on a goroutine of its own, whatever became
// of the earlier ones (no coordinated omission). Those due within warmup
// are not measured.
func installOpen(ctx context.Context, api *partnerAPI, ids []string, rate float64, warmup time.Duration) []installCall {
	warm := int(rate * warmup.Seconds())
	interval := float64(time.Second) / rate
	calls := make([]installCall, len(ids))
	var wg sync.WaitGroup
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	start := time.Now()
	sent := 0
	for n, id := range ids {
		due := start.Add(time.Duration(float64(n) * interval))
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
			case <-timer.C:
			}
		}
		if ctx.Err() != nil {
			break
		}
		sent++
		wg.Go(func() {
			c := &calls[n]
			c.id, c.due, c.measured = id, due, n >= warm
			c.err = simulateInstall(api, id)
			c.read = time.Now()
		})
	}
	wg.Wait()
	return calls[:sent]
}

// answered are the ids of the calls answered 200.
func answered(calls []installCall) []string {
	var ids []string
	for _, c := range calls {
		if c.err == nil {
			ids = append(ids, c.id)
		}
	}
	return ids
}

// spreadOfCalls is the calls' latencies from due to read, their errors,
// over elapsed.
func spreadOfCalls(calls []installCall, elapsed time.Duration) result {
	rec := &recorder{}
	for _, c := range calls {
		rec.record(c.read.Sub(c.due), c.err)
	}
	return merge([]*recorder{rec}, elapsed)
}

// webhooksSince counts the esim.installed webhooks of the calls answered
// 200 that came, and how long after start the last of them came.
func webhooksSince(calls []installCall, got receiverState, start time.Time) (int, time.Duration) {
	n := 0
	var last time.Time
	for _, c := range calls {
		a, ok := got.arrivals[c.id]
		if c.err != nil || !ok || a.event != eventInstalled {
			continue
		}
		n++
		if a.at.After(last) {
			last = a.at
		}
	}
	if n == 0 {
		return 0, 0
	}
	return n, last.Sub(start)
}

// sustainableRate is the rate the whole path keeps up with: the lower of
// the installs answered per second and their webhooks per second, from
// the loop's start to the last webhook. Webhooks that did not come do
// not count, so a pipeline that loses them is not sustainable at any
// rate they were lost at.
func sustainableRate(calls result, webhooks int, span time.Duration) float64 {
	if webhooks == 0 || span <= 0 {
		return 0
	}
	return min(calls.RPS(), float64(webhooks)/span.Seconds())
}

// tally fills res from the open loop's calls and what the receiver got.
func (res *installResults) tally(calls []installCall, got receiverState) {
	var latencies, took []time.Duration
	for _, c := range calls {
		if !c.measured {
			continue
		}
		if c.err != nil {
			res.errors++
			if res.firstErr == "" {
				res.firstErr = c.err.Error()
			}
			continue
		}
		res.installed++
		took = append(took, c.read.Sub(c.due))
		a, ok := got.arrivals[c.id]
		if !ok || a.event != eventInstalled {
			res.missing++
			continue
		}
		d := a.at.Sub(c.read)
		if d < 0 {
			res.early++
			res.earliest = min(res.earliest, d)
			d = 0
		}
		latencies = append(latencies, d)
	}
	res.unverified, res.duplicates, res.firstUnverified = got.unverified, got.duplicates, got.firstUnverified
	res.latency = spreadOf(latencies)
	res.latency.Rate = res.rate
	res.calls = spreadOf(took)
	res.calls.Rate, res.calls.Errors = res.rate, res.errors
}

// met reports whether the goal is met: every install answered, its
// webhook verified and come, and the p99 within targetInstallP99.
func (res *installResults) met() bool {
	whole := res.missing == 0 && res.unverified == 0 && res.errors == 0 && res.latency.Requests > 0
	return whole && res.latency.P99 <= targetInstallP99
}

// installsSection names the install rows' section, in its heading and in
// the Goals table.
const installsSection = "Install to webhook"

// section is the report's install rows, with the sustainable rate.
func (i *installResults) section(p func(string, ...any)) {
	p("## %s\n\n", installsSection)
	methodLine(p, "install-to-webhook", "Sandbox eSIMs of plan %s installed with `POST /v1/sandbox/esims/{id}/simulate` through the gateway at half the sustainable rate for %s after %s of warm-up, each timed from its 200 to its signed `esim.installed` webhook, against the receiver's own round trip for the first delivery (%d-byte body)",
		i.planID, i.duration, i.warmup, i.deliveryBytes)
	p("Sustainable rate: a closed loop of %d workers installed %d eSIMs at %.0f/s (p50 %s, p99 %s a call, %d errors); %d of their webhooks came within %s of its start (%.0f/s): **%.0f installs/s**, so the open loop ran at %.0f/s.\n\n",
		installProbeWorkers, i.probe.Requests-i.probe.Errors, i.probe.RPS(), ms(i.probe.P50), ms(i.probe.P99), i.probe.Errors,
		i.probeWebhooks, i.probeSpan.Round(time.Millisecond), perSecond(i.probeWebhooks, i.probeSpan), i.sustainable, i.rate)
	c := i.control
	spreadTable(p, "%.0f", spreadLine{installTarget, i.rate, i.latency, i.errors}, spreadLine{installControlTarget, c.Rate, c, c.Errors},
		spreadLine{installCallsRow, i.calls.Rate, i.calls, i.calls.Errors})
	i.deliveries(p)
	if c.P50 > 0 && c.P99 > 0 && i.latency.Requests > 0 {
		p("Install webhook / control: p50 **%.0f×** (%s / %s), p99 **%.0f×** (%s / %s)\n\n",
			float64(i.latency.P50)/float64(c.P50), ms(i.latency.P50), ms(c.P50), float64(i.latency.P99)/float64(c.P99), ms(i.latency.P99), ms(c.P99))
	}
}

// deliveries says what became of the measured installs' webhooks.
func (i *installResults) deliveries(p func(string, ...any)) {
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
}

// goals are the install rows' goal (met), and the receiver held to it.
func (i *installResults) goals() []goal {
	gs := []goal{{section: installsSection, name: fmt.Sprintf("esim.installed webhook p99 after the install's 200, at half the sustainable rate (%.0f/s)", i.rate),
		measured: ms(i.latency.P99), want: "<= " + ms(targetInstallP99), met: i.met()}}
	if c := i.control; c.Requests > 0 {
		gs = append(gs, goal{section: installsSection, name: "control: the receiver's round trip, p99",
			measured: ms(c.P99), want: "<= " + ms(targetInstallP99), met: c.P99 <= targetInstallP99 && c.Errors == 0, control: true})
	}
	return gs
}
