package main

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/catalogue"
	"github.com/esimplatform/esim/services/ordering/orderingtest"
)

// process is the ordering binary running as a process of its own.
type process struct {
	cmd *exec.Cmd
	url string
	// done is closed once the process ended, waitErr saying how.
	done    chan struct{}
	waitErr error
	logs    *telemetrytest.LogBuffer
}

// buildOrdering builds this command into a temporary directory.
func buildOrdering(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ordering")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startProcess runs bin with exactly vars as its environment, on a free
// loopback port, and returns once it listens. It is stopped, gracefully,
// when the test ends, unless something killed it before.
func startProcess(t *testing.T, bin string, vars map[string]string) *process {
	t.Helper()
	logs := &telemetrytest.LogBuffer{}
	out, listeners := telemetrytest.Listening()
	cmd := exec.Command(bin)
	cmd.Env = []string{"HTTP_ADDR=127.0.0.1:0"}
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout = io.MultiWriter(out, logs)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan struct{}), logs: logs}
	exited := make(chan error, 1)
	go func() {
		p.waitErr = cmd.Wait()
		out.Close()
		exited <- p.waitErr
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("ordering did not stop on SIGTERM")
		}
		if t.Failed() {
			t.Logf("ordering's log:\n%s", logs)
		}
	})
	addr, _ := listeners.Wait(t, exited, false)
	p.url = "http://" + addr
	return p
}

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
	bin := buildOrdering(t)
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
			var victim atomic.Pointer[process]
			deps := orderingtest.StartDeps(t, orderingtest.WrapWallet(nil, func(c orderingtest.WalletCall, status int) {
				if p := victim.Swap(nil); p != nil && c.Method == "Debit" && status == http.StatusOK {
					_ = p.cmd.Process.Kill()
					<-p.done
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

			first := startProcess(t, bin, vars)
			victim.Store(first)
			if res, err := orderingtest.Client(first.url, internalauth.Gateway).CreateOrder(ctx, req); err == nil {
				t.Fatalf("CreateOrder answered %v from a process killed mid-call", res)
			}
			select {
			case <-first.done:
				if ee, ok := first.waitErr.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("the first process ended with %v, not SIGKILL", first.waitErr)
				}
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

			second := startProcess(t, bin, vars)
			gateway, operator := orderingtest.Client(second.url, internalauth.Gateway), orderingtest.Client(second.url, internalauth.Operator)
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
			if !tc.retry && !strings.Contains(second.logs.String(), "recovery finished an order") {
				t.Errorf("the recovery is not in the second process's log:\n%s", second.logs)
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
