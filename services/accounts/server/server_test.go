package server_test

import (
	"context"
	"encoding/json"
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
	"github.com/esimplatform/esim/services/accounts/server"
)

// client calls the service at ts as caller.
func client(ts *httptest.Server, caller internalauth.Caller) accountsv1.Accounts {
	return accountsv1.NewAccountsProtobufClient(ts.URL, internalauthtest.As(ts.Client(), caller))
}

// start assembles the service exactly as run and the gateway's tests do.
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
	tel, err := telemetry.Setup(ctx, "accounts", telemetry.Config{LogLevel: "debug"}, logs)
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

func TestServerServesAPIAndProbes(t *testing.T) {
	ctx := context.Background()
	_, ts, logs := start(t)

	for path, want := range map[string]string{"/healthz": `"ok"`, "/readyz": `"ok"`} {
		if code, body := httpservertest.Get(t, ts.URL+path); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d %q, want 200 containing %s", path, code, body, want)
		}
	}

	c := client(ts, internalauth.Operator)
	a, err := c.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Name: "Acme"})
	if err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	key, err := c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: a.GetId(), Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	auth, err := client(ts, internalauth.Gateway).Authenticate(ctx, &accountsv1.AuthenticateRequest{Secret: key.GetSecret()})
	if err != nil || auth.GetAccountId() != a.GetId() {
		t.Fatalf("Authenticate = %v, %v", auth, err)
	}
	if strings.Contains(logs.String(), key.GetSecret()[len("sk_sandbox_"):]) {
		t.Errorf("the secret appears in the logs:\n%s", logs)
	}
}

func TestServerLogsInternalErrorsWithRequestID(t *testing.T) {
	ctx := context.Background()
	srv, ts, logs := start(t)
	c := client(ts, internalauth.Operator)
	a, err := c.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}

	// Closing the pool under a running server is the outage at hand.
	srv.Close()
	if code, _ := httpservertest.Get(t, ts.URL+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz without a database = %d, want 503", code)
	}
	req, _ := http.NewRequest(http.MethodPost, ts.URL+accountsv1.AccountsPathPrefix+"GetAccount",
		strings.NewReader(`{"id":"`+a.GetId()+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(telemetry.RequestIDHeader, "req_test_outage")
	resp, err := internalauthtest.As(ts.Client(), internalauth.Operator).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), `"internal error"`) {
		t.Errorf("GetAccount during an outage = %d %s, want 500 internal error", resp.StatusCode, body)
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
	if logged["request_id"] != "req_test_outage" || logged["method"] != "GetAccount" || !strings.Contains(logged["error"].(string), "closed pool") {
		t.Errorf("logged %v; want the request id, the method and the cause", logged)
	}
}

func TestNewFailsWithoutDatabase(t *testing.T) {
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, "accounts", telemetry.Config{LogLevel: "info"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// Port 1 on loopback refuses connections at once.
	_, err = server.New(ctx, server.Config{DatabaseURL: config.NewSecretURL("postgres://postgres:hunter2@127.0.0.1:1/accounts?sslmode=disable&connect_timeout=2")}, tel)
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

// TestCallerThatGivesUpIsNotAnError: a caller whose deadline passes while
// its call waits (here on a locked table) closes the connection; the
// server's context ends, and that is logged at debug level as cut short,
// not at error level as an internal error.
func TestCallerThatGivesUpIsNotAnError(t *testing.T) {
	ctx := context.Background()
	_, ts, logs, dbURL := startWithDatabase(t)
	c := client(ts, internalauth.Operator)
	a, err := c.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}

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
	if _, err := tx.Exec(ctx, "LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := c.GetAccount(short, &accountsv1.GetAccountRequest{Id: a.GetId()}); err == nil {
		t.Fatal("GetAccount answered through a locked table")
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
	if cut["level"] != "DEBUG" || cut["method"] != "GetAccount" || cut["code"] != "canceled" {
		t.Errorf("logged %v; want a debug line naming GetAccount and canceled", cut)
	}
}

// TestSecretsStayOutOfDebugLogs walks the paths a secret travels where
// something goes wrong (a revoked key, the other environment's prefix,
// a request that does not decode with the secret in it, an outage during
// Authenticate) with debug logging on: no secret reaches the log.
func TestSecretsStayOutOfDebugLogs(t *testing.T) {
	ctx := context.Background()
	srv, ts, logs := start(t)
	c := client(ts, internalauth.Operator)
	a, err := c.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string
	for _, env := range []accountsv1.Environment{accountsv1.Environment_ENVIRONMENT_SANDBOX, accountsv1.Environment_ENVIRONMENT_LIVE, accountsv1.Environment_ENVIRONMENT_LIVE} {
		k, err := c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: a.GetId(), Environment: env})
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, k.GetSecret())
		if len(secrets) == 3 {
			if _, err := c.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: a.GetId(), KeyId: k.GetKey().GetId()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	sandbox, live, revoked := secrets[0], secrets[1], secrets[2]
	if _, err := c.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: a.GetId(), KeyId: uuid.Nil.String()}); err == nil {
		t.Fatal("revoked an unknown key")
	}
	swapped := "sk_live_" + strings.TrimPrefix(sandbox, "sk_sandbox_")
	for _, s := range []string{revoked, swapped, sandbox + " ", strings.ToUpper(live)} {
		if _, err := client(ts, internalauth.Gateway).Authenticate(ctx, &accountsv1.AuthenticateRequest{Secret: s}); err == nil {
			t.Errorf("Authenticate(a mangled secret) succeeded")
		}
	}
	// Bodies that do not decode, with the secret in them: the decoder's
	// error stays inside the server, and the answer does not echo it.
	for _, body := range []string{`{"secret":` + live + `}`, `{"secret":"` + live + `"`, `{"secret":"` + live + `\ud800"}`} {
		resp, err := internalauthtest.As(ts.Client(), internalauth.Gateway).Post(ts.URL+accountsv1.AccountsPathPrefix+"Authenticate", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(answer), live[len("sk_live_"):]) {
			t.Errorf("undecodable Authenticate = %d %s; want 400 without the secret", resp.StatusCode, answer)
		}
	}

	// An outage: the internal error and its cause are logged.
	srv.Close()
	if _, err := client(ts, internalauth.Gateway).Authenticate(ctx, &accountsv1.AuthenticateRequest{Secret: live}); err == nil {
		t.Fatal("Authenticate answered without a database")
	}
	if !strings.Contains(logs.String(), `"twirp internal error"`) || !strings.Contains(logs.String(), `"level":"DEBUG"`) {
		t.Fatalf("the outage or the debug lines are missing from the log:\n%s", logs)
	}
	for _, s := range secrets {
		random := s[strings.LastIndex(s, "_")+1:]
		// Past the display prefix, which ListKeys shows anyway.
		if strings.Contains(logs.String(), random[6:]) {
			t.Errorf("a secret appears in the logs:\n%s", logs)
		}
	}
}

// TestInternalCallsNeedACredential: the API answers only callers with a
// valid token, each only for what Policy lets it do, and a refused call
// changes nothing.
func TestInternalCallsNeedACredential(t *testing.T) {
	ctx := context.Background()
	_, ts, _ := start(t)
	operator := client(ts, internalauth.Operator)
	a, err := operator.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name   string
		client accountsv1.Accounts
		code   twirp.ErrorCode
	}{
		{"no credential", accountsv1.NewAccountsProtobufClient(ts.URL, ts.Client()), twirp.Unauthenticated},
		{"a wrong token", accountsv1.NewAccountsProtobufClient(ts.URL, internalauth.Client(ts.Client(), internalauth.NewToken())), twirp.Unauthenticated},
		{"the gateway, creating", client(ts, internalauth.Gateway), twirp.PermissionDenied},
		{"ordering, creating", client(ts, internalauth.Ordering), twirp.PermissionDenied},
	}
	for _, tc := range refused {
		_, err := tc.client.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: a.GetId(), Environment: accountsv1.Environment_ENVIRONMENT_LIVE})
		if twerr, ok := err.(twirp.Error); !ok || twerr.Code() != tc.code {
			t.Errorf("%s: CreateKey = %v, want %s", tc.name, err, tc.code)
		}
		if _, err := tc.client.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Name: "Intruder"}); err == nil {
			t.Errorf("%s: CreateAccount succeeded", tc.name)
		}
	}
	// The operator may not authenticate partners' keys: that is the gateway's.
	if _, err := operator.Authenticate(ctx, &accountsv1.AuthenticateRequest{Secret: "sk_live_x"}); err == nil || err.(twirp.Error).Code() != twirp.PermissionDenied {
		t.Errorf("operator Authenticate = %v, want permission_denied", err)
	}
	keys, err := operator.ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: a.GetId()})
	if err != nil || keys.GetTotal() != 0 {
		t.Errorf("after refused calls: %d keys (%v), want none", keys.GetTotal(), err)
	}
	accounts, err := operator.ListAccounts(ctx, &accountsv1.ListAccountsRequest{})
	if err != nil || accounts.GetTotal() != 1 {
		t.Errorf("after refused calls: %d accounts (%v), want 1", accounts.GetTotal(), err)
	}
}
