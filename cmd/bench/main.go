// Command bench measures what the gateway costs: it starts the platform the
// way `make run` does and loads GET /v1/plans/{id} through the gateway (real
// key, auth cache, rate limiter, Twirp, Postgres) side by side with a bare
// net/http handler serving the same body; then places orders through the
// gateway side by side with pgbench writing an order's rows on the same
// Postgres, and reads one back side by side with a bare handler again;
// then times an order's signed webhook from the order's 201 to a receiver
// in this process, side by side with that receiver's own round trip, and
// likewise a sandbox eSIM's install to its signed webhook; then applies
// network usage readings through ordering's store side by side with
// pgbench writing the same rows; then writes BENCHMARKS.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/esimplatform/esim/cmd/internal/operator"
	"github.com/esimplatform/esim/cmd/internal/platform"
	"github.com/esimplatform/esim/cmd/internal/services"
)

// gatewayBenchEnv is what the benchmark sets on the gateway beyond what
// `make run` does: the rate limit far above anything two cores can
// produce, so the limiter is exercised but never rejects. A test parses it
// as the gateway does.
var gatewayBenchEnv = []string{"RATE_LIMIT_PER_MINUTE=1000000000"}

// quietLogs keeps logging from dominating what is measured.
const quietLogs = "LOG_LEVEL=warn"

// benchEnv is every declared service's settings beyond `make run`'s,
// with receiverAddr (host:port) the one address of this machine that
// sandbox webhooks may reach: the benchmark's receiver, in place of
// `esimctl webhooks listen`'s.
func benchEnv(names []string, receiverAddr string) map[string][]string {
	env := map[string][]string{}
	for _, name := range names {
		env[name] = []string{quietLogs}
	}
	env[platform.Gateway] = append(env[platform.Gateway], gatewayBenchEnv...)
	env[webhookService] = append(env[webhookService], "SANDBOX_PRIVATE_ENDPOINTS="+receiverAddr)
	return env
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// The targets, in the order they are measured and reported.
const (
	gatewayTarget = "gateway"
	bareTarget    = "bare net/http"
)

// loadGeneratorName names this process in the CPU-per-request tables.
const loadGeneratorName = "load generator (bench)"

// openLoopConns is how many keep-alive connections carry an open loop: a
// partner's client pool, not a connection per request. 128 hold every
// request in flight at half of either target's maximum (rate x mean
// latency stays below 128); when a target is slower, requests wait for a
// connection and that wait counts against the target. Far more connections
// would measure the cost of so many sockets, not the code under test.
const openLoopConns = 128

// openLoadFractions are the open-loop loads, as fractions of a target's
// maximum. The first is the one the latency target is judged at.
var openLoadFractions = []float64{0.5, 0.25}

type config struct {
	out string
	// keysDir is make run's (operator.DefaultKeysDir): the benchmark
	// runs on make run's databases, so it needs the keys that open them.
	keysDir  string
	duration time.Duration
	warmup   time.Duration
	// workers are the closed-loop concurrencies tried; a target's maximum
	// is the best of them.
	workers  []int
	trials   int
	pgURL    string
	redisURL string
	// only limits the run to the plan rows, the order rows, the webhook
	// rows, the install rows or the usage rows ("" for all).
	only string
	// webhookRate and webhookDuration are the webhook phase's steady load:
	// orders per second, for how long (after warmup).
	webhookRate     float64
	webhookDuration time.Duration
	// installProbe is how many eSIMs the lifecycle phase's closed loop
	// may install (installProbeEsims); usageDatabase and usageEsims are
	// the usage phase's scratch database and its eSIMs (usageDatabase,
	// usageEsims). Tests make them smaller.
	installProbe  int
	usageDatabase string
	usageEsims    int
}

// The phases -only selects.
const (
	onlyPlans    = "plans"
	onlyOrders   = "orders"
	onlyWebhooks = "webhooks"
	// onlyLifecycle is the install rows, onlyUsage the usage rows: the
	// eSIM after the sale (issue 31).
	onlyLifecycle = "lifecycle"
	onlyUsage     = "usage"
	// onlyPipeline is the webhook pipeline's throughput rows (issue 33).
	onlyPipeline = "pipeline"
)

// runs reports whether the run includes the phases named.
func (c config) runs(phases string) bool { return c.only == "" || c.only == phases }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	envOr := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	var cfg config
	var bareBody string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.out, "out", "BENCHMARKS.md", "write the markdown report to this `file` (empty: stdout only)")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "length of each measured phase (one per concurrency, then one per trial)")
	fs.DurationVar(&cfg.warmup, "warmup", 2*time.Second, "unmeasured load before each target's phases")
	fs.Func("concurrency", "closed-loop `workers`, each with its own keep-alive connection: a comma-separated list, each tried, the best kept as the maximum (default 16,64,256)", func(v string) error {
		w, err := parseWorkers(v)
		cfg.workers = w
		return err
	})
	fs.IntVar(&cfg.trials, "trials", 3, "open-loop trials per target, reported by their median p99")
	fs.StringVar(&cfg.pgURL, "pg-url", envOr("PG_URL", platform.DefaultPGURL), "Postgres server `URL` (env PG_URL)")
	fs.StringVar(&cfg.redisURL, "redis-url", envOr("REDIS_URL", platform.DefaultRedisURL), "Redis `URL` (env REDIS_URL)")
	fs.Func("only", "run only the `phases` named: plans (GET /v1/plans/{id} against a bare handler), orders (POST /v1/orders against pgbench, of 1 and 50 eSIMs, and GET /v1/orders/{id} against a bare handler) webhooks (an order's 201 to its signed webhook at a local receiver, against the receiver's own round trip), lifecycle (a sandbox eSIM's simulated install to its signed esim.installed webhook, at half the sustainable rate, against the receiver's own round trip), lists (GET /v1/orders, /v1/esims and /v1/events for an account of 1,000 rows against one of 1,000,000) pipeline (a backlog of order events delivered after the webhook service was paused, against pgbench doing a delivery's writes, then an order's webhook at half that rate) or usage (usage readings applied by ordering over its Postgres store, against pgbench updating the same rows); all by default", func(v string) error {
		phases := []string{onlyPlans, onlyOrders, onlyWebhooks, onlyLifecycle, onlyUsage, onlyLists, onlyPipeline}
		if !slices.Contains(phases, v) {
			return fmt.Errorf("want one of %s", strings.Join(phases, ", "))
		}
		cfg.only = v
		return nil
	})
	fs.Float64Var(&cfg.webhookRate, "webhook-rate", 100, "orders per second of the webhooks phase, a steady open loop")
	fs.DurationVar(&cfg.webhookDuration, "webhook-duration", 20*time.Second, "length of the webhooks and lifecycle phases' measured loads, and of their controls")
	// Internal: the baseline server is this binary re-executed.
	fs.StringVar(&bareBody, serveBareFlag, "", "internal: serve the body in `file` as the bare baseline")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if bareBody != "" {
		h, err := bareHandler(bareBody)
		if err != nil {
			return err
		}
		return serveChild(ctx, h, stdout, os.Stdin)
	}
	if cfg.workers == nil {
		cfg.workers = []int{16, 64, 256}
	}
	if cfg.trials < 1 || cfg.duration <= 0 || cfg.warmup < 0 {
		return fmt.Errorf("-trials must be >= 1, -duration > 0 and -warmup >= 0")
	}
	if cfg.webhookRate <= 0 || cfg.webhookRate*cfg.webhookDuration.Seconds() < 1 {
		return fmt.Errorf("-webhook-rate and -webhook-duration must make at least one order")
	}
	cfg.keysDir = operator.DefaultKeysDir(getenv)
	cfg.installProbe, cfg.usageDatabase, cfg.usageEsims = installProbeEsims, usageDatabase, usageEsims
	return benchmark(ctx, cfg, stdout, stderr)
}

func benchmark(ctx context.Context, cfg config, stdout, stderr io.Writer) (err error) {
	say := func(format string, args ...any) { fmt.Fprintf(stderr, "==> "+format+"\n", args...) }
	started := time.Now().UTC()

	// The order and usage rows compare with pgbench: a missing one is
	// said before the platform starts, not after the plan rows ran.
	if cfg.runs(onlyOrders) || cfg.runs(onlyUsage) || cfg.runs(onlyPipeline) {
		if _, err := findPgbench(); err != nil {
			return err
		}
	}

	// 0. What the host charges to wake a thread across cores, measured
	// while the machine is still quiet.
	say("measuring the cost of waking a thread on another CPU")
	wake := measureWakeCost(ctx)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted: %w", ctx.Err())
	case wake.err != nil:
		say("warning: wake-up cost not measured: %v", wake.err)
	case wake.crossCore == 0:
		say("wake-up round trip: %s on one CPU (the only one)", us(wake.sameCore))
	default:
		say("wake-up round trip: %s across CPUs, %s on one", us(wake.crossCore), us(wake.sameCore))
	}

	// 1. The platform as `make run` starts it, with benchEnv.
	declared, err := services.Find(".")
	if err != nil {
		return err
	}
	svcs, err := services.Load(declared)
	if err != nil {
		return err
	}
	runDir := filepath.Join(".run", "bench")
	// The webhook receiver listens first: the webhook service is told
	// its address, the one its sandbox deliveries may reach.
	rcv, err := startReceiver()
	if err != nil {
		return err
	}
	p, err := platform.Start(ctx, platform.Options{
		PGURL:    cfg.pgURL,
		RedisURL: cfg.redisURL,
		Services: svcs,
		RunDir:   runDir,
		KeysDir:  cfg.keysDir,
		KeyName:  "bench",
		Env:      benchEnv(svcs.Names(), rcv.addr),
		Progress: stderr,
	})
	if err != nil {
		rcv.close()
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		// The benchmark's key must not outlive it in the shared database.
		err = errors.Join(err, p.RevokeKeys(stopCtx), p.Stop(stopCtx))
	}()

	hooks, err := receiveWebhooks(ctx, p, rcv)
	if err != nil {
		return err
	}
	if hooks != nil {
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			err = errors.Join(err, hooks.close(stopCtx, say))
		}()
	}

	// The processes whose peak memory the report gives.
	var servers []proc
	for _, svc := range p.Services() {
		servers = append(servers, proc{svc.Name, svc.PID})
	}

	rep := report{
		started: started, cfg: cfg, cpus: runtime.NumCPU(), cpuModel: cpuModel(),
		goVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH, wake: wake,
	}
	if cfg.runs(onlyPlans) {
		bare, err := planPhases(ctx, cfg, p, runDir, say, &rep)
		if bare != nil {
			defer func() { _ = bare.stop() }()
			servers = append(servers, proc{bareTarget, bare.pid()})
		}
		if err != nil {
			return err
		}
	}
	if cfg.runs(onlyOrders) {
		orders, bare, err := orderPhases(ctx, cfg, p, hooks, runDir, say)
		if bare != nil {
			defer func() { _ = bare.stop() }()
			servers = append(servers, proc{bareReadTarget, bare.pid()})
		}
		if err != nil {
			return err
		}
		rep.orders = &orders
	}
	if cfg.runs(onlyWebhooks) {
		res, err := webhookPhase(ctx, cfg, p, hooks, say)
		if err != nil {
			return err
		}
		if res.pgbenchCPU, res.pgbenchUsage, res.pgbenchRun, err = pgbenchCPUPerOrder(ctx, cfg, runDir, say); err != nil {
			return err
		}
		rep.webhooks = &res
	}
	if cfg.runs(onlyLifecycle) {
		res, err := installPhase(ctx, cfg, p, hooks, say)
		if err != nil {
			return err
		}
		rep.installs = &res
	}
	if cfg.runs(onlyUsage) {
		res, err := usagePhase(ctx, cfg, runDir, say)
		if err != nil {
			return err
		}
		rep.usage = &res
	}
	if cfg.runs(onlyLists) {
		res, err := listsPhase(ctx, cfg, p, say)
		if err != nil {
			return err
		}
		rep.lists = &res
	}

	if cfg.runs(onlyPipeline) {
		res, err := pipelinePhase(ctx, cfg, p, hooks, runDir, say)
		if err != nil {
			return err
		}
		rep.pipeline = &res
	}

	// Peak memory while everything is still running.
	for _, pr := range servers {
		rep.mem = append(rep.mem, memory{name: pr.name, pid: pr.pid, hwm: peakRSS(pr.pid)})
	}

	md := rep.markdown()
	fmt.Fprint(stdout, md)
	if cfg.out != "" {
		if err := os.WriteFile(cfg.out, []byte(md), 0o644); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		say("wrote %s", cfg.out)
	}
	for _, r := range rep.allRows() {
		if errs, first := r.errors(); errs > 0 {
			say("warning: %s answered %d non-2xx or failed requests (e.g. %s)", r.name, errs, first)
		}
	}
	if w := rep.webhooks; w != nil {
		if w.errors > 0 {
			say("warning: %s: %d orders not answered 201 (e.g. %s)", webhookTarget, w.errors, w.firstErr)
		}
		if w.missing+w.unverified+w.duplicates > 0 {
			say("warning: %s: %d webhooks missing, %d unverified (e.g. %s), %d duplicates", webhookTarget, w.missing, w.unverified, w.firstUnverified, w.duplicates)
		}
		if w.control.Errors > 0 {
			say("warning: %s answered %d non-2xx or failed requests (e.g. %s)", webhookControlTarget, w.control.Errors, w.control.FirstErr)
		}
	}
	if i := rep.installs; i != nil {
		if i.errors+i.probe.Errors > 0 {
			say("warning: %s: %d installs not answered 200 (e.g. %s)", installTarget, i.errors+i.probe.Errors, firstOf(i.firstErr, i.probe.FirstErr))
		}
		if i.missing+i.unverified+i.duplicates > 0 {
			say("warning: %s: %d webhooks missing, %d unverified (e.g. %s), %d duplicates", installTarget, i.missing, i.unverified, i.firstUnverified, i.duplicates)
		}
	}
	if u := rep.usage; u != nil && u.ordering.Errors+u.control.Errors > 0 {
		say("warning: usage: %d batches of ordering failed (e.g. %s), %d of pgbench", u.ordering.Errors, u.ordering.FirstErr, u.control.Errors)
	}
	return nil
}

// planPhases measures the plan rows into rep: GET /v1/plans/{id} through
// the gateway and from a bare handler serving the same body, started here
// and returned for the caller to stop.
func planPhases(ctx context.Context, cfg config, p *platform.Platform, runDir string, say func(string, ...any), rep *report) (bare *childProcess, err error) {
	// 2. A real plan and its real body, so the baseline serves the same
	// bytes the gateway does.
	planID, body, err := pickPlan(ctx, p.APIBaseURL, p.SandboxKey, "")
	if err != nil {
		return nil, err
	}
	bodyFile := filepath.Join(runDir, "plan.json")
	if err := os.WriteFile(bodyFile, body, 0o644); err != nil {
		return nil, err
	}
	bare, err = startChild("bare baseline server", "-"+serveBareFlag, bodyFile)
	if err != nil {
		return nil, err
	}

	gatewayPlan, err := newTarget(gatewayTarget, p.APIBaseURL+"/plans/"+planID, p.SandboxKey)
	if err != nil {
		return bare, err
	}
	barePlan, err := newTarget(bareTarget, bare.url+"/v1/plans/"+planID, "")
	if err != nil {
		return bare, err
	}
	targets := []target{gatewayPlan, barePlan}

	// The processes behind each target, for the CPU-per-request table.
	loadGen := proc{loadGeneratorName, os.Getpid()}
	gatewayProcs := []proc{loadGen}
	for _, svc := range p.Services() {
		gatewayProcs = append(gatewayProcs, proc{svc.Name, svc.PID})
	}
	procs := map[string][]proc{
		gatewayTarget: gatewayProcs,
		bareTarget:    {loadGen, {bareTarget, bare.pid()}},
	}

	// The gateway's /metrics, before and after each of its phases, tells
	// how many requests each call to Redis and to the catalogue carried
	// and how long those calls took.
	var gatewayURL string
	for _, svc := range p.Services() {
		if svc.Name == platform.Gateway {
			gatewayURL = svc.URL
		}
	}
	measure := func(t target, phase func() result) (result, error) {
		var before callStats
		var err error
		if t.name == gatewayTarget {
			if before, err = readCalls(ctx, gatewayURL); err != nil {
				return result{}, err
			}
		}
		meter := startCPUMeter(procs[t.name])
		res := phase()
		res.CPU, res.Usage = meter.perRequest(res.Requests)
		if t.name == gatewayTarget {
			after, err := readCalls(ctx, gatewayURL)
			if err != nil {
				return result{}, err
			}
			res.Calls = after.minus(before)
		}
		return res, nil
	}

	// 3. For each target: warm up, find the maximum with closed loops at
	// each concurrency, then offer half of it open-loop to see latency
	// under a sustainable load.
	rows := make([]measurement, 0, len(targets))
	for _, t := range targets {
		if cfg.warmup > 0 {
			say("%s: warming up for %s", t.name, cfg.warmup)
			closedLoop(ctx, t, cfg.workers[0], cfg.warmup)
		}
		m := measurement{name: t.name}
		for _, workers := range cfg.workers {
			say("%s: closed loop, %d workers, %s", t.name, workers, cfg.duration)
			res, err := measure(t, func() result { return closedLoop(ctx, t, workers, cfg.duration) })
			if err != nil {
				return bare, err
			}
			loop := closedRun{workers: workers, result: res}
			say("%s: %.0f req/s, p50 %s, p99 %s, %d errors, machine %s busy, %s stolen", t.name, res.RPS(), ms(res.P50), ms(res.P99), res.Errors, percent(res.Usage.busy), percent(res.Usage.steal))
			m.closedRuns = append(m.closedRuns, loop)
			if err := ctx.Err(); err != nil {
				return bare, fmt.Errorf("interrupted: %w", err)
			}
		}
		// Then the open loops: the target's half of the maximum, and a
		// quarter of it to show how latency falls with load. Several trials
		// each, reported by their median p99: one trial's p99 swings with a
		// single stall of the shared machine.
		peak := m.best().result
		for _, fraction := range openLoadFractions {
			rate := peak.RPS() * fraction
			if rate < 1 {
				return bare, fmt.Errorf("%s: measured throughput %.1f req/s is too low to run the open loop (first error: %s)", t.name, peak.RPS(), peak.FirstErr)
			}
			load := openLoad{fraction: fraction}
			for i := range cfg.trials {
				say("%s: open loop at %.0f req/s (%s of max), %s (trial %d of %d)", t.name, rate, percent(fraction), cfg.duration, i+1, cfg.trials)
				res, err := measure(t, func() result { return openLoop(ctx, t, rate, openLoopConns, cfg.duration) })
				if err != nil {
					return bare, err
				}
				say("%s: p50 %s, p99 %s, %d errors, machine %s busy, %s stolen", t.name, ms(res.P50), ms(res.P99), res.Errors, percent(res.Usage.busy), percent(res.Usage.steal))
				load.trials = append(load.trials, res)
			}
			m.loads = append(m.loads, load)
		}
		rows = append(rows, m)
		if err := ctx.Err(); err != nil {
			return bare, fmt.Errorf("interrupted: %w", err)
		}
	}

	rep.planID, rep.bodyBytes, rep.rows = planID, len(body), rows
	return bare, nil
}

// pickPlan finds a plan through the public API with the key, as a partner
// would, and returns its id and the gateway's answer for it. filter is
// query parameters for GET /v1/plans, each followed by "&" ("type=fixed&").
func pickPlan(ctx context.Context, apiBase, key, filter string) (string, []byte, error) {
	get := func(url string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
		}
		return body, nil
	}
	list, err := get(apiBase + "/plans?" + filter + "limit=1")
	if err != nil {
		return "", nil, fmt.Errorf("pick a plan: %w", err)
	}
	var plans struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(list, &plans); err != nil {
		return "", nil, fmt.Errorf("pick a plan: decode GET /v1/plans: %w", err)
	}
	if len(plans.Data) == 0 || plans.Data[0].ID == "" {
		return "", nil, fmt.Errorf("pick a plan: GET /v1/plans?%slimit=1 returned no plan; is the catalogue seeded?", filter)
	}
	id := plans.Data[0].ID
	body, err := get(apiBase + "/plans/" + id)
	if err != nil {
		return "", nil, fmt.Errorf("fetch plan %s: %w", id, err)
	}
	return id, body, nil
}

// firstOf is the first of texts that is not empty.
func firstOf(texts ...string) string {
	for _, t := range texts {
		if t != "" {
			return t
		}
	}
	return ""
}

// parseWorkers reads a comma-separated list of positive concurrencies.
func parseWorkers(v string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number of workers", f)
		}
		out = append(out, n)
	}
	return out, nil
}
