package server_test

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"

	orderingserver "github.com/esimplatform/esim/services/ordering/server"
)

// TestSlowSMDPAndRetriesLeaveOtherPartnersAlone is the reproduction of a
// partner retrying one live order 25 times at once, as the spec tells
// clients to, while the SM-DP+ hangs: each waiting retry used to hold a
// database connection, and another partner's reads answered 500. Now the
// other partner's reads and sandbox orders are all answered, every one
// of them before the stuck live order is; and the live order still ends
// completed xor failed-and-refunded, the same answer to all 25.
func TestSlowSMDPAndRetriesLeaveOtherPartnersAlone(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: "esim-travel:50"})
	// Each ES2+ call gives up after 8 s; the SM-DP+ hangs for longer:
	// the live order is stuck for 8 s, ample for the other partner's
	// requests however loaded the machine.
	p := start(t, options{smdp: sim, smdpTimeout: 8 * time.Second})
	if err := sim.Control.AddFault(context.Background(), smdpsim.Fault{Function: "downloadOrder", Mode: smdpsim.ModeHang, Hang: 20 * time.Second, Count: 25}); err != nil {
		t.Fatal(err)
	}
	slow := p.partner("USD", live, 100_00)
	fixed, _, _ := p.planOf(slow.key, "fixed")
	other := p.partner("USD", sandbox, 10_000_00)
	if r := other.order("before", orderBody(fixed, "")); r.status != http.StatusCreated {
		t.Fatalf("the other partner's first order: %d %s", r.status, r.body)
	}

	const retries = 25
	body := orderBody(fixed, "")
	answers := make([]response, retries)
	var firstSlowAnswer time.Time
	var mu sync.Mutex
	var slowOrders sync.WaitGroup
	for i := range answers {
		slowOrders.Go(func() {
			answers[i] = slow.order("one-live-order", body)
			mu.Lock()
			if firstSlowAnswer.IsZero() {
				firstSlowAnswer = time.Now()
			}
			mu.Unlock()
		})
	}
	// The retries are all in: the SM-DP+ saw the order's downloadOrder.
	waitUntil(t, func() bool { return sim.State(t).Calls["downloadOrder"][smdpsim.OutcomeFaultHang] >= 1 })

	var latest time.Time
	var slowest time.Duration
	for i := range 3 {
		for _, req := range []func() response{
			func() response { return p.get("/v1/orders?limit=5", bearer(other.key)) },
			func() response { return other.order("", body) },
			func() response { return p.get("/v1/balance", bearer(other.key)) },
		} {
			start := time.Now()
			r := req()
			if r.status != http.StatusOK && r.status != http.StatusCreated {
				t.Errorf("the other partner's request %d while the live order hangs: %d %s", i, r.status, r.body)
			}
			latest, slowest = time.Now(), max(slowest, time.Since(start))
		}
	}
	slowOrders.Wait()
	t.Logf("the other partner's slowest answer took %s", slowest)
	mu.Lock()
	if !latest.Before(firstSlowAnswer) {
		t.Errorf("the other partner's requests were answered only once the stuck live order was (last at %s, first live answer at %s)",
			latest.Format(time.StampMilli), firstSlowAnswer.Format(time.StampMilli))
	}
	mu.Unlock()

	// One order, one outcome, the same to every retry.
	for i, r := range answers {
		if r.status != answers[0].status && !(r.status == http.StatusOK && answers[0].status == http.StatusCreated) ||
			r.status >= 200 && r.status < 300 && r.status == answers[0].status && i > 0 && !bytes.Equal(r.body, answers[0].body) {
			t.Errorf("retry %d: %d %s; the first: %d %s", i, r.status, r.body, answers[0].status, answers[0].body)
		}
		if r.status == http.StatusInternalServerError {
			t.Errorf("retry %d gave up waiting: %s", i, r.body)
		}
	}
	if l := slow.orders(""); l.Pagination.Total != 1 || (l.Data[0].Status != "completed" && l.Data[0].Status != "failed") {
		t.Errorf("the retried live order: %+v", l.Data)
	}
	slow.checkMoney()
	other.checkMoney()
}

// TestOrdersInFlightPerAccountAreCapped: while an account's live orders
// hang at the SM-DP+, one more past its cap answers 429 rate_limited at
// once, with Retry-After, charging and storing nothing; its key goes
// through once the others are done, and another account is not held
// back meanwhile.
func TestOrdersInFlightPerAccountAreCapped(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: "esim-travel:50"})
	p := start(t, options{smdp: sim, smdpTimeout: 3 * time.Second, ordering: func(c *orderingserver.Config) { c.InFlightPerAccount = 2 }})
	if err := sim.Control.AddFault(context.Background(), smdpsim.Fault{Function: "downloadOrder", Mode: smdpsim.ModeHang, Hang: 6 * time.Second, Count: 2}); err != nil {
		t.Fatal(err)
	}
	pt := p.partner("USD", live, 100_00)
	fixed, price, _ := p.planOf(pt.key, "fixed")
	var stuck sync.WaitGroup
	for _, key := range []string{"stuck-1", "stuck-2"} {
		stuck.Go(func() { pt.order(key, orderBody(fixed, "")) })
	}
	waitUntil(t, func() bool { return sim.State(t).Calls["downloadOrder"][smdpsim.OutcomeFaultHang] >= 2 })

	over := pt.order("over-the-cap", orderBody(fixed, ""))
	e := p.expectError(over, http.StatusTooManyRequests, "rate_limited")
	if over.header.Get("Retry-After") != "60" {
		t.Errorf("Retry-After %q, want 60", over.header.Get("Retry-After"))
	}
	t.Logf("over the cap: %s", e.Error.Message)
	other := p.partner("USD", live, 100_00)
	if r := other.order("another-account", orderBody(fixed, "")); r.status != http.StatusCreated {
		t.Errorf("another account's live order while the first is at its cap: %d %s", r.status, r.body)
	}
	stuck.Wait()
	if got := pt.balance(); got != 100_00 {
		t.Errorf("balance %d once the stuck orders failed and the capped one was refused, want 10000", got)
	}
	if l := pt.orders(""); l.Pagination.Total != 2 {
		t.Errorf("%d orders stored, want the 2 stuck ones only", l.Pagination.Total)
	}
	if r := pt.order("over-the-cap", orderBody(fixed, "")); r.status != http.StatusCreated {
		t.Errorf("the capped order's key once the others ended: %d %s", r.status, r.body)
	}
	if got := pt.balance(); got != 100_00-price {
		t.Errorf("balance %d, want one order charged", got)
	}
	pt.checkMoney()
	other.checkMoney()
}

// waitUntil polls cond until it holds, failing the test after 15 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 15 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
