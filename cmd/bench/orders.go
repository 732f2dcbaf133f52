package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/esimplatform/esim/cmd/internal/platform"
	"github.com/esimplatform/esim/libs/internalauth"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
)

// The order rows, in the order they are measured and reported.
const (
	orderOneTarget   = "gateway POST /v1/orders (1 eSIM)"
	pgbenchTarget    = "pgbench order-shaped transaction"
	orderFiftyTarget = "gateway POST /v1/orders (50 eSIMs)"
	orderReadTarget  = "gateway GET /v1/orders/{id}"
	bareReadTarget   = "bare net/http GET /v1/orders/{id}"
)

// benchTopUpMinor is what every run adds to the demo partner's sandbox
// balance before ordering: the wallet's largest movement (wallet's
// MaxAmountMinor), 100,000,000.00 USD. `make run` leaves 1000.00, which
// a few seconds of 50-eSIM orders would spend; what a run does not spend
// stays, and balances have room for 900 million such top-ups.
const benchTopUpMinor = 100_000_000_00

// orderResults are the order rows of a run.
type orderResults struct {
	planID     string // the fixed plan ordered
	orderID    string // the order the reads fetch
	orderBytes int    // its body's length
	// createOne, createFifty: POST /v1/orders through the gateway, of one
	// and of 50 eSIMs; pgbench: the control of createOne; readGateway and
	// readBare: GET /v1/orders/{id} and its control.
	createOne, pgbench, createFifty, readGateway, readBare measurement
	// createMany and pgbenchMany: the same order and its control spread
	// over pgbenchAccounts partners, each ordering from its own balance.
	createMany, pgbenchMany measurement
	// pgbenchMaxClients is what the server's free connections allowed
	// pgbench; a concurrency above it ran with this many clients.
	pgbenchMaxClients int
}

// orderPhases measures the order rows against the running platform p:
// orders of one eSIM at every concurrency, of 50 at the best of them,
// pgbench at the same concurrencies, then reads of one order through the
// gateway and from a bare handler serving the same body (started here
// and returned, also on error, for the caller to stop).
func orderPhases(ctx context.Context, cfg config, p *platform.Platform, hooks *benchReceiver, runDir string, say func(string, ...any)) (res orderResults, bare *childProcess, err error) {
	runID := randomHex(6)

	// 1. Money: orders are real, and are debited.
	say("topping the demo partner's sandbox balance up by %d.%02d USD for the orders", benchTopUpMinor/100, benchTopUpMinor%100)
	wallet := walletv1.NewWalletProtobufClient(p.URL(platform.Wallet), internalauth.Client(&http.Client{Timeout: 10 * time.Second}, p.OperatorToken))
	if _, err := wallet.TopUp(ctx, &walletv1.TopUpRequest{
		AccountId: p.DemoAccountID, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX, Currency: "USD",
		AmountMinor: benchTopUpMinor, Reference: "make-bench-" + runID, Note: "make bench: the benchmark's orders",
	}); err != nil {
		return res, nil, fmt.Errorf("top up the demo partner's sandbox balance: %w", err)
	}

	// 2. A fixed plan, and one order of it for the reads, whose body the
	// bare handler serves.
	planID, _, err := pickPlan(ctx, p.APIBaseURL, p.SandboxKey, "type=fixed&")
	if err != nil {
		return res, nil, err
	}
	res.planID = planID
	keyPrefix := "bench-" + runID + "-"
	orderBody := func(quantity int) []byte {
		return fmt.Appendf(nil, `{"plan_id":%q,"quantity":%d}`, planID, quantity)
	}
	api := &partnerAPI{ctx: ctx, base: p.APIBaseURL, key: p.SandboxKey}
	created, err := api.do(http.MethodPost, "/orders", orderBody(1), keyPrefix+"read")
	if err != nil {
		return res, nil, fmt.Errorf("place the order the reads fetch: %w", err)
	}
	var order struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(created, &order); err != nil || order.Data.ID == "" {
		return res, nil, fmt.Errorf("POST /v1/orders answered no order id (%v): %.200s", err, created)
	}
	res.orderID = order.Data.ID
	readBody, err := api.do(http.MethodGet, "/orders/"+res.orderID, nil, "")
	if err != nil {
		return res, nil, fmt.Errorf("fetch order %s: %w", res.orderID, err)
	}
	res.orderBytes = len(readBody)
	bodyFile := filepath.Join(runDir, "order.json")
	if err := os.WriteFile(bodyFile, readBody, 0o644); err != nil {
		return res, nil, err
	}
	bare, err = startChild("bare order server", "-"+serveBareFlag, bodyFile)
	if err != nil {
		return res, nil, err
	}

	// Each quantity has its own keys: a key given again with another body
	// is refused, not ordered.
	one, err := newOrderTarget(orderOneTarget, p.APIBaseURL+"/orders", p.SandboxKey, keyPrefix+"q1-", orderBody(1))
	if err != nil {
		return res, bare, err
	}
	fifty, err := newOrderTarget(orderFiftyTarget, p.APIBaseURL+"/orders", p.SandboxKey, keyPrefix+"q50-", orderBody(50))
	if err != nil {
		return res, bare, err
	}
	readGateway, err := newTarget(orderReadTarget, p.APIBaseURL+"/orders/"+res.orderID, p.SandboxKey)
	if err != nil {
		return res, bare, err
	}
	readBare, err := newTarget(bareReadTarget, bare.url+"/v1/orders/"+res.orderID, "")
	if err != nil {
		return res, bare, err
	}

	// 3. Orders of one eSIM at every concurrency; of 50 at the best.
	if res.createOne, err = closedLoops(ctx, cfg, one, cfg.workers, say); err != nil {
		return res, bare, err
	}
	if res.createFifty, err = closedLoops(ctx, cfg, fifty, []int{res.createOne.best().workers}, say); err != nil {
		return res, bare, err
	}

	// 4. The control: the same server, the order's writes in one
	// transaction. Each phase from here on starts once the orders' events
	// are delivered, so none measures the one before's backlog.
	hooks.settle(ctx, p, pgbenchTarget, say)
	if res.pgbench, res.pgbenchMaxClients, err = pgbenchPhases(ctx, cfg, runDir, pgbenchTarget, pgbenchScript, say); err != nil {
		return res, bare, err
	}

	// 5. Many partners at once, and their control.
	partners, err := ensureBenchPartners(ctx, p, runID, say)
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		err = errors.Join(err, partners.revoke(stopCtx))
	}()
	if err != nil {
		return res, bare, err
	}
	many, err := partners.orderTarget(ordersManyTarget, p.APIBaseURL+"/orders", keyPrefix+"many-", orderBody(1))
	if err != nil {
		return res, bare, err
	}
	if res.createMany, err = closedLoops(ctx, cfg, many, cfg.workers, say); err != nil {
		return res, bare, err
	}
	hooks.settle(ctx, p, pgbenchManyTarget, say)
	if res.pgbenchMany, _, err = pgbenchPhases(ctx, cfg, runDir, pgbenchManyTarget, pgbenchManyScript, say); err != nil {
		return res, bare, err
	}

	// 6. Reads, and theirs.
	hooks.settle(ctx, p, orderReadTarget, say)
	if res.readGateway, err = closedLoops(ctx, cfg, readGateway, cfg.workers, say); err != nil {
		return res, bare, err
	}
	if res.readBare, err = closedLoops(ctx, cfg, readBare, cfg.workers, say); err != nil {
		return res, bare, err
	}
	return res, bare, nil
}

// closedLoops warms t up, then runs one closed loop at each of workers.
func closedLoops(ctx context.Context, cfg config, t target, workers []int, say func(string, ...any)) (measurement, error) {
	m := measurement{name: t.name}
	if cfg.warmup > 0 {
		say("%s: warming up for %s", t.name, cfg.warmup)
		closedLoop(ctx, t, workers[0], cfg.warmup)
	}
	for _, w := range workers {
		say("%s: closed loop, %d workers, %s", t.name, w, cfg.duration)
		var throttledBefore uint64
		if t.throttled != nil {
			throttledBefore = t.throttled.Load()
		}
		res := closedLoop(ctx, t, w, cfg.duration)
		say("%s: %.0f/s, p50 %s, p99 %s, %d errors", t.name, res.RPS(), ms(res.P50), ms(res.P99), res.Errors)
		if t.throttled != nil {
			if n := t.throttled.Load() - throttledBefore; n > 0 {
				say("%s: %d orders over the account's cap of orders in flight were sent again after %s (counted in their latency)", t.name, n, throttlePause)
			}
		}
		m.closedRuns = append(m.closedRuns, closedRun{workers: w, result: res})
		if err := ctx.Err(); err != nil {
			return m, fmt.Errorf("interrupted: %w", err)
		}
	}
	return m, nil
}

// pgbenchPhases runs script, an order-shaped control named name, at each
// concurrency, with no more clients than the server has connections to
// spare.
func pgbenchPhases(ctx context.Context, cfg config, runDir, name, script string, say func(string, ...any)) (measurement, int, error) {
	m := measurement{name: name}
	b, err := preparePgbench(ctx, cfg.pgURL, pgbenchDatabase, filepath.Join(runDir, "pgbench"), script)
	if err != nil {
		return m, 0, err
	}
	limit, err := maxClients(ctx, cfg.pgURL)
	if err != nil {
		return m, 0, err
	}
	if cfg.warmup > 0 {
		say("%s: warming up for %s", name, cfg.warmup)
		if _, err := b.run(ctx, min(cfg.workers[0], limit), cfg.warmup); err != nil {
			return m, limit, err
		}
	}
	for _, w := range cfg.workers {
		clients := min(w, limit)
		say("%s: %s, %d clients, %s", name, b.path, clients, cfg.duration)
		res, err := b.run(ctx, clients, cfg.duration)
		if err != nil {
			return m, limit, err
		}
		say("%s: %.0f tx/s, p50 %s, p99 %s, %d failed", name, res.RPS(), ms(res.P50), ms(res.P99), res.Errors)
		m.closedRuns = append(m.closedRuns, closedRun{workers: w, clients: clients, result: res})
	}
	return m, limit, nil
}

// partnerAPI makes single calls to the public API with the sandbox key,
// as a partner's client would.
type partnerAPI struct {
	ctx       context.Context
	base, key string
	// client sends the calls; nil is http.DefaultClient.
	client *http.Client
}

// do sends one request and returns the 2xx answer's body.
func (a *partnerAPI) do(method, path string, body []byte, idempotencyKey string) ([]byte, error) {
	status, out, err := a.send(method, path, body, idempotencyKey)
	if err != nil {
		return nil, err
	}
	if status < 200 || status > 299 {
		return nil, fmt.Errorf("%s /v1%s: %d %s: %.500s", method, path, status, http.StatusText(status), out)
	}
	return out, nil
}

// send sends one request and returns the answer, whatever its status; an
// order refused for its account's cap of orders in flight goes again after
// throttlePause, as the closed loops' orders do.
func (a *partnerAPI) send(method, path string, body []byte, idempotencyKey string) (int, []byte, error) {
	for {
		status, out, err := a.sendOnce(method, path, body, idempotencyKey)
		if err != nil || status != http.StatusTooManyRequests || method != http.MethodPost || a.ctx.Err() != nil {
			return status, out, err
		}
		time.Sleep(throttlePause)
	}
}

func (a *partnerAPI) sendOnce(method, path string, body []byte, idempotencyKey string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(a.ctx, method, a.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	client := a.client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, out, nil
}

// randomHex is n random bytes as hex: a run's mark on its keys and
// references, so no two runs' collide.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
