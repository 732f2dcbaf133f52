// Package orderingtest starts the ordering service for tests the way the
// platform runs it: over real HTTP, on a database of its own, calling the
// real catalogue (seeded) and the real wallet, started in-process, each
// with the platform's internal credentials. It also checks that money was
// conserved, from the wallet's ledger and ordering's orders.
package orderingtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/kafka/kafkatest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/libs/telemetry"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
	catalogueserver "github.com/esimplatform/esim/services/catalogue/server"
	"github.com/esimplatform/esim/services/ordering/server"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"
	walletserver "github.com/esimplatform/esim/services/wallet/server"
)

// Deps are the services ordering calls, running in-process, and the Kafka
// it publishes order events to.
type Deps struct {
	CatalogueURL string
	WalletURL    string
	// Wallet calls the wallet as an operator: top-ups and ledgers.
	Wallet walletv1.Wallet
	// Kafka is the cluster Config and Env point ordering at; a test that
	// stops its broker (an outage) sets one of its own before calling
	// them.
	Kafka kafkatest.Cluster
}

// Topic is the topic of order events Config and Env name: one per
// cluster, shared by every ordering started from these Deps.
func (d *Deps) Topic() string { return d.Kafka.Topic("esim.orders.v1") }

// quietTelemetry is a service's telemetry for a test: warnings and errors
// only, to the test's log when verbose.
func quietTelemetry(t testing.TB, service string) *telemetry.Telemetry {
	t.Helper()
	var out io.Writer = io.Discard
	if testing.Verbose() {
		out = testWriter{t}
	}
	tel, err := telemetry.Setup(context.Background(), service, telemetry.Config{LogLevel: "warn"}, out)
	if err != nil {
		t.Fatalf("%s telemetry: %v", service, err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	return tel
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// StartDeps starts the catalogue, seeded with the bundled plans, and the
// wallet, each on a fresh database and an HTTP server of its own, both
// closed when the test ends, and gives ordering a Kafka cluster
// (kafkatest.New: an embedded broker of the test's own unless
// KAFKA_BROKERS names one). wrapWallet, when not nil, wraps the wallet's
// handler: a test's way to act at a precise moment of a call to it.
func StartDeps(t testing.TB, wrapWallet func(http.Handler) http.Handler) *Deps {
	t.Helper()
	ctx := context.Background()

	cat, err := catalogueserver.New(ctx, catalogueserver.Config{
		DatabaseURL:   config.NewSecretURL(pgtest.NewDatabase(t)),
		SeedCatalogue: true,
		Callers:       internalauthtest.Callers(),
	}, quietTelemetry(t, "catalogue"))
	if err != nil {
		t.Fatalf("catalogue: %v", err)
	}
	t.Cleanup(cat.Close)
	catTS := httptest.NewServer(cat.Handler())
	t.Cleanup(catTS.Close)

	wal, err := walletserver.New(ctx, walletserver.Config{
		DatabaseURL: config.NewSecretURL(pgtest.NewDatabase(t)),
		Callers:     internalauthtest.Callers(),
	}, quietTelemetry(t, "wallet"))
	if err != nil {
		t.Fatalf("wallet: %v", err)
	}
	t.Cleanup(wal.Close)
	h := wal.Handler()
	if wrapWallet != nil {
		h = wrapWallet(h)
	}
	walTS := httptest.NewServer(h)
	t.Cleanup(walTS.Close)

	return &Deps{
		CatalogueURL: catTS.URL,
		WalletURL:    walTS.URL,
		Wallet:       walletv1.NewWalletProtobufClient(walTS.URL, internalauthtest.Client(internalauth.Operator)),
		Kafka:        kafkatest.New(t),
	}
}

// WalletCall is a Debit or Refund call ordering makes to the wallet.
type WalletCall struct {
	// Method is "Debit" or "Refund".
	Method string
	// Reference is the debit's reference, the order id, for both.
	Reference string
	AccountID string
}

// WrapWallet returns a StartDeps wrapper that shows each Debit and Refund
// call to before, which may answer it in the wallet's stead (returning
// true: the wallet never sees it), and then, once the wallet answered and
// before the answer leaves, to after with the answer's HTTP status. A
// test's way to fail a call, or to crash ordering right after the wallet
// moved money. nil hooks are skipped.
func WrapWallet(before func(WalletCall, http.ResponseWriter) bool, after func(WalletCall, int)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			call, ok := walletCall(r)
			if !ok {
				next.ServeHTTP(w, r)
				return
			}
			if before != nil && before(call, w) {
				return
			}
			rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
			next.ServeHTTP(rec, r)
			if after != nil {
				after(call, rec.status)
			}
		})
	}
}

// walletCall decodes a Debit or Refund request (ordering's client sends
// protobuf), leaving the body for the wallet to read again.
func walletCall(r *http.Request) (WalletCall, bool) {
	method := path.Base(r.URL.Path)
	if method != "Debit" && method != "Refund" {
		return WalletCall{}, false
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return WalletCall{}, false
	}
	call := WalletCall{Method: method}
	if method == "Debit" {
		var req walletv1.DebitRequest
		if proto.Unmarshal(body, &req) != nil {
			return WalletCall{}, false
		}
		call.Reference, call.AccountID = req.GetReference(), req.GetAccountId()
	} else {
		var req walletv1.RefundRequest
		if proto.Unmarshal(body, &req) != nil {
			return WalletCall{}, false
		}
		call.Reference, call.AccountID = req.GetDebitReference(), req.GetAccountId()
	}
	return call, true
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

// Unavailable answers a call as a wallet that is down would: 503, which
// leaves ordering not knowing whether money moved.
func Unavailable(w http.ResponseWriter) {
	w.WriteHeader(http.StatusServiceUnavailable)
}

// Config is ordering's configuration against d, on a fresh database, as
// the platform sets it, with the test tokens: the recovery scan waits an
// hour before it takes an order, so that only tests that mean to see it
// at work (and shorten RecoveryAfter) do, and an account's orders in
// flight are not capped below the replica's, so that only tests of the
// cap meet it. Deps made by hand, without a
// Kafka cluster, get one here (kafkatest.New).
func (d *Deps) Config(t testing.TB) server.Config {
	t.Helper()
	if len(d.Kafka.Config.Brokers) == 0 {
		d.Kafka = kafkatest.New(t)
	}
	callers, err := internalauth.ParseCallers(internalauthtest.CallersEnv())
	if err != nil {
		t.Fatal(err)
	}
	return server.Config{
		DatabaseURL:        config.NewSecretURL(pgtest.WithMaxConns(t, pgtest.NewDatabase(t), 16)),
		Callers:            callers,
		InternalToken:      config.NewSecret(internalauthtest.Token(internalauth.Ordering)),
		CatalogueURL:       config.BaseURL(d.CatalogueURL),
		WalletURL:          config.BaseURL(d.WalletURL),
		ServiceTimeout:     5 * time.Second,
		QRBaseURL:          "http://127.0.0.1:8080/qr",
		SandboxSMDPAddress: "smdp.sandbox.esim.invalid",
		OrderTimeout:       30 * time.Second,
		// Tests burst many orders of one account at once; those of the
		// cap set it lower.
		OrderConcurrency:   8,
		InFlightPerAccount: 64,
		RecoveryInterval:   time.Hour,
		RecoveryAfter:      time.Hour,
		Kafka:              d.Kafka.Config,
		KafkaTopic:         d.Topic(),
		RelayInterval:      time.Second,
		OutboxRetention:    7 * 24 * time.Hour,
	}
}

// Env is Config as the ordering process reads it, for tests that run the
// binary: DATABASE_URL and HTTP_ADDR are the caller's to add.
func (d *Deps) Env() map[string]string {
	return map[string]string{
		"CALLERS":                  internalauthtest.CallersEnv(),
		"INTERNAL_TOKEN":           internalauthtest.Token(internalauth.Ordering),
		"CATALOGUE_URL":            d.CatalogueURL,
		"WALLET_URL":               d.WalletURL,
		"QR_BASE_URL":              "http://127.0.0.1:8080/qr",
		"LOG_LEVEL":                "info",
		"KAFKA_BROKERS":            strings.Join(d.Kafka.Config.Brokers, ","),
		"KAFKA_TOPIC_PARTITIONS":   strconv.Itoa(d.Kafka.Config.Partitions),
		"KAFKA_REPLICATION_FACTOR": strconv.Itoa(d.Kafka.Config.ReplicationFactor),
		"KAFKA_TOPIC":              d.Topic(),
	}
}

// Published is a message on the topic of order events, and its value
// decoded.
type Published struct {
	Message kafkago.Message
	Event   *orderingv1.OrderEvent
}

// Events reads the whole topic of order events, every partition from its
// first offset to its last: what ordering published so far, a duplicate
// as often as it was published. None while the topic does not exist.
func (d *Deps) Events(t testing.TB) []Published {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := kafkago.DialContext(ctx, "tcp", d.Kafka.Config.Brokers[0])
	if err != nil {
		t.Fatalf("dial %s: %v", d.Kafka, err)
	}
	defer conn.Close()
	partitions, err := conn.ReadPartitions(d.Topic())
	if errors.Is(err, kafkago.UnknownTopicOrPartition) {
		return nil
	}
	if err != nil {
		t.Fatalf("partitions of %s: %v", d.Topic(), err)
	}
	var out []Published
	for _, p := range partitions {
		leader, err := kafkago.DialLeader(ctx, "tcp", net.JoinHostPort(p.Leader.Host, strconv.Itoa(p.Leader.Port)), p.Topic, p.ID)
		if err != nil {
			t.Fatalf("dial the leader of %s/%d: %v", p.Topic, p.ID, err)
		}
		first, last, err := leader.ReadOffsets()
		leader.Close()
		if err != nil {
			t.Fatalf("offsets of %s/%d: %v", p.Topic, p.ID, err)
		}
		if first == last {
			continue
		}
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: d.Kafka.Config.Brokers, Topic: p.Topic, Partition: p.ID, MaxWait: 50 * time.Millisecond})
		if err := r.SetOffset(first); err != nil {
			t.Fatal(err)
		}
		for offset := first; offset < last; {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				t.Fatalf("read %s/%d at %d of %d: %v", p.Topic, p.ID, offset, last, err)
			}
			var e orderingv1.OrderEvent
			if err := proto.Unmarshal(m.Value, &e); err != nil {
				t.Errorf("message %s/%d@%d is no OrderEvent: %v", p.Topic, p.ID, m.Offset, err)
			}
			out = append(out, Published{Message: m, Event: &e})
			offset = m.Offset + 1
		}
		r.Close()
	}
	return out
}

// WaitForEvents reads the topic (Events) until it holds at least n
// messages, or fails the test after a deadline.
func (d *Deps) WaitForEvents(t testing.TB, n int) []Published {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		events := d.Events(t)
		if len(events) >= n {
			return events
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events on %s after 30 s, want %d", len(events), d.Topic(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Start starts ordering with cfg in-process and returns it and its URL;
// both are closed when the test ends.
func Start(t testing.TB, cfg server.Config) (*server.Server, string) {
	t.Helper()
	return StartWith(t, cfg, quietTelemetry(t, "ordering"))
}

// StartWith is Start with the telemetry of the test's choosing: one shared
// by every service of a test records a request's whole trace.
func StartWith(t testing.TB, cfg server.Config, tel *telemetry.Telemetry) (*server.Server, string) {
	t.Helper()
	srv, err := server.New(context.Background(), cfg, tel)
	if err != nil {
		t.Fatalf("ordering: %v", err)
	}
	t.Cleanup(srv.Close)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return srv, ts.URL
}

// Client calls ordering at url as caller.
func Client(url string, caller internalauth.Caller) orderingv1.Ordering {
	return orderingv1.NewOrderingProtobufClient(url, internalauthtest.Client(caller))
}

// TopUp credits amount to the balance of account in env, creating it in
// currency on its first top-up.
func (d *Deps) TopUp(t testing.TB, account string, env accountsv1.Environment, currency string, amount int64, reference string) {
	t.Helper()
	_, err := d.Wallet.TopUp(context.Background(), &walletv1.TopUpRequest{
		AccountId: account, Environment: env, Currency: currency, AmountMinor: amount, Reference: reference, Note: "test",
	})
	if err != nil {
		t.Fatalf("top up %d: %v", amount, err)
	}
}

// Ledger is what a balance's ledger adds up to.
type Ledger struct {
	TopUps, Debits, Refunds int64
	// Balance is the wallet's balance, read separately.
	Balance int64
	// DebitsOf and RefundsOf count the entries of each reference (an
	// order id).
	DebitsOf, RefundsOf map[string]int
	// DebitAmount is each debit's amount by reference.
	DebitAmount map[string]int64
}

// Ledger reads the whole ledger of account in env, and its balance.
func (d *Deps) Ledger(t testing.TB, account string, env accountsv1.Environment, currency string) Ledger {
	t.Helper()
	ctx := context.Background()
	l := Ledger{DebitsOf: map[string]int{}, RefundsOf: map[string]int{}, DebitAmount: map[string]int64{}}
	for page := int32(1); ; page++ {
		res, err := d.Wallet.ListLedger(ctx, &walletv1.ListLedgerRequest{AccountId: account, Environment: env, Page: page, Limit: 100})
		if err != nil {
			t.Fatalf("ledger page %d: %v", page, err)
		}
		for _, e := range res.GetEntries() {
			switch e.GetKind() {
			case walletv1.EntryKind_ENTRY_KIND_TOP_UP:
				l.TopUps += e.GetAmountMinor()
			case walletv1.EntryKind_ENTRY_KIND_DEBIT:
				l.Debits += e.GetAmountMinor()
				l.DebitsOf[e.GetReference()]++
				l.DebitAmount[e.GetReference()] = e.GetAmountMinor()
			case walletv1.EntryKind_ENTRY_KIND_REFUND:
				l.Refunds += e.GetAmountMinor()
				l.RefundsOf[e.GetReference()]++
			default:
				t.Fatalf("ledger entry of kind %s", e.GetKind())
			}
		}
		if len(res.GetEntries()) < 100 {
			break
		}
	}
	b, err := d.Wallet.GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: account, Environment: env, Currency: currency})
	if err != nil {
		t.Fatalf("balance: %v", err)
	}
	l.Balance = b.GetAmountMinor()
	return l
}

// CheckMoney fails the test unless money was conserved for account in env:
// the ledger adds up to the balance; every completed order and top-up was
// debited exactly once, its total, and never refunded; every failed one
// debited once and refunded once; nothing else was debited; and so debits
// minus refunds are the totals of the completed orders and top-ups. It
// returns the orders.
func (d *Deps) CheckMoney(t testing.TB, orders orderingv1.Ordering, account string, env accountsv1.Environment, currency string) []*orderingv1.Order {
	t.Helper()
	l := d.Ledger(t, account, env, currency)
	if l.TopUps-l.Debits+l.Refunds != l.Balance {
		t.Errorf("ledger of %s %s: top-ups %d - debits %d + refunds %d != balance %d", account, env.ShortName(), l.TopUps, l.Debits, l.Refunds, l.Balance)
	}
	var all []*orderingv1.Order
	scope := &orderingv1.Scope{AccountId: account, Environment: env}
	for page := int32(1); ; page++ {
		res, err := orders.ListOrders(context.Background(), &orderingv1.ListOrdersRequest{Scope: scope, Page: page, Limit: 100})
		if err != nil {
			t.Fatalf("orders page %d: %v", page, err)
		}
		all = append(all, res.GetOrders()...)
		if len(res.GetOrders()) < 100 {
			break
		}
	}
	var completed int64
	known := map[string]bool{}
	for _, o := range all {
		id := o.GetId()
		known[id] = true
		switch o.GetStatus() {
		case orderingv1.OrderStatus_ORDER_STATUS_COMPLETED:
			completed += o.GetPrice().GetTotalMinor()
			if l.DebitsOf[id] != 1 || l.DebitAmount[id] != o.GetPrice().GetTotalMinor() || l.RefundsOf[id] != 0 || len(o.GetEsims()) != int(o.GetQuantity()) {
				t.Errorf("completed order %s: %d debits (%d), %d refunds, %d eSIMs; want one debit of %d, no refund, %d eSIMs",
					id, l.DebitsOf[id], l.DebitAmount[id], l.RefundsOf[id], len(o.GetEsims()), o.GetPrice().GetTotalMinor(), o.GetQuantity())
			}
		case orderingv1.OrderStatus_ORDER_STATUS_FAILED:
			if l.DebitsOf[id] != 1 || l.RefundsOf[id] != 1 || len(o.GetEsims()) != 0 || o.GetError().GetCode() != "provider_error" {
				t.Errorf("failed order %s: %d debits, %d refunds, %d eSIMs, error %v; want refunded once, no eSIMs, a provider_error",
					id, l.DebitsOf[id], l.RefundsOf[id], len(o.GetEsims()), o.GetError())
			}
		default:
			t.Errorf("order %s is %s: neither completed nor failed", id, o.GetStatus())
		}
		for _, e := range o.GetEsims() {
			for _, tu := range e.GetTopups() {
				known[tu.GetId()] = true
				price := tu.GetPrice().GetTotalMinor()
				switch tu.GetStatus() {
				case orderingv1.OrderStatus_ORDER_STATUS_COMPLETED:
					completed += price
					if l.DebitsOf[tu.GetId()] != 1 || l.DebitAmount[tu.GetId()] != price || l.RefundsOf[tu.GetId()] != 0 {
						t.Errorf("completed top-up %s: %d debits (%d), %d refunds; want one debit of %d, no refund",
							tu.GetId(), l.DebitsOf[tu.GetId()], l.DebitAmount[tu.GetId()], l.RefundsOf[tu.GetId()], price)
					}
				case orderingv1.OrderStatus_ORDER_STATUS_FAILED:
					if l.DebitsOf[tu.GetId()] != 1 || l.RefundsOf[tu.GetId()] != 1 || tu.GetError().GetCode() != "provider_error" {
						t.Errorf("failed top-up %s: %d debits, %d refunds, error %v; want refunded once, a provider_error",
							tu.GetId(), l.DebitsOf[tu.GetId()], l.RefundsOf[tu.GetId()], tu.GetError())
					}
				default:
					t.Errorf("top-up %s is %s: neither completed nor failed", tu.GetId(), tu.GetStatus())
				}
			}
		}
	}
	for ref := range l.DebitsOf {
		if !known[ref] {
			t.Errorf("debit %s is no order's", ref)
		}
	}
	if l.Debits-l.Refunds != completed {
		t.Errorf("%s %s: debits %d - refunds %d != %d, the totals of the completed orders", account, env.ShortName(), l.Debits, l.Refunds, completed)
	}
	return all
}

// SMDP is ordering's configuration for the SM-DP+ simulator sim, every
// plan mapped to profileType: live orders go to it over mutual TLS, each
// call bounded by timeout, and a cancellation that did not go through is
// tried again every 100 ms.
func SMDP(sim *smdpsimtest.Sim, profileType string, timeout time.Duration) server.SMDPConfig {
	return server.SMDPConfig{
		URL:            sim.ES2PlusURL,
		CertFile:       sim.Certs.ClientCert,
		KeyFile:        sim.Certs.ClientKey,
		CAFile:         sim.Certs.CACert,
		Timeout:        timeout,
		RequesterID:    "esim-platform-test",
		ProfileTypes:   "*=" + profileType,
		CancelInterval: 100 * time.Millisecond,
	}
}

// SMDPEnv is SMDP as the ordering process reads it.
func SMDPEnv(sim *smdpsimtest.Sim, profileType string, timeout time.Duration) map[string]string {
	return map[string]string{
		"SMDP_URL":             sim.ES2PlusURL,
		"SMDP_CERT_FILE":       sim.Certs.ClientCert,
		"SMDP_KEY_FILE":        sim.Certs.ClientKey,
		"SMDP_CA_FILE":         sim.Certs.CACert,
		"SMDP_TIMEOUT":         timeout.String(),
		"SMDP_PROFILE_TYPES":   "*=" + profileType,
		"SMDP_CANCEL_INTERVAL": "100ms",
	}
}
