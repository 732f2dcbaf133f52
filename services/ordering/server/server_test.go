package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twitchtv/twirp"
	"google.golang.org/protobuf/proto"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/catalogue"
	"github.com/esimplatform/esim/services/ordering/orderingtest"
	"github.com/esimplatform/esim/services/ordering/server"
)

var japan5GB = catalogue.SeedPlanID("jp-5gb-30d").String()

// startLogged is orderingtest.Start with the service's log kept.
func startLogged(t *testing.T, cfg server.Config) (string, *telemetrytest.LogBuffer) {
	t.Helper()
	r := startReplica(t, cfg)
	return r.url, r.logs
}

func order(account, key, reference string) *orderingv1.CreateOrderRequest {
	return &orderingv1.CreateOrderRequest{
		Scope:    &orderingv1.Scope{AccountId: account, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX},
		Currency: "USD", IdempotencyKey: key, PlanId: japan5GB,
		Customer: &orderingv1.Customer{Reference: reference},
	}
}

// waitFor polls the order until it is in status, or fails the test after
// a deadline.
func waitFor(t *testing.T, c orderingv1.Ordering, id string, status orderingv1.OrderStatus) *orderingv1.Order {
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
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServerServesAPIAndProbes(t *testing.T) {
	deps := orderingtest.StartDeps(t, nil)
	_, u := orderingtest.Start(t, deps.Config(t))
	for path, want := range map[string]string{"/healthz": `"ok"`, "/readyz": `"ok"`} {
		if code, body := httpservertest.Get(t, u+path); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d %q, want 200 containing %s", path, code, body, want)
		}
	}
	account := uuid.NewString()
	deps.TopUp(t, account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD", 10_000, "t")
	res, err := orderingtest.Client(u, internalauth.Gateway).CreateOrder(context.Background(), order(account, "k", ""))
	if err != nil || res.GetOrder().GetStatus() != orderingv1.OrderStatus_ORDER_STATUS_COMPLETED {
		t.Fatalf("CreateOrder = %v, %v", res, err)
	}
}

// Orders left unfinished by a wallet that failed mid-call are finished by
// the recovery loop alone, with no retry: debited and completed, or, once
// their provider failed, refunded. Two replicas run the loop on one
// database, and never handle one order at once.
func TestRecoveryLoopFinishesOrdersOnce(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	failed := map[string]bool{}  // calls answered 503 once, by method and reference
	inFlight := map[string]int{} // calls the wallet is serving, by reference
	var overlaps []string
	deps := orderingtest.StartDeps(t, orderingtest.WrapWallet(
		func(c orderingtest.WalletCall, w http.ResponseWriter) bool {
			mu.Lock()
			defer mu.Unlock()
			if !failed[c.Method+c.Reference] {
				failed[c.Method+c.Reference] = true
				orderingtest.Unavailable(w)
				return true
			}
			if inFlight[c.Reference]++; inFlight[c.Reference] > 1 {
				overlaps = append(overlaps, c.Reference)
			}
			return false
		},
		func(c orderingtest.WalletCall, _ int) {
			// Slow enough that two replicas handling one order at
			// once would overlap here.
			time.Sleep(30 * time.Millisecond)
			mu.Lock()
			inFlight[c.Reference]--
			mu.Unlock()
		}))
	cfg := deps.Config(t)
	// Time enough to see the orders unfinished before the loop takes them.
	cfg.RecoveryInterval, cfg.RecoveryAfter = 50*time.Millisecond, 3*time.Second
	u, logs := startLogged(t, cfg)
	_, logs2 := startLogged(t, cfg) // a second replica on the same database
	gateway, operator := orderingtest.Client(u, internalauth.Gateway), orderingtest.Client(u, internalauth.Operator)

	account := uuid.NewString()
	deps.TopUp(t, account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD", 100_000, "t")
	for i := range 6 {
		ref := ""
		if i%2 == 1 {
			ref = "sandbox:provider_error"
		}
		_, err := gateway.CreateOrder(ctx, order(account, "k"+string(rune('a'+i)), ref))
		if twerr, ok := err.(twirp.Error); !ok || twerr.Code() != twirp.Internal {
			t.Fatalf("CreateOrder with the wallet failing = %v, want internal", err)
		}
	}
	list, err := operator.ListOrders(ctx, &orderingv1.ListOrdersRequest{})
	if err != nil || list.GetTotal() != 6 {
		t.Fatalf("ListOrders = %v, %v; want the 6 orders kept unfinished", list, err)
	}
	for _, o := range list.GetOrders() {
		if o.GetStatus() != orderingv1.OrderStatus_ORDER_STATUS_PENDING {
			t.Errorf("order %s is %s before recovery, want PENDING", o.GetId(), o.GetStatus())
		}
	}
	for _, o := range list.GetOrders() {
		want := orderingv1.OrderStatus_ORDER_STATUS_COMPLETED
		if o.GetCustomer().GetReference() != "" {
			want = orderingv1.OrderStatus_ORDER_STATUS_FAILED
		}
		waitFor(t, operator, o.GetId(), want)
	}
	deps.CheckMoney(t, operator, account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD")
	mu.Lock()
	if len(overlaps) > 0 {
		t.Errorf("two replicas called the wallet for one order at once: %v", overlaps)
	}
	mu.Unlock()
	// Either replica may have done all of it.
	if !strings.Contains(logs.String()+logs2.String(), "recovery finished an order") {
		t.Errorf("the recovery is in neither replica's log:\n%s\n%s", logs, logs2)
	}
}

// A recovery pass that finds the balance spent deletes the order, as the
// request would have, and says so.
func TestRecoveryDeletesWhatTheBalanceNoLongerCovers(t *testing.T) {
	ctx := context.Background()
	var once sync.Once
	deps := orderingtest.StartDeps(t, orderingtest.WrapWallet(func(c orderingtest.WalletCall, w http.ResponseWriter) bool {
		answered := false
		once.Do(func() { orderingtest.Unavailable(w); answered = true })
		return answered
	}, nil))
	cfg := deps.Config(t)
	cfg.RecoveryInterval, cfg.RecoveryAfter = 50*time.Millisecond, 500*time.Millisecond
	u, logs := startLogged(t, cfg)
	account := uuid.NewString()
	// Not enough for the order: the recovery's debit is refused.
	deps.TopUp(t, account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD", 100, "t")
	if _, err := orderingtest.Client(u, internalauth.Gateway).CreateOrder(ctx, order(account, "k", "")); err == nil {
		t.Fatal("CreateOrder succeeded through a failing wallet")
	}
	operator := orderingtest.Client(u, internalauth.Operator)
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := operator.ListOrders(ctx, &orderingv1.ListOrdersRequest{})
		if err == nil && list.GetTotal() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the order is still there: %v, %v", list, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "recovery deleted an order the balance no longer covers") {
		t.Errorf("the deletion is not in the log:\n%s", logs)
	}
	// The key is free again.
	deps.TopUp(t, account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD", 10_000, "more")
	res, err := orderingtest.Client(u, internalauth.Gateway).CreateOrder(ctx, order(account, "k", ""))
	if err != nil || res.GetReplayed() || !proto.Equal(res.GetOrder().GetPrice(), &orderingv1.Price{UnitMinor: 1650, TotalMinor: 1650, Currency: "USD"}) {
		t.Errorf("the same key after the deletion: %v, %v", res, err)
	}
}

func TestNewFailsWithoutDatabase(t *testing.T) {
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, "ordering", telemetry.Config{LogLevel: "info"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg := (&orderingtest.Deps{CatalogueURL: "http://127.0.0.1:1", WalletURL: "http://127.0.0.1:1"}).Config(t)
	cfg.DatabaseURL = config.NewSecretURL("postgres://postgres:hunter2@127.0.0.1:1/ordering?sslmode=disable&connect_timeout=2")
	_, err = server.New(ctx, cfg, tel)
	if err == nil {
		t.Fatal("server.New succeeded without a database")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error reveals the database password: %v", err)
	}
	cfg.DatabaseURL = config.NewSecretURL(pgtest.NewDatabase(t))
	if _, err := server.New(ctx, cfg, nil); err == nil {
		t.Error("server.New accepted nil telemetry")
	}
}
