package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
	"github.com/esimplatform/esim/services/wallet/server"
)

// start assembles the service exactly as run does, accepting every
// caller's test token.
func start(t *testing.T) (*server.Server, *httptest.Server, *telemetrytest.LogBuffer) {
	t.Helper()
	srv, ts, logs, _ := startWithDatabase(t)
	return srv, ts, logs
}

// startWithDatabase is start, also returning the service's database URL.
func startWithDatabase(t *testing.T) (*server.Server, *httptest.Server, *telemetrytest.LogBuffer, string) {
	t.Helper()
	ctx := context.Background()
	logs := &telemetrytest.LogBuffer{}
	tel, err := telemetry.Setup(ctx, "wallet", telemetry.Config{LogLevel: "debug"}, logs)
	if err != nil {
		t.Fatalf("telemetry: %v", err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	dbURL := pgtest.NewDatabase(t)
	srv, err := server.New(ctx, server.Config{DatabaseURL: config.NewSecretURL(dbURL), Callers: internalauthtest.Callers()}, tel)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	t.Cleanup(srv.Close)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return srv, ts, logs, dbURL
}

func client(ts *httptest.Server, caller internalauth.Caller) walletv1.Wallet {
	return walletv1.NewWalletProtobufClient(ts.URL, internalauthtest.As(ts.Client(), caller))
}

func TestServerServesAPIAndProbes(t *testing.T) {
	ctx := context.Background()
	_, ts, _ := start(t)

	// The probes answer without a credential: the kubelet has none.
	for path, want := range map[string]string{"/healthz": `"ok"`, "/readyz": `"ok"`} {
		if code, body := httpservertest.Get(t, ts.URL+path); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d %q, want 200 containing %s", path, code, body, want)
		}
	}

	a := uuid.NewString()
	top, err := client(ts, internalauth.Operator).TopUp(ctx, &walletv1.TopUpRequest{AccountId: a, Environment: accountsv1.Environment_ENVIRONMENT_LIVE, Currency: "USD", AmountMinor: 5_00, Reference: "wire-1"})
	if err != nil || top.GetActor() != "operator" {
		t.Fatalf("TopUp = %v, %v", top, err)
	}
	d, err := client(ts, internalauth.Ordering).Debit(ctx, &walletv1.DebitRequest{AccountId: a, Environment: accountsv1.Environment_ENVIRONMENT_LIVE, Currency: "USD", AmountMinor: 2_00, Reference: "order-1"})
	if err != nil || d.GetActor() != "ordering" || d.GetBalanceAfterMinor() != 3_00 {
		t.Fatalf("Debit = %v, %v", d, err)
	}
	b, err := client(ts, internalauth.Gateway).GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: a, Environment: accountsv1.Environment_ENVIRONMENT_LIVE, Currency: "USD"})
	if err != nil || b.GetAmountMinor() != 3_00 {
		t.Fatalf("GetBalance = %v, %v", b, err)
	}
}

// The assembled service refuses calls without a credential, and a caller
// outside the policy, before anything moves.
func TestServerProtectsTheAPI(t *testing.T) {
	ctx := context.Background()
	_, ts, logs := start(t)
	a := uuid.NewString()
	req := &walletv1.TopUpRequest{AccountId: a, Environment: accountsv1.Environment_ENVIRONMENT_LIVE, Currency: "USD", AmountMinor: 5_00, Reference: "wire-1"}

	for caller, want := range map[string]struct {
		c    walletv1.Wallet
		code twirp.ErrorCode
	}{
		"nobody":  {walletv1.NewWalletProtobufClient(ts.URL, ts.Client()), twirp.Unauthenticated},
		"gateway": {client(ts, internalauth.Gateway), twirp.PermissionDenied},
	} {
		_, err := want.c.TopUp(ctx, req)
		var twerr twirp.Error
		if !errors.As(err, &twerr) || twerr.Code() != want.code {
			t.Errorf("TopUp by %s: err = %v, want %s", caller, err, want.code)
		}
	}
	b, err := client(ts, internalauth.Gateway).GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: a, Environment: accountsv1.Environment_ENVIRONMENT_LIVE, Currency: "USD"})
	if err != nil || b.GetAmountMinor() != 0 || b.GetUpdatedAt() != nil {
		t.Errorf("balance after refused top-ups = %v, %v; want none", b, err)
	}
	if !strings.Contains(logs.String(), "internal call refused") {
		t.Errorf("refusals are not logged:\n%s", logs)
	}
	if strings.Contains(logs.String(), internalauthtest.Token(internalauth.Gateway)) {
		t.Errorf("a token appears in the logs:\n%s", logs)
	}
}

func TestServerLogsInternalErrorsWithRequestID(t *testing.T) {
	srv, ts, logs := start(t)

	// Closing the pool under a running server is the outage at hand.
	srv.Close()
	if code, _ := httpservertest.Get(t, ts.URL+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz without a database = %d, want 503", code)
	}
	req, _ := http.NewRequest(http.MethodPost, ts.URL+walletv1.WalletPathPrefix+"GetBalance",
		strings.NewReader(`{"account_id":"`+uuid.NewString()+`","environment":"ENVIRONMENT_LIVE","currency":"USD"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(telemetry.RequestIDHeader, "req_test_outage")
	resp, err := internalauthtest.As(ts.Client(), internalauth.Gateway).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), `"internal error"`) {
		t.Errorf("GetBalance during an outage = %d %s, want 500 internal error", resp.StatusCode, body)
	}

	var logged map[string]any
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "twirp internal error" {
			logged = rec
		}
	}
	if logged == nil {
		t.Fatalf("no internal error logged:\n%s", logs)
	}
	if logged["request_id"] != "req_test_outage" || logged["method"] != "GetBalance" || !strings.Contains(logged["error"].(string), "closed pool") {
		t.Errorf("logged %v; want the request id, the method and the cause", logged)
	}
}

func TestNewFailsWithoutDatabase(t *testing.T) {
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, "wallet", telemetry.Config{LogLevel: "info"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// Port 1 on loopback refuses connections at once.
	_, err = server.New(ctx, server.Config{DatabaseURL: config.NewSecretURL("postgres://postgres:hunter2@127.0.0.1:1/wallet?sslmode=disable&connect_timeout=2"), Callers: internalauthtest.Callers()}, tel)
	if err == nil {
		t.Fatal("server.New succeeded without a database")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error reveals the database password: %v", err)
	}
	if _, err := server.New(ctx, server.Config{DatabaseURL: config.NewSecretURL(pgtest.NewDatabase(t))}, nil); err == nil {
		t.Error("server.New accepted nil telemetry")
	}
}

// CALLERS is parsed into the callers the service accepts; a Config built
// in code without any would refuse every call, and Validate says so.
func TestConfigCallers(t *testing.T) {
	env := map[string]string{
		"DATABASE_URL": "postgres://u@h:5432/wallet",
		"CALLERS":      internalauth.Entry(internalauth.Ordering, internalauth.NewToken()) + "," + internalauth.Entry(internalauth.Operator, internalauth.NewToken()),
	}
	var cfg server.Config
	if err := config.Parse(context.Background(), func(k string) string { return env[k] }, &cfg); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := cfg.Callers.String(); got != "ordering,operator" {
		t.Errorf("callers = %q, want ordering,operator", got)
	}
	cfg.Callers = internalauth.Callers{}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "CALLERS") {
		t.Errorf("Validate without callers = %v, want an error naming CALLERS", err)
	}
}

// TestCallerThatGivesUpIsNotAnError: a caller whose deadline passes while
// its call waits (here on a locked table) closes the connection; the
// server's context ends, and that is logged at debug level as cut short,
// not at error level as an internal error.
func TestCallerThatGivesUpIsNotAnError(t *testing.T) {
	ctx := context.Background()
	_, ts, logs, dbURL := startWithDatabase(t)
	c := client(ts, internalauth.Gateway)

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE balances IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := c.GetBalance(short, &walletv1.GetBalanceRequest{AccountId: uuid.NewString(), Environment: accountsv1.Environment_ENVIRONMENT_LIVE, Currency: "USD"}); err == nil {
		t.Fatal("GetBalance answered through a locked table")
	}

	var cut map[string]any
	deadline := time.Now().Add(5 * time.Second)
	for cut == nil && time.Now().Before(deadline) {
		for line := range strings.Lines(logs.String()) {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "twirp call cut short by its context" {
				cut = rec
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = tx.Rollback(ctx)
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["level"] == "ERROR" {
			t.Errorf("a caller giving up was logged at error level: %s", line)
		}
	}
	if cut == nil {
		t.Fatalf("the abandoned call was not logged at debug level:\n%s", logs)
	}
	if cut["level"] != "DEBUG" || cut["method"] != "GetBalance" || cut["code"] != "canceled" {
		t.Errorf("logged %v; want a debug line naming GetBalance and canceled", cut)
	}
}
