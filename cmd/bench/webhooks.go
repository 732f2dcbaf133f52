package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/cmd/internal/platform"
	"github.com/esimplatform/esim/libs/internalauth"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
)

// The webhook rows, in the order they are measured and reported.
const (
	webhookTarget        = "order's 201 → its signed webhook read by the receiver"
	webhookControlTarget = "control: POST of a delivery to the same receiver, round trip"
	webhookOrdersRow     = "context: the orders themselves, from due to 201 read"
)

// The webhook phase's goals (issue text): reported, not a condition of
// resolving it.
const (
	targetWebhookP50 = 20 * time.Millisecond
	targetWebhookP99 = 100 * time.Millisecond
)

// webhookBenchProcess names this process in the webhook phase's CPU
// table: it places the orders, runs the receiver and the Kafka broker
// the platform embeds (the benchmark names no cluster).
const webhookBenchProcess = "bench (orders, receiver, embedded Kafka)"

// The services whose names services.yaml gives and the phase calls.
const (
	webhookService  = "webhook"
	orderingService = "ordering"
)

// ordersTopic and webhookGroup are where ordering's events wait for the
// webhook service: ordering's topic and the consumer group the webhook
// service joins (its KAFKA_TOPIC and KAFKA_GROUP defaults, which `make
// run` keeps). Read only to see that earlier phases' events are through.
const (
	ordersTopic  = "esim.orders.v1"
	webhookGroup = "webhook"
)

// orderCompleted is the event type of an order that was issued.
const orderCompleted = "order.completed"

// deliveryGrace bounds the wait, after the last order's 201, for webhooks
// still on their way; one that has not come by then is missing. The
// webhook service's retries come 1 s and 3 s after a failed first
// attempt, so a delivery retried once or twice still arrives within it.
const deliveryGrace = 10 * time.Second

// drainTimeout bounds the wait for earlier phases' events to leave the
// pipeline before the load starts: the orders phases leave tens of
// thousands of them, which would queue ahead of the measured ones.
const drainTimeout = 3 * time.Minute

// controlConns carries the control: as many connections as the webhook
// service keeps to one endpoint (PER_ENDPOINT_CONCURRENCY's default, and
// its client's idle connections per host), so both reach the receiver
// the same way.
const controlConns = 4

// controlPath is where the control posts: the receiver verifies and
// reads it as it does a delivery, then forgets it.
const controlPath = "/control"

// webhookResults are the webhook rows of a run.
type webhookResults struct {
	planID   string
	rate     float64
	duration time.Duration
	warmup   time.Duration
	// latency is from each measured order's 201 read to its webhook read,
	// clamped at 0 (Requests: the webhooks that came).
	latency result
	// orders is how long the measured orders took, from when each was
	// due to its 201 read: whether the platform kept up with the rate.
	orders result
	// placed counts the measured orders answered 201; errors (with an
	// example) those answered otherwise or not at all.
	placed, errors int
	firstErr       string
	// early counts webhooks read before their order's 201, and earliest
	// is how far ahead the furthest ahead came (negative).
	early    int
	earliest time.Duration
	// missing counts measured orders whose webhook had not come
	// deliveryGrace after the last 201.
	missing int
	// unverified counts deliveries refused: signature not verified, or no
	// event in the body. duplicates counts deliveries of an event (its
	// webhook-id) already delivered. others counts verified deliveries of
	// orders this phase did not measure: the warm-up's, earlier events'.
	unverified, duplicates, others int
	firstUnverified                string
	// deliveryBytes is the size of a delivery's body, the control's.
	deliveryBytes int
	control       result
	// stages split the latency at the points the platform records.
	stages    []stage
	stagesErr string
	// backlog is what of earlier events was still on its way when the
	// load started: zero unless the wait for it timed out.
	backlog backlog
	// queues are the largest backlog at each hop while the orders went
	// out and their webhooks came, sampled every queueSampleInterval:
	// where webhooks waited, if anywhere.
	queues sampledQueues
	// cpu is the CPU each process spent per order placed, warm-up
	// included, from the first order to the last webhook; usage the
	// machine's.
	cpu   []cpuShare
	usage usage
	// pgbenchCPU is the control of cpu: the whole machine's CPU per
	// order-shaped transaction of pgbench at the same rate for as long,
	// measured the same way; pgbenchUsage the machine's then, and
	// pgbenchRun the transactions.
	pgbenchCPU   time.Duration
	pgbenchUsage usage
	pgbenchRun   result
}

// stage is one leg of a webhook's way, over the measured orders.
type stage struct {
	name   string
	spread result
}

// webhookPhase measures how long after an order's 201 its signed webhook
// reaches a receiver in this process, at a steady open-loop rate, and the
// receiver's own round trip as the control.
// benchReceiver is the demo sandbox's webhook endpoint for the whole run:
// every order of every phase has its event delivered, as in production,
// and none is left retrying against a URL nobody answers.
type benchReceiver struct {
	rcv   *receiver
	hooks webhookv1.Webhook
	scope *webhookv1.Scope
	// restore puts the URL set before the run back.
	restore func(context.Context, func(string, ...any)) error
}

// receiveWebhooks makes rcv, started before the platform (benchEnv
// names its address), the demo partner's sandbox endpoint; nil when the
// platform has no webhook service, rcv then closed.
func receiveWebhooks(ctx context.Context, p *platform.Platform, rcv *receiver) (*benchReceiver, error) {
	if p.URL(webhookService) == "" {
		rcv.close()
		return nil, nil
	}
	operator := internalauth.Client(&http.Client{Timeout: 10 * time.Second}, p.OperatorToken)
	b := &benchReceiver{
		rcv:   rcv,
		hooks: webhookv1.NewWebhookProtobufClient(p.URL(webhookService), operator),
		scope: &webhookv1.Scope{AccountId: p.DemoAccountID, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX},
	}
	var err error
	if b.restore, err = setEndpoint(ctx, b.hooks, b.scope, b.rcv); err != nil {
		b.rcv.close()
		return nil, err
	}
	return b, nil
}

// close puts the previous URL back and stops the receiver.
func (b *benchReceiver) close(ctx context.Context, say func(string, ...any)) error {
	defer b.rcv.close()
	return b.restore(ctx, say)
}

func webhookPhase(ctx context.Context, cfg config, p *platform.Platform, b *benchReceiver, say func(string, ...any)) (res webhookResults, err error) {
	res.rate, res.duration, res.warmup = cfg.webhookRate, cfg.webhookDuration, cfg.warmup
	if b == nil {
		return res, fmt.Errorf("no %s service in services.yaml to deliver webhooks", webhookService)
	}
	operator := internalauth.Client(&http.Client{Timeout: 10 * time.Second}, p.OperatorToken)
	hooks, scope, rcv := b.hooks, b.scope, b.rcv

	// 1. Earlier phases' events through first, so none queues ahead of
	// these orders' at any hop.
	say("webhooks: waiting for earlier order events to leave ordering's outbox, Kafka and the webhook service")
	draining := time.Now()
	res.backlog, err = drainPipeline(ctx, p, hooks, scope, drainTimeout)
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("interrupted: %w", ctx.Err())
	case err != nil || res.backlog.total() > 0:
		say("warning: webhooks: the pipeline is not empty after %s (%s; %v): the measured orders queue behind it", time.Since(draining).Round(time.Second), res.backlog, err)
	default:
		say("webhooks: no earlier event on its way (waited %s)", time.Since(draining).Round(time.Millisecond))
	}

	// 3. A fixed plan, and money for every order of it.
	planID, plan, err := pickPlan(ctx, p.APIBaseURL, p.SandboxKey, "type=fixed&")
	if err != nil {
		return res, err
	}
	res.planID = planID
	orders := int(math.Ceil(cfg.webhookRate * (cfg.warmup + cfg.webhookDuration).Seconds()))
	if err := fundOrders(ctx, p, operator, plan, orders, say); err != nil {
		return res, err
	}

	// 4. The load. The warm-up's orders go out the same way, unmeasured:
	// the first after an idle spell find every connection to dial.
	api := &partnerAPI{ctx: ctx, base: p.APIBaseURL, key: p.SandboxKey, client: orderClient()}
	body := fmt.Appendf(nil, `{"plan_id":%q,"quantity":1}`, planID)
	say("webhooks: %.0f orders/s for %s (after %s of warm-up), each webhook timed from its order's 201", cfg.webhookRate, cfg.webhookDuration, cfg.warmup)
	procs := []proc{{webhookBenchProcess, os.Getpid()}}
	for _, svc := range p.Services() {
		procs = append(procs, proc{svc.Name, svc.PID})
	}
	meter := startCPUMeter(procs)
	sampling, stopSampling := context.WithCancel(ctx)
	queues := make(chan sampledQueues, 1)
	go func() { queues <- sampleQueues(sampling, p, hooks, scope) }()
	placed := placeOrders(ctx, api, body, "bench-"+randomHex(6)+"-webhook-", cfg.webhookRate, cfg.warmup, cfg.webhookDuration)
	if err := ctx.Err(); err != nil {
		stopSampling()
		return res, fmt.Errorf("interrupted: %w", err)
	}

	// 5. What is still on its way gets deliveryGrace.
	var ids []string
	for _, o := range placed {
		if o.id != "" {
			ids = append(ids, o.id)
		}
	}
	rcv.await(ctx, ids, time.Now().Add(deliveryGrace))
	stopSampling()
	res.queues = <-queues
	got := rcv.snapshot()
	res.tally(placed, got)
	res.cpu, res.usage = meter.perRequest(len(placed))
	say("webhooks: %d orders, p50 %s, p90 %s, p99 %s, max %s; %d errors, %d missing, %d unverified, %d duplicates, %d before their 201",
		res.placed, ms(res.latency.P50), ms(res.latency.P90), ms(res.latency.P99), ms(res.latency.Max), res.errors, res.missing, res.unverified, res.duplicates, res.early)

	// 6. Where the time went, from what the platform recorded.
	starts, err := attemptStarts(ctx, hooks, scope, measuredIDs(placed))
	if err != nil {
		res.stagesErr = err.Error()
		say("warning: webhooks: attempts not read, so no split by stage: %v", err)
	}
	res.stages = stagesOf(placed, got, starts)

	// 7. The control: one delivery's bytes, signed afresh, at the same
	// rate to the same receiver.
	sample, ok := rcv.sample()
	if !ok {
		say("warning: webhooks: no webhook verified, so no delivery to send as the control")
		return res, nil
	}
	res.deliveryBytes = len(sample.body)
	control, err := rcv.controlTarget(sample)
	if err != nil {
		return res, err
	}
	say("%s: %.0f/s for %s", webhookControlTarget, cfg.webhookRate, cfg.webhookDuration)
	res.control = openLoop(ctx, control, cfg.webhookRate, controlConns, cfg.webhookDuration)
	say("%s: p50 %s, p99 %s, %d errors", webhookControlTarget, ms(res.control.P50), ms(res.control.P99), res.control.Errors)
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("interrupted: %w", err)
	}
	return res, nil
}

// pgbenchCPUClients is how many connections the CPU control spreads its
// rate over: enough that a slow transaction never holds up the schedule.
const pgbenchCPUClients = 4

// pgbenchCPUPerOrder is the control of the webhook phase's CPU per order:
// the order-shaped pgbench transaction open-loop at the phase's rate for
// its warm-up and duration (-R: pgbench's own schedule), and the whole
// machine's CPU per transaction then, read from /proc as the orders' is.
func pgbenchCPUPerOrder(ctx context.Context, cfg config, runDir string, say func(string, ...any)) (time.Duration, usage, result, error) {
	b, err := preparePgbench(ctx, cfg.pgURL, pgbenchDatabase, filepath.Join(runDir, "pgbench"), pgbenchScript)
	if err != nil {
		return 0, usage{}, result{}, err
	}
	say("%s: %.0f/s for %s, for its CPU per transaction", pgbenchTarget, cfg.webhookRate, cfg.warmup+cfg.webhookDuration)
	meter := startCPUMeter(nil)
	res, err := b.run(ctx, pgbenchCPUClients, cfg.warmup+cfg.webhookDuration, "-R", strconv.FormatFloat(cfg.webhookRate, 'f', -1, 64))
	if err != nil {
		return 0, usage{}, res, err
	}
	shares, u := meter.perRequest(res.Requests)
	if len(shares) == 0 {
		return 0, u, res, nil
	}
	total := shares[len(shares)-1].perRequest
	say("%s: %d transactions, %s of CPU each", pgbenchTarget, res.Requests, us(total))
	return total, u, res, nil
}

// placedOrder is one order of the phase.
type placedOrder struct {
	id string // "" when it was not placed
	// due is when it was to be sent, read when its 201 had been read,
	// whole.
	due, read time.Time
	// measured is false for the warm-up's orders.
	measured bool
	err      error
}

// orderClient keeps a connection for every order in flight: at a steady
// rate few are, but a stall of the machine sends the next ones together,
// and dialling anew for each would add to what is measured.
func orderClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = openLoopConns
	return &http.Client{Transport: tr, Timeout: requestTimeout}
}

// placeOrders places orders of body at rate, open-loop, for warmup and then
// d: order n is due at start + n/rate and goes out then on a goroutine of
// its own, whatever became of the earlier ones, so a slow answer never
// delays the next order (no coordinated omission). Each carries its own
// Idempotency-Key, keyPrefix and n.
func placeOrders(ctx context.Context, api *partnerAPI, body []byte, keyPrefix string, rate float64, warmup, d time.Duration) []placedOrder {
	warm := int(rate * warmup.Seconds())
	total := warm + int(rate*d.Seconds())
	interval := float64(time.Second) / rate
	placed := make([]placedOrder, total)
	var wg sync.WaitGroup
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	start := time.Now()
	for n := range total {
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
		wg.Go(func() {
			o := &placed[n]
			o.measured, o.due = n >= warm, due
			status, answer, err := api.send(http.MethodPost, "/orders", body, keyPrefix+strconv.Itoa(n))
			o.read = time.Now()
			if err == nil && status != http.StatusCreated {
				err = fmt.Errorf("HTTP %d: %.200s", status, answer)
			}
			if err == nil {
				var created struct {
					Data struct {
						ID string `json:"id"`
					} `json:"data"`
				}
				if jerr := json.Unmarshal(answer, &created); jerr != nil || created.Data.ID == "" {
					err = fmt.Errorf("201 without an order id (%v): %.200s", jerr, answer)
				}
				o.id = created.Data.ID
			}
			if err != nil {
				o.id, o.err = "", err
			}
		})
	}
	wg.Wait()
	return placed
}

// measuredIDs are the ids of the measured orders placed.
func measuredIDs(placed []placedOrder) map[string]bool {
	ids := map[string]bool{}
	for _, o := range placed {
		if o.measured && o.id != "" {
			ids[o.id] = true
		}
	}
	return ids
}

// tally fills res from the orders placed and what the receiver got.
func (res *webhookResults) tally(placed []placedOrder, got receiverState) {
	ours := map[string]bool{}
	var latencies, orders []time.Duration
	for _, o := range placed {
		if o.id != "" {
			ours[o.id] = true
		}
		if !o.measured {
			continue
		}
		if o.err != nil {
			res.errors++
			if res.firstErr == "" {
				res.firstErr = o.err.Error()
			}
			continue
		}
		res.placed++
		orders = append(orders, o.read.Sub(o.due))
		a, ok := got.arrivals[o.id]
		if !ok {
			res.missing++
			continue
		}
		d := a.at.Sub(o.read)
		if d < 0 {
			// The webhook beat the client's read of the 201: the order's
			// answer and its event left ordering together.
			res.early++
			res.earliest = min(res.earliest, d)
			d = 0
		}
		latencies = append(latencies, d)
	}
	for id := range got.arrivals {
		if !ours[id] {
			res.others++
		}
	}
	res.unverified, res.duplicates, res.firstUnverified = got.unverified, got.duplicates, got.firstUnverified
	res.latency = spreadOf(latencies)
	res.latency.Rate = res.rate
	res.orders = spreadOf(orders)
	res.orders.Rate, res.orders.Errors = res.rate, res.errors
}

// spreadOf is the percentiles of ds, in a result's fields.
func spreadOf(ds []time.Duration) result {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return result{Requests: len(sorted), P50: quantile(sorted, 50), P90: quantile(sorted, 90), P99: quantile(sorted, 99), Max: quantile(sorted, 100)}
}

// stagesOf splits each measured webhook's way at the points the platform
// records: when ordering completed the order (the event's created_at),
// and when the webhook service started the attempt that delivered it.
// The clocks are all this machine's.
func stagesOf(placed []placedOrder, got receiverState, starts map[string]time.Time) []stage {
	var answered, toAttempt, attempt []time.Duration
	for _, o := range placed {
		a, ok := got.arrivals[o.id]
		if !o.measured || o.id == "" || !ok || a.completed.IsZero() {
			continue
		}
		answered = append(answered, o.read.Sub(a.completed))
		if started, ok := starts[o.id]; ok {
			toAttempt = append(toAttempt, started.Sub(a.completed))
			attempt = append(attempt, a.at.Sub(started))
		}
	}
	if len(answered) == 0 {
		return nil
	}
	stages := []stage{{"order completed in ordering → its 201 read by the bench (ordering's answer, the gateway)", spreadOf(answered)}}
	if len(toAttempt) > 0 {
		stages = append(stages,
			stage{"order completed → the webhook service starts the attempt (outbox relay, Kafka, consumer, stored, a worker's claim)", spreadOf(toAttempt)},
			stage{"attempt started → webhook read by the receiver (signing, the HTTP POST)", spreadOf(attempt)})
	}
	return stages
}

// attemptStarts reads when the first attempt of each measured order's
// event started, from the webhook service's events, newest first.
func attemptStarts(ctx context.Context, hooks webhookv1.Webhook, scope *webhookv1.Scope, want map[string]bool) (map[string]time.Time, error) {
	const pageSize = 100
	starts := map[string]time.Time{}
	// Newer events than the measured ones are none but a few of the
	// grace period's; the pages stop where the measured ones are done.
	maxPages := int32(len(want)/pageSize + 10)
	for page := int32(1); page <= maxPages && len(starts) < len(want); page++ {
		resp, err := hooks.ListEvents(ctx, &webhookv1.ListEventsRequest{Scope: scope, Type: orderCompleted, Page: page, Limit: pageSize})
		if err != nil {
			return starts, fmt.Errorf("list the demo sandbox's events: %w", err)
		}
		for _, e := range resp.GetEvents() {
			if want[e.GetOrderId()] && len(e.GetAttempts()) > 0 {
				starts[e.GetOrderId()] = e.GetAttempts()[0].GetStartedAt().AsTime()
			}
		}
		if len(resp.GetEvents()) < pageSize {
			break
		}
	}
	return starts, nil
}

// setEndpoint makes rcv the demo sandbox's webhook endpoint and has it
// verify with the scope's secret. restore puts back the URL that was set
// before; there is no unsetting one, so with none before, the receiver's
// stays, and says so.
func setEndpoint(ctx context.Context, hooks webhookv1.Webhook, scope *webhookv1.Scope, rcv *receiver) (restore func(context.Context, func(string, ...any)) error, err error) {
	var previous string
	before, err := hooks.GetEndpoint(ctx, &webhookv1.GetEndpointRequest{Scope: scope})
	if twerr, ok := errors.AsType[twirp.Error](err); err != nil && !(ok && twerr.Code() == twirp.NotFound) {
		return nil, fmt.Errorf("read the demo partner's sandbox webhook endpoint: %w", err)
	}
	if err == nil {
		previous = before.GetUrl()
	}
	set, err := hooks.SetEndpoint(ctx, &webhookv1.SetEndpointRequest{Scope: scope, Url: rcv.url})
	if err != nil {
		return nil, fmt.Errorf("set the demo partner's sandbox webhook endpoint to %s: %w", rcv.url, err)
	}
	if err := rcv.verifyWith(set.GetSecret()); err != nil {
		return nil, err
	}
	return func(ctx context.Context, say func(string, ...any)) error {
		if previous == "" {
			say("webhooks: the demo partner's sandbox webhook URL stays %s, closed now: it had none before, and none can be unset", rcv.url)
			return nil
		}
		if _, err := hooks.SetEndpoint(ctx, &webhookv1.SetEndpointRequest{Scope: scope, Url: previous}); err != nil {
			return fmt.Errorf("put the demo partner's sandbox webhook URL back to %s: %w", previous, err)
		}
		return nil
	}, nil
}

// fundOrders tops the demo sandbox balance up when it cannot pay for n
// orders of plan (GET /v1/plans/{id}'s answer), so that none is refused.
func fundOrders(ctx context.Context, p *platform.Platform, operator *http.Client, plan []byte, n int, say func(string, ...any)) error {
	var answer struct {
		Data struct {
			Price struct {
				Amount json.Number `json:"amount"`
			} `json:"price"`
		} `json:"data"`
	}
	if err := json.Unmarshal(plan, &answer); err != nil {
		return fmt.Errorf("read the plan's price: %w", err)
	}
	price, err := answer.Data.Price.Amount.Float64()
	if err != nil {
		return fmt.Errorf("read the plan's price %q: %w", answer.Data.Price.Amount, err)
	}
	need := int64(math.Ceil(price*100)) * int64(n)
	wallet := walletv1.NewWalletProtobufClient(p.URL(platform.Wallet), operator)
	balance, err := wallet.GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: p.DemoAccountID, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX, Currency: "USD"})
	if err != nil {
		return fmt.Errorf("read the demo partner's sandbox balance: %w", err)
	}
	if balance.GetAmountMinor() >= need {
		return nil
	}
	say("webhooks: topping the demo partner's sandbox balance up by %d.%02d USD for %d orders", benchTopUpMinor/100, benchTopUpMinor%100, n)
	if _, err := wallet.TopUp(ctx, &walletv1.TopUpRequest{
		AccountId: p.DemoAccountID, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX, Currency: "USD",
		AmountMinor: benchTopUpMinor, Reference: "make-bench-webhooks-" + randomHex(6), Note: "make bench: the webhook phase's orders",
	}); err != nil {
		return fmt.Errorf("top up the demo partner's sandbox balance: %w", err)
	}
	return nil
}

// backlog is what of orders' events is still on its way to an endpoint;
// notRead where it could not be read.
type backlog struct {
	outbox  int64 // in ordering's outbox, not yet published
	kafka   int64 // published, not yet consumed by the webhook service
	pending int64 // the demo sandbox's deliveries waiting for an attempt
}

// notRead marks a hop whose queue could not be read.
const notRead = -1

func (b backlog) total() int64 { return max(0, b.outbox) + max(0, b.kafka) + max(0, b.pending) }

func (b backlog) String() string {
	n := func(v int64) string {
		if v == notRead {
			return "?"
		}
		return strconv.FormatInt(v, 10)
	}
	return fmt.Sprintf("%s events in ordering's outbox, %s in Kafka, %s deliveries pending", n(b.outbox), n(b.kafka), n(b.pending))
}

// drainPipeline waits until no earlier event is on its way, or timeout,
// and returns what still was then. A backlog that cannot be read for
// drainErrorBudget is given up on with the error.
func drainPipeline(ctx context.Context, p *platform.Platform, hooks webhookv1.Webhook, scope *webhookv1.Scope, timeout time.Duration) (backlog, error) {
	kc := &kafkago.Client{Addr: kafkago.TCP(p.KafkaBrokers...), Timeout: 5 * time.Second}
	orderingURL := p.URL(orderingService)
	deadline := time.Now().Add(timeout)
	var failingSince time.Time
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		b, err := readBacklog(ctx, kc, orderingURL, hooks, scope)
		switch {
		case err == nil:
			failingSince = time.Time{}
		case failingSince.IsZero():
			// The topic and the group appear in the first seconds of a
			// fresh platform: a failure is worth a few tries.
			failingSince = time.Now()
		}
		if (err == nil && b.total() == 0) || time.Now().After(deadline) ||
			(err != nil && time.Since(failingSince) > drainErrorBudget) {
			return b, err
		}
		select {
		case <-ctx.Done():
			return b, ctx.Err()
		case <-tick.C:
		}
	}
}

// drainErrorBudget is how long drainPipeline tries to read the backlog
// before it gives up.
const drainErrorBudget = 15 * time.Second

// queueSampleInterval is how often the hops' queues are read during the
// load: a few reads a second cost the machine little next to 100 orders.
const queueSampleInterval = 250 * time.Millisecond

// sampledQueues is the largest backlog read at each hop, how many reads
// were made and failed, and the first failure. Each hop is read on its
// own: ordering counts its outbox with a pool connection, which a
// saturated ordering may not spare within its /metrics budget.
type sampledQueues struct {
	peak          backlog
	reads, failed int
	err           string
}

// sampleQueues reads the backlog at each hop until ctx ends.
func sampleQueues(ctx context.Context, p *platform.Platform, hooks webhookv1.Webhook, scope *webhookv1.Scope) sampledQueues {
	kc := &kafkago.Client{Addr: kafkago.TCP(p.KafkaBrokers...), Timeout: 5 * time.Second}
	s := sampledQueues{peak: backlog{notRead, notRead, notRead}}
	tick := time.NewTicker(queueSampleInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return s
		case <-tick.C:
		}
		b, err := readBacklog(ctx, kc, p.URL(orderingService), hooks, scope)
		if ctx.Err() != nil {
			return s
		}
		s.reads++
		if err != nil {
			s.failed++
			if s.err == "" {
				s.err = err.Error()
			}
		}
		s.peak = backlog{max(s.peak.outbox, b.outbox), max(s.peak.kafka, b.kafka), max(s.peak.pending, b.pending)}
	}
}

// readBacklog reads the backlog at each hop, not at one instant but
// within a few milliseconds; a hop that cannot be read is notRead, and
// its error joined to the others'.
func readBacklog(ctx context.Context, kc *kafkago.Client, orderingURL string, hooks webhookv1.Webhook, scope *webhookv1.Scope) (backlog, error) {
	b := backlog{notRead, notRead, notRead}
	var errs []error
	if n, err := outboxWaiting(ctx, orderingURL); err == nil {
		b.outbox = n
	} else {
		errs = append(errs, err)
	}
	if n, err := consumerLag(ctx, kc, ordersTopic, webhookGroup); err == nil {
		b.kafka = n
	} else {
		errs = append(errs, err)
	}
	if pending, err := hooks.ListEvents(ctx, &webhookv1.ListEventsRequest{Scope: scope, Status: webhookv1.DeliveryStatus_DELIVERY_STATUS_PENDING, Limit: 1}); err == nil {
		b.pending = pending.GetTotal()
	} else {
		errs = append(errs, fmt.Errorf("count pending deliveries: %w", err))
	}
	return b, errors.Join(errs...)
}

// outboxWaiting reads ordering's count of events not yet published from
// its /metrics (ordering.outbox.events.waiting).
func outboxWaiting(ctx context.Context, orderingURL string) (int64, error) {
	const series = "ordering_outbox_events_waiting"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, orderingURL+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read ordering's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("read ordering's metrics: %s", resp.Status)
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		if !strings.HasPrefix(line, series+"{") && !strings.HasPrefix(line, series+" ") {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("ordering's %s: %w", series, err)
		}
		return int64(v), nil
	}
	if err := lines.Err(); err != nil {
		return 0, fmt.Errorf("read ordering's metrics: %w", err)
	}
	return 0, fmt.Errorf("ordering's metrics have no %s", series)
}

// consumerLag is how many messages of topic group has not committed yet,
// over every partition.
func consumerLag(ctx context.Context, kc *kafkago.Client, topic, group string) (int64, error) {
	meta, err := kc.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, fmt.Errorf("Kafka metadata of %s: %w", topic, err)
	}
	i := slices.IndexFunc(meta.Topics, func(t kafkago.Topic) bool { return t.Name == topic })
	if i < 0 {
		return 0, fmt.Errorf("no Kafka topic %s yet", topic)
	}
	if err := meta.Topics[i].Error; err != nil {
		return 0, fmt.Errorf("Kafka topic %s: %w", topic, err)
	}
	var partitions []int
	var ends []kafkago.OffsetRequest
	for _, part := range meta.Topics[i].Partitions {
		partitions = append(partitions, part.ID)
		ends = append(ends, kafkago.FirstOffsetOf(part.ID), kafkago.LastOffsetOf(part.ID))
	}
	committed, err := kc.OffsetFetch(ctx, &kafkago.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: partitions}})
	if err == nil {
		err = committed.Error
	}
	if err != nil {
		return 0, fmt.Errorf("Kafka offsets of group %s: %w", group, err)
	}
	offsets, err := kc.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: ends}})
	if err != nil {
		return 0, fmt.Errorf("Kafka offsets of %s: %w", topic, err)
	}
	next := map[int]int64{}
	for _, c := range committed.Topics[topic] {
		if c.Error != nil {
			return 0, fmt.Errorf("Kafka offset of group %s on partition %d: %w", group, c.Partition, c.Error)
		}
		next[c.Partition] = c.CommittedOffset
	}
	var lag int64
	for _, o := range offsets.Topics[topic] {
		if o.Error != nil {
			return 0, fmt.Errorf("Kafka offsets of %s partition %d: %w", topic, o.Partition, o.Error)
		}
		from, ok := next[o.Partition]
		if !ok || from < 0 {
			from = o.FirstOffset // nothing committed: the group starts at the first
		}
		lag += max(0, o.LastOffset-from)
	}
	return lag, nil
}

// receiver is a partner's webhook endpoint: it verifies each delivery as
// the Standard Webhooks library does, and notes when the first delivery
// of each order's event had been read.
type receiver struct {
	url string
	// addr is where it listens, host:port.
	addr     string
	srv      *http.Server
	verifier atomic.Pointer[standardwebhooks.Webhook]
	// arrived holds one wake-up for await after a delivery is recorded.
	arrived chan struct{}

	mu    sync.Mutex
	state receiverState
	// first is the first verified delivery, the control's model, and
	// firstOf the first of each event type.
	first   delivery
	firstOf map[string]delivery
}

// receiverState is what the receiver got.
type receiverState struct {
	// arrivals are the first verified delivery of each order, by order id.
	arrivals map[string]arrival
	// events counts verified deliveries by webhook-id.
	events                 map[string]int
	unverified, duplicates int
	firstUnverified        string
}

// arrival is when the first webhook about an order or eSIM (data.id) had
// been read, of which event, and when, says its payload, the event
// happened.
type arrival struct {
	at, completed time.Time
	event         string
}

// delivery is a request as the webhook service sent it.
type delivery struct {
	header http.Header
	body   []byte
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	r := &receiver{
		url:     "http://" + ln.Addr().String() + "/webhooks",
		addr:    ln.Addr().String(),
		arrived: make(chan struct{}, 1),
		state:   receiverState{arrivals: map[string]arrival{}, events: map[string]int{}},
		firstOf: map[string]delivery{},
	}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }() // ends with close
	return r, nil
}

func (r *receiver) close() { _ = r.srv.Close() }

// verifyWith sets the secret deliveries are verified with.
func (r *receiver) verifyWith(secret string) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return fmt.Errorf("the endpoint's signing secret: %w", err)
	}
	r.verifier.Store(wh)
	return nil
}

// ServeHTTP reads, verifies and records a delivery, as a partner's
// endpoint would, and answers 204; 401 to one it cannot verify, which the
// webhook service then tries again. The control's requests take the same
// way but are not recorded.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	at := time.Now()
	if err != nil {
		http.Error(w, "cannot read the body", http.StatusBadRequest)
		return
	}
	var event struct {
		Event     string    `json:"event"`
		CreatedAt time.Time `json:"created_at"`
		Data      struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	verifier := r.verifier.Load()
	switch {
	case verifier == nil:
		err = errors.New("no secret yet")
	default:
		err = verifier.Verify(body, req.Header)
	}
	if err == nil {
		if jerr := json.Unmarshal(body, &event); jerr != nil || event.Data.ID == "" {
			err = fmt.Errorf("no event with data.id in the body (%v)", jerr)
		}
	}
	if req.URL.Path == controlPath {
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}

	r.mu.Lock()
	s := &r.state
	switch id := req.Header.Get(standardwebhooks.HeaderWebhookID); {
	case err != nil:
		s.unverified++
		if s.firstUnverified == "" {
			s.firstUnverified = err.Error()
		}
	case s.events[id] > 0:
		s.events[id]++
		s.duplicates++
	default:
		s.events[id]++
		if _, ok := s.arrivals[event.Data.ID]; !ok {
			s.arrivals[event.Data.ID] = arrival{at: at, completed: event.CreatedAt, event: event.Event}
		}
		if r.first.body == nil {
			r.first = delivery{header: req.Header.Clone(), body: body}
		}
		if _, ok := r.firstOf[event.Event]; !ok {
			r.firstOf[event.Event] = delivery{header: req.Header.Clone(), body: body}
		}
	}
	r.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	select {
	case r.arrived <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusNoContent)
}

// snapshot is a copy of what the receiver got so far.
func (r *receiver) snapshot() receiverState {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.state
	s.arrivals = make(map[string]arrival, len(r.state.arrivals))
	for k, v := range r.state.arrivals {
		s.arrivals[k] = v
	}
	s.events = nil
	return s
}

// sample is the first verified delivery.
func (r *receiver) sample() (delivery, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first, r.first.body != nil
}

// sampleOf is the first verified delivery of event type typ, else the
// first of any.
func (r *receiver) sampleOf(typ string) (delivery, bool) {
	r.mu.Lock()
	d, ok := r.firstOf[typ]
	r.mu.Unlock()
	if ok {
		return d, true
	}
	return r.sample()
}

// await returns once every order of ids has its webhook, ctx ends or
// deadline passes.
func (r *receiver) await(ctx context.Context, ids []string, deadline time.Time) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		r.mu.Lock()
		done := !slices.ContainsFunc(ids, func(id string) bool { _, ok := r.state.arrivals[id]; return !ok })
		r.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		case <-r.arrived:
		}
	}
}

// controlTarget posts d to the receiver's control path, signed afresh
// with the endpoint's secret: a delivery's bytes and headers, which the
// receiver reads and verifies as it does the webhook service's.
func (r *receiver) controlTarget(d delivery) (target, error) {
	t, err := newTarget(webhookControlTarget, strings.TrimSuffix(r.url, "/webhooks")+controlPath, "")
	if err != nil {
		return t, err
	}
	verifier := r.verifier.Load()
	id := d.header.Get(standardwebhooks.HeaderWebhookID)
	now := time.Now()
	signature, err := verifier.Sign(id, now, d.body)
	if err != nil {
		return t, fmt.Errorf("sign the control's delivery: %w", err)
	}
	get := string(t.request[:len(t.request)-len("\r\n")])
	var req strings.Builder
	req.WriteString("POST" + get[len("GET"):])
	fmt.Fprintf(&req, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(d.body))
	fmt.Fprintf(&req, "%s: %s\r\n%s: %d\r\n%s: %s\r\n\r\n", standardwebhooks.HeaderWebhookID, id,
		standardwebhooks.HeaderWebhookTimestamp, now.Unix(), standardwebhooks.HeaderWebhookSignature, signature)
	t.request = append([]byte(req.String()), d.body...)
	return t, nil
}

// settle waits until earlier phases' events have left ordering's outbox,
// Kafka and the webhook service, or drainTimeout, so that the next phase
// measures its own work and not their backlog; it returns what was still
// on its way. what names the phase in what it says.
func (b *benchReceiver) settle(ctx context.Context, p *platform.Platform, what string, say func(string, ...any)) backlog {
	if b == nil {
		return backlog{}
	}
	say("%s: waiting for earlier events to leave ordering, Kafka and the webhook service", what)
	started := time.Now()
	left, err := drainPipeline(ctx, p, b.hooks, b.scope, drainTimeout)
	if err != nil || left.total() > 0 {
		say("warning: %s: the pipeline is not empty after %s (%s; %v)", what, time.Since(started).Round(time.Second), left, err)
	}
	return left
}

// webhooksSection names the webhook rows' section, in its heading and in
// the Goals table.
const webhooksSection = "Webhooks"

// section is the report's Webhooks section: the rows, what became of the
// deliveries, CPU per order and the split by stage.
func (w *webhookResults) section(p func(string, ...any)) {
	p("## %s\n\n", webhooksSection)
	methodLine(p, "webhooks", "Sandbox orders of one eSIM of plan %s through the gateway at a steady %g orders/s for %s after %s of warm-up, each timed from its 201 to its signed webhook read by the bench's receiver, against the receiver's own round trip for the first delivery (%d-byte body)",
		w.planID, w.rate, w.duration, w.warmup, w.deliveryBytes)
	c := w.control
	spreadTable(p, "%g", spreadLine{webhookTarget, w.rate, w.latency, w.errors}, spreadLine{webhookControlTarget, c.Rate, c, c.Errors},
		spreadLine{webhookOrdersRow, w.orders.Rate, w.orders, w.orders.Errors})
	w.deliveries(p)
	if c.P50 > 0 && c.P99 > 0 {
		p("Webhook / control: p50 **%.0f×** (%s / %s), p99 **%.0f×** (%s / %s)\n\n",
			float64(w.latency.P50)/float64(c.P50), ms(w.latency.P50), ms(c.P50), float64(w.latency.P99)/float64(c.P99), ms(w.latency.P99), ms(c.P99))
	}
	w.cpuTable(p)
	w.stagesTable(p)
}

// deliveries says what became of the measured orders' webhooks, and where
// they queued.
func (w *webhookResults) deliveries(p func(string, ...any)) {
	p("Deliveries: %d of the %d orders answered 201 had their webhook, verified; %d missing, %d unverified, %d duplicates.", w.latency.Requests, w.placed, w.missing, w.unverified, w.duplicates)
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
		p(" The largest queue at each hop (read every %s): %s", queueSampleInterval, q.peak)
		if q.failed > 0 {
			p(" (%d of %d reads failed, e.g. %s)", q.failed, q.reads, q.err)
		}
		p(".")
	}
	if w.backlog.total() > 0 {
		p(" The load started with earlier events still on their way (%s): the measured ones queued behind them.", w.backlog)
	}
	p("\n\n")
}

// cpuTable is the CPU each process spent per order placed.
func (w *webhookResults) cpuTable(p func(string, ...any)) {
	if len(w.cpu) == 0 {
		return
	}
	methodLine(p, "cpu-per-order", "CPU per order placed (user + system, from /proc, warm-up included) from the first order to the last webhook, by process; the machine was %s busy, %s stolen by the hypervisor",
		percent(w.usage.busy), percent(w.usage.steal))
	p("| process | CPU per order |\n|---|---:|\n")
	var total time.Duration
	for _, c := range w.cpu {
		p("| %s | %s |\n", c.name, us(c.perRequest))
		if c.name == totalShare {
			total = c.perRequest
		}
	}
	if w.pgbenchCPU > 0 {
		p("| control: pgbench's order-shaped transaction at %g/s, the whole machine (%d transactions; machine %s busy) | %s |\n",
			w.rate, w.pgbenchRun.Requests, percent(w.pgbenchUsage.busy), us(w.pgbenchCPU))
		p("\nAn order end to end with its webhook / pgbench's transaction, CPU: **%.1f×** (%s / %s)\n", float64(total)/float64(w.pgbenchCPU), us(total), us(w.pgbenchCPU))
	}
	p("\n")
}

// stagesTable splits the latency at the points the platform records.
func (w *webhookResults) stagesTable(p func(string, ...any)) {
	if len(w.stages) == 0 && w.stagesErr == "" {
		return
	}
	p("### Where a webhook's time goes\n\n")
	methodLine(p, "where-a-webhooks-time-goes", "Split at the order's completion in ordering and the start of the webhook service's attempt that delivered it; a webhook's latency is the second and third rows less the first")
	if w.stagesErr != "" {
		p("Attempts not read (%s).\n\n", w.stagesErr)
	}
	if len(w.stages) > 0 {
		p("| stage | measured | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|---:|\n")
		for _, s := range w.stages {
			p("| %s | %d | %s | %s | %s | %s |\n", s.name, s.spread.Requests, ms(s.spread.P50), ms(s.spread.P90), ms(s.spread.P99), ms(s.spread.Max))
		}
		p("\n")
	}
}

// goals are the webhook rows' goals. Latency of the webhooks that came
// says nothing of those that did not: any missing, unverified or refused
// misses both.
func (w *webhookResults) goals() []goal {
	whole := w.missing == 0 && w.unverified == 0 && w.errors == 0 && w.latency.Requests > 0
	gs := []goal{
		{section: webhooksSection, name: fmt.Sprintf("webhook p50 after the order's 201, at %g orders/s", w.rate),
			measured: ms(w.latency.P50), want: "< " + ms(targetWebhookP50), met: whole && w.latency.P50 < targetWebhookP50},
		{section: webhooksSection, name: fmt.Sprintf("webhook p99 after the order's 201, at %g orders/s", w.rate),
			measured: ms(w.latency.P99), want: "< " + ms(targetWebhookP99), met: whole && w.latency.P99 < targetWebhookP99},
	}
	if c := w.control; c.Requests > 0 {
		gs = append(gs, goal{section: webhooksSection, name: "control: the receiver's round trip, p99",
			measured: ms(c.P99), want: "< " + ms(targetWebhookP99), met: c.P99 < targetWebhookP99 && c.Errors == 0, control: true})
	}
	return gs
}
