package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/catalogue"
	"github.com/esimplatform/esim/services/ordering/orderingtest"
	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"
)

// TestOrderingKilledAfterTheDebit kills the ordering process (SIGKILL)
// right after the wallet debited an order and before ordering hears of it,
// let alone completes the order, and starts it again: a retry with the
// same key, or the recovery loop alone, finishes the order, completed xor
// failed and refunded, debited once, money is conserved, and the order's
// event is published.
func TestOrderingKilledAfterTheDebit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ordering binary")
	}
	bin := telemetrytest.Build(t, "ordering")
	plan := catalogue.SeedPlanID("jp-5gb-30d").String()
	const price = 1650

	for _, tc := range []struct {
		name      string
		retry     bool
		reference string
		want      orderingv1.OrderStatus
	}{
		{"a retry with the same key completes it", true, "BK-1", orderingv1.OrderStatus_ORDER_STATUS_COMPLETED},
		{"the recovery loop completes it", false, "BK-1", orderingv1.OrderStatus_ORDER_STATUS_COMPLETED},
		{"the recovery loop refunds it when the provider fails", false, "sandbox:provider_error", orderingv1.OrderStatus_ORDER_STATUS_FAILED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			// The process to kill once the wallet has debited, before the
			// wallet's answer leaves: ordering never learns of the debit.
			var victim atomic.Pointer[telemetrytest.Process]
			deps := orderingtest.StartDeps(t, orderingtest.WrapWallet(nil, func(c orderingtest.WalletCall, status int) {
				if p := victim.Swap(nil); p != nil && c.Method == "Debit" && status == http.StatusOK {
					if err := p.KillNow(); err != nil {
						t.Error(err)
					}
				}
			}))
			dbURL := pgtest.NewDatabase(t)
			vars := deps.Env()
			vars["DATABASE_URL"] = dbURL
			vars["RECOVERY_INTERVAL"] = "200ms"
			vars["RECOVERY_AFTER"] = "1s"
			if tc.retry {
				// Left to the retry alone.
				vars["RECOVERY_AFTER"] = "1h"
			}
			account := uuid.NewString()
			// Exactly the order's price: the retry's debit goes through
			// only as the replay of the first, never as a second debit.
			deps.TopUp(t, account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD", price, "t")
			req := &orderingv1.CreateOrderRequest{
				Scope:    &orderingv1.Scope{AccountId: account, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX},
				Currency: "USD", IdempotencyKey: "crash-" + tc.name, PlanId: plan,
				Customer: &orderingv1.Customer{Reference: tc.reference},
			}

			first := telemetrytest.StartProcess(t, bin, vars)
			victim.Store(first)
			if res, err := orderingtest.Client(first.URL, internalauth.Gateway).CreateOrder(ctx, req); err == nil {
				t.Fatalf("CreateOrder answered %v from a process killed mid-call", res)
			}
			// The wallet's wrapper killed it, and checked it died of SIGKILL.
			select {
			case <-first.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the first process is still running")
			}

			// What the crash left: a pending order, debited once.
			id, status := storedOrder(t, dbURL, req.GetIdempotencyKey())
			if status != "pending" {
				t.Fatalf("after the crash the order is %s, want pending", status)
			}
			if l := deps.Ledger(t, account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD"); l.DebitsOf[id] != 1 || l.Balance != 0 {
				t.Fatalf("after the crash: %d debits of the order, balance %d; want 1 and 0", l.DebitsOf[id], l.Balance)
			}

			second := telemetrytest.StartProcess(t, bin, vars)
			gateway, operator := orderingtest.Client(second.URL, internalauth.Gateway), orderingtest.Client(second.URL, internalauth.Operator)
			var final *orderingv1.Order
			if tc.retry {
				res, err := gateway.CreateOrder(ctx, req)
				if err != nil || res.GetReplayed() || res.GetOrder().GetId() != id {
					t.Fatalf("the retry = %v, %v; want order %s finished by this call", res, err, id)
				}
				final = res.GetOrder()
			} else {
				final = waitForStatus(t, operator, id, tc.want)
			}
			if final.GetStatus() != tc.want {
				t.Fatalf("order %s ended %s, want %s", id, final.GetStatus(), tc.want)
			}
			l := deps.Ledger(t, account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD")
			wantRefunds, wantBalance := 0, int64(0)
			if tc.want == orderingv1.OrderStatus_ORDER_STATUS_FAILED {
				wantRefunds, wantBalance = 1, price
			}
			if l.DebitsOf[id] != 1 || l.RefundsOf[id] != wantRefunds || l.Balance != wantBalance {
				t.Errorf("%d debits, %d refunds, balance %d; want 1, %d, %d", l.DebitsOf[id], l.RefundsOf[id], l.Balance, wantRefunds, wantBalance)
			}
			deps.CheckMoney(t, operator, account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD")
			// And the platform hears of the order's end, from the process
			// that finished it.
			if events := deps.WaitForEvents(t, 1); len(events) != 1 || string(events[0].Message.Key) != id || events[0].Event.GetOrder().GetStatus() != tc.want {
				t.Errorf("events on the topic: %v; want one of order %s, %s", events, id, tc.want)
			}
			if !tc.retry && !strings.Contains(second.Logs.String(), "recovery finished an order") {
				t.Errorf("the recovery is not in the second process's log:\n%s", second.Logs)
			}
			// And the same key replays what it became.
			again, err := gateway.CreateOrder(ctx, req)
			if err != nil || !again.GetReplayed() || again.GetOrder().GetId() != id || again.GetOrder().GetStatus() != tc.want {
				t.Errorf("the replay = %v, %v", again, err)
			}
		})
	}
}

// storedOrder reads the order of key from ordering's database, as the
// crash left it.
func storedOrder(t *testing.T, dbURL, key string) (id, status string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, "SELECT id::text, status FROM orders WHERE idempotency_key = $1", key).Scan(&id, &status); err != nil {
		t.Fatalf("the order of key %s: %v", key, err)
	}
	return id, status
}

// waitForStatus polls the order until it is in status, or fails the test
// after a deadline.
func waitForStatus(t *testing.T, c orderingv1.Ordering, id string, status orderingv1.OrderStatus) *orderingv1.Order {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		o, err := c.GetOrder(context.Background(), &orderingv1.GetOrderRequest{Id: id})
		if err == nil && o.GetStatus() == status {
			return o
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s is %s (%v), not %s, after 30 s", id, o.GetStatus(), err, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOrderingKilledBetweenDownloadOrderAndCompletion kills the ordering
// process (SIGKILL) while a live order of three eSIMs waits for the
// SM-DP+ to confirm its second profile, after the first was reserved and
// released and the second reserved, and starts it again: the retry with
// the same key resumes the order with the profiles it holds, never
// reserving a second set, and ends it completed, or, when the SM-DP+ now
// refuses, failed, refunded and with every reserved profile given back.
// Money is conserved either way.
func TestOrderingKilledBetweenDownloadOrderAndCompletion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ordering binary")
	}
	bin := telemetrytest.Build(t, "ordering")
	plan := catalogue.SeedPlanID("jp-5gb-30d").String()
	const price, pool = 1650, 20

	for _, tc := range []struct {
		name string
		// refuse makes the SM-DP+ refuse every confirmOrder after the
		// restart.
		refuse bool
		want   orderingv1.OrderStatus
	}{
		{"the retry completes it with the profiles it holds", false, orderingv1.OrderStatus_ORDER_STATUS_COMPLETED},
		{"the retry fails it, refunds it and gives its profiles back", true, orderingv1.OrderStatus_ORDER_STATUS_FAILED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: fmt.Sprintf("esim-travel:%d", pool)})
			deps := orderingtest.StartDeps(t, nil)
			dbURL := pgtest.NewDatabase(t)
			vars := deps.Env()
			maps.Copy(vars, orderingtest.SMDPEnv(sim, "esim-travel", 5*time.Second))
			vars["DATABASE_URL"] = dbURL
			vars["RECOVERY_AFTER"] = "1h" // left to the retry
			account := uuid.NewString()
			deps.TopUp(t, account, accountsv1.Environment_ENVIRONMENT_LIVE, "USD", 3*price, "t")
			req := &orderingv1.CreateOrderRequest{
				Scope:    &orderingv1.Scope{AccountId: account, Environment: accountsv1.Environment_ENVIRONMENT_LIVE},
				Currency: "USD", IdempotencyKey: "crash-live", PlanId: plan, Quantity: proto.Int32(3),
			}
			// The second confirmOrder hangs: the first profile is
			// released, the second reserved, the third not yet.
			if err := sim.Control.AddFault(ctx, smdpsim.Fault{Function: "confirmOrder", Mode: smdpsim.ModeHang, SkipCount: 1, Count: 1, Hang: time.Minute}); err != nil {
				t.Fatal(err)
			}

			first := telemetrytest.StartProcess(t, bin, vars)
			answered := make(chan error, 1)
			go func() {
				_, err := orderingtest.Client(first.URL, internalauth.Gateway).CreateOrder(ctx, req)
				answered <- err
			}()
			deadline := time.Now().Add(30 * time.Second)
			for sim.State(t).Calls["confirmOrder"]["fault-hang"] == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the second confirmOrder never came: %+v", sim.State(t))
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := first.KillNow(); err != nil {
				t.Fatal(err)
			}
			if err := <-answered; err == nil {
				t.Fatal("CreateOrder answered from a process killed mid-call")
			}
			id, status := storedOrder(t, dbURL, req.GetIdempotencyKey())
			if status != "pending" {
				t.Fatalf("after the crash the order is %s, want pending", status)
			}
			if p, _ := sim.State(t).Pool("esim-travel"); p.Released != 1 || p.Allocated != 1 {
				t.Fatalf("after the crash the pool is %+v, want 1 released and 1 reserved", p)
			}

			if tc.refuse {
				if err := sim.Control.AddFault(ctx, smdpsim.Fault{Function: "confirmOrder", Mode: smdpsim.ModeFail, SubjectCode: "8.1", ReasonCode: "1.2"}); err != nil {
					t.Fatal(err)
				}
			}
			second := telemetrytest.StartProcess(t, bin, vars)
			res, err := orderingtest.Client(second.URL, internalauth.Gateway).CreateOrder(ctx, req)
			if err != nil || res.GetReplayed() || res.GetOrder().GetId() != id || res.GetOrder().GetStatus() != tc.want {
				t.Fatalf("the retry = %v, %v; want order %s %s", res, err, id, tc.want)
			}
			st := sim.State(t)
			p, _ := st.Pool("esim-travel")
			downloads := 0
			for _, n := range st.Calls["downloadOrder"] {
				downloads += n
			}
			l := deps.Ledger(t, account, accountsv1.Environment_ENVIRONMENT_LIVE, "USD")
			if tc.want == orderingv1.OrderStatus_ORDER_STATUS_COMPLETED {
				if len(res.GetOrder().GetEsims()) != 3 || p.Released != 3 || p.Allocated != 0 || downloads != 3 {
					t.Errorf("completed with %d eSIMs; pool %+v after %d downloadOrders; want 3 released of 3 reserved", len(res.GetOrder().GetEsims()), p, downloads)
				}
				if l.DebitsOf[id] != 1 || l.RefundsOf[id] != 0 || l.Balance != 0 {
					t.Errorf("%d debits, %d refunds, balance %d; want 1, 0, 0", l.DebitsOf[id], l.RefundsOf[id], l.Balance)
				}
			} else {
				// The third was never reserved; the two held are back.
				if p.Released != 0 || p.Allocated != 0 || p.Available != pool || downloads != 2 {
					t.Errorf("failed; pool %+v after %d downloadOrders; want every profile available after 2", p, downloads)
				}
				if l.DebitsOf[id] != 1 || l.RefundsOf[id] != 1 || l.Balance != 3*price {
					t.Errorf("%d debits, %d refunds, balance %d; want 1, 1, %d", l.DebitsOf[id], l.RefundsOf[id], l.Balance, 3*price)
				}
			}
			deps.CheckMoney(t, orderingtest.Client(second.URL, internalauth.Operator), account, accountsv1.Environment_ENVIRONMENT_LIVE, "USD")
		})
	}
}
