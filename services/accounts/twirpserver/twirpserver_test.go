package twirpserver_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twitchtv/twirp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/esimplatform/esim/libs/postgres/pgtest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/services/accounts"
	"github.com/esimplatform/esim/services/accounts/postgres"
	"github.com/esimplatform/esim/services/accounts/twirpserver"
)

// newClient serves the Twirp handler over a real HTTP server backed by a
// fresh database and returns the generated protobuf client for it.
func newClient(t *testing.T) (accountsv1.Accounts, *pgxpool.Pool) {
	t.Helper()
	return newClientWithContext(t, nil)
}

// newClientWithContext is newClient with the server's request context
// replaced by reqCtx's answer (when reqCtx is not nil): how a test makes
// the server see a caller that gave up, or a deadline, while the
// connection stays open for the answer.
func newClientWithContext(t *testing.T, reqCtx func(context.Context) context.Context) (accountsv1.Accounts, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.New(t, postgres.Migrations)
	svc := accounts.NewService(postgres.NewStore(pool))
	var h http.Handler = accountsv1.NewAccountsServer(twirpserver.New(svc))
	if reqCtx != nil {
		twirpHandler := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			twirpHandler.ServeHTTP(w, r.WithContext(reqCtx(r.Context())))
		})
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return accountsv1.NewAccountsProtobufClient(ts.URL, ts.Client()), pool
}

// wantTwirp fails unless err is a Twirp error with code (and, for
// InvalidArgument, naming argument).
func wantTwirp(t *testing.T, what string, err error, code twirp.ErrorCode, argument string) {
	t.Helper()
	var twerr twirp.Error
	if !errors.As(err, &twerr) {
		t.Errorf("%s: err = %v, want Twirp %s", what, err, code)
		return
	}
	if twerr.Code() != code {
		t.Errorf("%s: code = %s (%s), want %s", what, twerr.Code(), twerr.Msg(), code)
	}
	if argument != "" && twerr.Meta("argument") != argument {
		t.Errorf("%s: argument = %q, want %q", what, twerr.Meta("argument"), argument)
	}
	if code == twirp.InvalidArgument && (twerr.Meta("reason") == "" || strings.HasPrefix(twerr.Meta("reason"), argument+" ")) {
		t.Errorf("%s: reason = %q, want the reason alone", what, twerr.Meta("reason"))
	}
}

func createAccount(t *testing.T, c accountsv1.Accounts, currency string) *accountsv1.Account {
	t.Helper()
	a, err := c.CreateAccount(context.Background(), &accountsv1.CreateAccountRequest{Name: "Acme Travel", Currency: currency})
	if err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	return a
}

func TestCreateAndGetAccount(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)

	a := createAccount(t, c, "")
	if a.GetCurrency() != "USD" || a.GetRateLimitPerMinute() != 0 || a.GetName() != "Acme Travel" || a.GetCreatedAt() == nil {
		t.Errorf("created = %v; want USD, limit 0, the name and a creation time", a)
	}
	if _, err := uuid.Parse(a.GetId()); err != nil {
		t.Errorf("id %q is not a UUID", a.GetId())
	}
	got, err := c.GetAccount(ctx, &accountsv1.GetAccountRequest{Id: a.GetId()})
	if err != nil || !proto.Equal(got, a) {
		t.Errorf("GetAccount = %v, %v; want %v", got, err, a)
	}

	_, err = c.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Name: "x", Currency: "JPY"})
	wantTwirp(t, "bad currency", err, twirp.InvalidArgument, "currency")
	_, err = c.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Name: " "})
	wantTwirp(t, "blank name", err, twirp.InvalidArgument, "name")
	_, err = c.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Name: "x", RateLimitPerMinute: -5})
	wantTwirp(t, "negative rate limit", err, twirp.InvalidArgument, "rate_limit_per_minute")
	_, err = c.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Id: "not-a-uuid", Name: "x"})
	wantTwirp(t, "malformed chosen id", err, twirp.InvalidArgument, "id")
	_, err = c.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Id: uuid.Nil.String(), Name: "x"})
	wantTwirp(t, "nil chosen id", err, twirp.InvalidArgument, "id")

	chosen := "0195f0c4-1c2d-7abc-8def-0123456789ab"
	imported, err := c.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Id: chosen, Name: "Demo partner", Currency: "GBP", RateLimitPerMinute: 60})
	if err != nil || imported.GetId() != chosen || imported.GetCurrency() != "GBP" || imported.GetRateLimitPerMinute() != 60 {
		t.Fatalf("CreateAccount with a chosen id = %v, %v", imported, err)
	}
	_, err = c.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Id: chosen, Name: "Demo partner"})
	wantTwirp(t, "existing id", err, twirp.AlreadyExists, "")

	_, err = c.GetAccount(ctx, &accountsv1.GetAccountRequest{Id: uuid.NewString()})
	wantTwirp(t, "unknown id", err, twirp.NotFound, "")
	_, err = c.GetAccount(ctx, &accountsv1.GetAccountRequest{Id: "../etc/passwd"})
	wantTwirp(t, "malformed id", err, twirp.NotFound, "")
}

func TestListAccountsAndSetRateLimit(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	var ids []string
	for range 3 {
		ids = append(ids, createAccount(t, c, "EUR").GetId())
	}

	first, err := c.ListAccounts(ctx, &accountsv1.ListAccountsRequest{Limit: 2})
	if err != nil {
		t.Fatalf("ListAccounts: %v", err)
	}
	if first.GetTotal() != 3 || len(first.GetAccounts()) != 2 || first.GetAccounts()[0].GetId() != ids[2] || first.GetAccounts()[1].GetId() != ids[1] {
		t.Errorf("page 1 = %v; want the two newest of %v and total 3", first, ids)
	}
	second, err := c.ListAccounts(ctx, &accountsv1.ListAccountsRequest{Page: 2, Limit: 2})
	if err != nil || len(second.GetAccounts()) != 1 || second.GetAccounts()[0].GetId() != ids[0] {
		t.Errorf("page 2 = %v, %v; want the oldest account", second, err)
	}
	_, err = c.ListAccounts(ctx, &accountsv1.ListAccountsRequest{Limit: 101})
	wantTwirp(t, "limit 101", err, twirp.InvalidArgument, "limit")
	_, err = c.ListAccounts(ctx, &accountsv1.ListAccountsRequest{Page: -1})
	wantTwirp(t, "page -1", err, twirp.InvalidArgument, "page")

	a, err := c.SetRateLimit(ctx, &accountsv1.SetRateLimitRequest{AccountId: ids[0], RateLimitPerMinute: 120})
	if err != nil || a.GetRateLimitPerMinute() != 120 || a.GetId() != ids[0] {
		t.Errorf("SetRateLimit = %v, %v; want limit 120", a, err)
	}
	key, err := c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: ids[0], Environment: accountsv1.Environment_ENVIRONMENT_LIVE})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	auth, err := c.Authenticate(ctx, &accountsv1.AuthenticateRequest{Secret: key.GetSecret()})
	if err != nil || auth.GetRateLimitPerMinute() != 120 {
		t.Errorf("Authenticate after SetRateLimit = %v, %v; want limit 120", auth, err)
	}

	_, err = c.SetRateLimit(ctx, &accountsv1.SetRateLimitRequest{AccountId: ids[0], RateLimitPerMinute: -1})
	wantTwirp(t, "negative limit", err, twirp.InvalidArgument, "rate_limit_per_minute")
	_, err = c.SetRateLimit(ctx, &accountsv1.SetRateLimitRequest{AccountId: "garbage", RateLimitPerMinute: 1})
	wantTwirp(t, "malformed account id", err, twirp.NotFound, "")
	_, err = c.SetRateLimit(ctx, &accountsv1.SetRateLimitRequest{AccountId: uuid.NewString(), RateLimitPerMinute: 1})
	wantTwirp(t, "unknown account id", err, twirp.NotFound, "")
}

func TestKeyPerEnvironmentAuthenticates(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	a := createAccount(t, c, "EUR")

	for env, prefix := range map[accountsv1.Environment]string{
		accountsv1.Environment_ENVIRONMENT_SANDBOX: "sk_sandbox_",
		accountsv1.Environment_ENVIRONMENT_LIVE:    "sk_live_",
	} {
		created, err := c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: a.GetId(), Environment: env, Name: "booking site"})
		if err != nil {
			t.Fatalf("CreateKey(%s): %v", env, err)
		}
		secret := created.GetSecret()
		if !strings.HasPrefix(secret, prefix) || len(secret) != len(prefix)+32 {
			t.Errorf("%s secret has the wrong shape (prefix %q, length %d)", env, created.GetKey().GetPrefix(), len(secret))
		}
		k := created.GetKey()
		if k.GetEnvironment() != env || k.GetAccountId() != a.GetId() || k.GetPrefix() != secret[:len(prefix)+6] || k.GetRevokedAt() != nil || k.GetName() != "booking site" {
			t.Errorf("%s key = %v", env, k)
		}

		auth, err := c.Authenticate(ctx, &accountsv1.AuthenticateRequest{Secret: secret})
		if err != nil {
			t.Fatalf("Authenticate(%s): %v", env, err)
		}
		want := &accountsv1.AuthenticateResponse{AccountId: a.GetId(), Environment: env, KeyId: k.GetId(), Currency: "EUR"}
		if !proto.Equal(auth, want) {
			t.Errorf("Authenticate(%s) = %v, want %v", env, auth, want)
		}
	}

	_, err := c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: a.GetId()})
	wantTwirp(t, "unspecified environment", err, twirp.InvalidArgument, "environment")
	_, err = c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: a.GetId(), Environment: 7})
	wantTwirp(t, "unknown environment", err, twirp.InvalidArgument, "environment")
	_, err = c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: uuid.NewString(), Environment: accountsv1.Environment_ENVIRONMENT_LIVE})
	wantTwirp(t, "unknown account", err, twirp.NotFound, "")
	_, err = c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: "nope", Environment: accountsv1.Environment_ENVIRONMENT_LIVE})
	wantTwirp(t, "malformed account id", err, twirp.NotFound, "")
}

func TestListShowsPrefixNotSecret(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	a := createAccount(t, c, "")
	older, err := c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: a.GetId(), Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX})
	if err != nil {
		t.Fatal(err)
	}
	newer, err := c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: a.GetId(), Environment: accountsv1.Environment_ENVIRONMENT_LIVE})
	if err != nil {
		t.Fatal(err)
	}

	list, err := c.ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: a.GetId()})
	if err != nil {
		t.Fatalf("ListKeys: %v", err)
	}
	if len(list.GetKeys()) != 2 || list.GetKeys()[0].GetId() != newer.GetKey().GetId() || list.GetKeys()[1].GetId() != older.GetKey().GetId() {
		t.Fatalf("ListKeys = %v; want both keys newest first", list)
	}
	if list.GetKeys()[1].GetPrefix() != older.GetKey().GetPrefix() {
		t.Errorf("listed prefix %q, want %q", list.GetKeys()[1].GetPrefix(), older.GetKey().GetPrefix())
	}
	wire, _ := protojson.Marshal(list)
	for _, created := range []*accountsv1.CreateKeyResponse{older, newer} {
		// Anything beyond the display prefix would be a leak.
		if rest := created.GetSecret()[len(created.GetKey().GetPrefix()):]; bytes.Contains(wire, []byte(rest)) {
			t.Errorf("ListKeys response contains a secret: %s", wire)
		}
	}

	_, err = c.ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: uuid.NewString()})
	wantTwirp(t, "unknown account", err, twirp.NotFound, "")
	_, err = c.ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: ""})
	wantTwirp(t, "empty account id", err, twirp.NotFound, "")
}

// ListKeys pages like ListAccounts: the pages walk every key exactly once,
// newest first, each with the account's total; a page past the end is
// empty with the real total; a page or limit out of range is
// InvalidArgument naming the field. The default page holds them all.
func TestListKeysPaging(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	a := createAccount(t, c, "")
	other := createAccount(t, c, "")
	if _, err := c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: other.GetId(), Environment: accountsv1.Environment_ENVIRONMENT_LIVE}); err != nil {
		t.Fatal(err)
	}
	created := map[string]bool{}
	for i := range 7 {
		k, err := c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: a.GetId(), Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX, Name: fmt.Sprintf("key %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		created[k.GetKey().GetId()] = true
		// Revoked keys are listed and counted like active ones.
		if i%2 == 0 {
			if _, err := c.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: a.GetId(), KeyId: k.GetKey().GetId()}); err != nil {
				t.Fatal(err)
			}
		}
	}

	all, err := c.ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: a.GetId()})
	if err != nil {
		t.Fatalf("ListKeys with the defaults: %v", err)
	}
	if len(all.GetKeys()) != 7 || all.GetTotal() != 7 {
		t.Fatalf("ListKeys with the defaults: %d keys, total %d; want all 7 on one page", len(all.GetKeys()), all.GetTotal())
	}
	var order []string
	for i, k := range all.GetKeys() {
		if !created[k.GetId()] {
			t.Errorf("ListKeys listed %s, not a key of the account", k.GetId())
		}
		if i > 0 && k.GetCreatedAt().AsTime().After(all.GetKeys()[i-1].GetCreatedAt().AsTime()) {
			t.Errorf("key %d (%s) is newer than the one before it", i, k.GetId())
		}
		order = append(order, k.GetId())
	}

	for _, limit := range []int32{1, 3, 7} {
		var walked []string
		for page := int32(1); ; page++ {
			resp, err := c.ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: a.GetId(), Page: page, Limit: limit})
			if err != nil {
				t.Fatalf("ListKeys page %d of %d: %v", page, limit, err)
			}
			if resp.GetTotal() != 7 {
				t.Errorf("ListKeys page %d of %d: total %d, want 7", page, limit, resp.GetTotal())
			}
			if len(resp.GetKeys()) == 0 {
				break
			}
			if len(resp.GetKeys()) > int(limit) {
				t.Fatalf("ListKeys page %d of %d: %d keys", page, limit, len(resp.GetKeys()))
			}
			for _, k := range resp.GetKeys() {
				walked = append(walked, k.GetId())
			}
		}
		if strings.Join(walked, " ") != strings.Join(order, " ") {
			t.Errorf("pages of %d walk %v\nwant every key once, in order: %v", limit, walked, order)
		}
	}

	for _, page := range []int32{3, accounts.MaxPage} {
		beyond, err := c.ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: a.GetId(), Page: page, Limit: 5})
		if err != nil || len(beyond.GetKeys()) != 0 || beyond.GetTotal() != 7 {
			t.Errorf("ListKeys page %d past the end = %v, %v; want no keys and total 7", page, beyond, err)
		}
	}

	for _, tc := range []struct {
		page, limit int32
		field       string
	}{
		{-1, 0, "page"},
		{accounts.MaxPage + 1, 0, "page"},
		{math.MaxInt32, 1, "page"},
		{1, -1, "limit"},
		{1, accounts.MaxPageLimit + 1, "limit"},
		{0, math.MaxInt32, "limit"},
	} {
		_, err := c.ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: a.GetId(), Page: tc.page, Limit: tc.limit})
		wantTwirp(t, fmt.Sprintf("ListKeys page %d limit %d", tc.page, tc.limit), err, twirp.InvalidArgument, tc.field)
	}
	after, err := c.ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: a.GetId(), Limit: accounts.MaxPageLimit})
	if err != nil || !proto.Equal(after, all) {
		t.Errorf("ListKeys after rejected pages = %v, %v; want it unchanged: %v", after, err, all)
	}
}

func TestRevokeThenAuthenticate(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	a := createAccount(t, c, "")
	created, err := c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: a.GetId(), Environment: accountsv1.Environment_ENVIRONMENT_LIVE})
	if err != nil {
		t.Fatal(err)
	}

	revoked, err := c.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: a.GetId(), KeyId: created.GetKey().GetId()})
	if err != nil || revoked.GetRevokedAt() == nil {
		t.Fatalf("RevokeKey = %v, %v; want a revocation time", revoked, err)
	}
	_, err = c.Authenticate(ctx, &accountsv1.AuthenticateRequest{Secret: created.GetSecret()})
	wantTwirp(t, "revoked key", err, twirp.Unauthenticated, "")

	again, err := c.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: a.GetId(), KeyId: created.GetKey().GetId()})
	if err != nil || !again.GetRevokedAt().AsTime().Equal(revoked.GetRevokedAt().AsTime()) {
		t.Errorf("second RevokeKey = %v, %v; want the first revocation time %v", again, err, revoked.GetRevokedAt().AsTime())
	}
	list, err := c.ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: a.GetId()})
	if err != nil || len(list.GetKeys()) != 1 || !list.GetKeys()[0].GetRevokedAt().AsTime().Equal(revoked.GetRevokedAt().AsTime()) {
		t.Errorf("ListKeys after revoke = %v, %v; want the key with its revocation time", list, err)
	}
}

func TestRevokeAnotherAccountsKeyIsNotFound(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	owner := createAccount(t, c, "")
	intruder := createAccount(t, c, "")
	created, err := c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: owner.GetId(), Environment: accountsv1.Environment_ENVIRONMENT_LIVE})
	if err != nil {
		t.Fatal(err)
	}

	_, err = c.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: intruder.GetId(), KeyId: created.GetKey().GetId()})
	wantTwirp(t, "another account's key", err, twirp.NotFound, "")
	_, err = c.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: owner.GetId(), KeyId: uuid.NewString()})
	wantTwirp(t, "unknown key", err, twirp.NotFound, "")
	_, err = c.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: owner.GetId(), KeyId: "sk_live_oops"})
	wantTwirp(t, "malformed key id", err, twirp.NotFound, "")

	if _, err := c.Authenticate(ctx, &accountsv1.AuthenticateRequest{Secret: created.GetSecret()}); err != nil {
		t.Errorf("the owner's key stopped working: %v", err)
	}
}

func TestAuthenticateRejectsGarbage(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	for name, secret := range map[string]string{
		"empty":           "",
		"garbage":         "hunter2",
		"well formed":     "sk_live_" + strings.Repeat("a", 32),
		"sandbox unknown": "sk_sandbox_" + strings.Repeat("Z9", 16),
		"bearer":          "Bearer sk_live_" + strings.Repeat("a", 32),
	} {
		_, err := c.Authenticate(ctx, &accountsv1.AuthenticateRequest{Secret: secret})
		wantTwirp(t, name, err, twirp.Unauthenticated, "")
		if err != nil && secret != "" && strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error %q echoes the secret", name, err)
		}
	}
}

func TestStoredRowHoldsNoPlaintextSecret(t *testing.T) {
	ctx := context.Background()
	c, pool := newClient(t)
	a := createAccount(t, c, "")
	created, err := c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: a.GetId(), Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX, Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	secret := created.GetSecret()
	random := secret[len("sk_sandbox_"):]

	// The whole row as text, plus the hash column as raw bytes.
	var row string
	var hash []byte
	if err := pool.QueryRow(ctx, "SELECT row_to_json(k)::text, k.secret_hash FROM api_keys k WHERE k.id = $1", created.GetKey().GetId()).Scan(&row, &hash); err != nil {
		t.Fatalf("read the key row: %v", err)
	}
	if strings.Contains(row, random[6:]) || bytes.Contains(hash, []byte(random)) {
		t.Errorf("the stored row contains the secret beyond its display prefix: %s", row)
	}
	if want := sha256.Sum256([]byte(secret)); !bytes.Equal(hash, want[:]) {
		t.Errorf("secret_hash is not the SHA-256 of the secret")
	}
}

// A storage failure is Internal with a bland message: no SQL, no
// connection details and not Unauthenticated (callers must not treat an
// outage as a bad key).
func TestStorageFailureIsInternal(t *testing.T) {
	ctx := context.Background()
	c, pool := newClient(t)
	a := createAccount(t, c, "")
	created, err := c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: a.GetId(), Environment: accountsv1.Environment_ENVIRONMENT_LIVE})
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()

	_, err = c.Authenticate(ctx, &accountsv1.AuthenticateRequest{Secret: created.GetSecret()})
	wantTwirp(t, "authenticate during an outage", err, twirp.Internal, "")
	_, err = c.GetAccount(ctx, &accountsv1.GetAccountRequest{Id: a.GetId()})
	wantTwirp(t, "get account during an outage", err, twirp.Internal, "")
	var twerr twirp.Error
	if errors.As(err, &twerr) && twerr.Msg() != "internal error" {
		t.Errorf("internal error message = %q, want the bland %q", twerr.Msg(), "internal error")
	}
}

// A call whose context ends on the server (the caller gave up, or a
// deadline passed, here while the query waits on a locked table) is
// Canceled or DeadlineExceeded, not Internal: the server logs Internal as
// an outage, and callers would count one. The message stays bland: the
// storage error around a context error can name the database.
func TestEndedContextIsCanceledOrDeadlineExceeded(t *testing.T) {
	ctx := context.Background()
	var mode atomic.Value // of string
	mode.Store("")
	c, pool := newClientWithContext(t, func(ctx context.Context) context.Context {
		switch mode.Load() {
		case "canceled":
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return ctx
		case "past deadline":
			ctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
			cancel() // the deadline has passed already; Err stays DeadlineExceeded
			return ctx
		case "tiny deadline":
			ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			context.AfterFunc(ctx, cancel)
			return ctx
		}
		return ctx
	})
	a := createAccount(t, c, "")

	for _, tc := range []struct {
		mode string
		code twirp.ErrorCode
		msg  string
	}{
		{"canceled", twirp.Canceled, "request canceled"},
		{"past deadline", twirp.DeadlineExceeded, "deadline exceeded"},
	} {
		mode.Store(tc.mode)
		_, err := c.GetAccount(ctx, &accountsv1.GetAccountRequest{Id: a.GetId()})
		wantTwirp(t, tc.mode+" GetAccount", err, tc.code, "")
		var twerr twirp.Error
		if errors.As(err, &twerr) && twerr.Msg() != tc.msg {
			t.Errorf("%s: message %q, want the bland %q", tc.mode, twerr.Msg(), tc.msg)
		}
		_, err = c.Authenticate(ctx, &accountsv1.AuthenticateRequest{Secret: "sk_live_" + strings.Repeat("a", 32)})
		wantTwirp(t, tc.mode+" Authenticate", err, tc.code, "")
	}

	// A slow path: the query waits on a lock until the deadline passes.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	mode.Store("tiny deadline")
	_, err = c.GetAccount(ctx, &accountsv1.GetAccountRequest{Id: a.GetId()})
	wantTwirp(t, "GetAccount past a tiny deadline", err, twirp.DeadlineExceeded, "")
	_ = tx.Rollback(ctx)

	mode.Store("")
	if got, err := c.GetAccount(ctx, &accountsv1.GetAccountRequest{Id: a.GetId()}); err != nil || got.GetId() != a.GetId() {
		t.Errorf("GetAccount afterwards = %v, %v", got, err)
	}
}

// Out-of-range input is InvalidArgument naming the field, and changes
// nothing: no account is created, a stored limit stays as it was.
func TestOutOfRangeInputIsInvalidAndChangesNothing(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	a, err := c.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Name: "Acme", RateLimitPerMinute: 600})
	if err != nil {
		t.Fatal(err)
	}

	for name, req := range map[string]*accountsv1.CreateAccountRequest{
		"rate limit MaxInt32":        {Name: "x", RateLimitPerMinute: math.MaxInt32},
		"rate limit above the bound": {Name: "x", RateLimitPerMinute: accounts.MaxRateLimitPerMinute + 1},
		"invisible name":             {Name: "\u202e\u200b"},
		"zero-width name":            {Name: "\u200b"},
		"name with a bidi override":  {Name: "Acme\u202eofni.exe"},
		"name with a bidi isolate":   {Name: "Acme \u2067Travel\u2069"},
		"punctuation only":           {Name: "..."},
	} {
		_, err := c.CreateAccount(ctx, req)
		field := "name"
		if req.GetRateLimitPerMinute() != 0 {
			field = "rate_limit_per_minute"
		}
		wantTwirp(t, "CreateAccount with "+name, err, twirp.InvalidArgument, field)
	}
	if list, err := c.ListAccounts(ctx, &accountsv1.ListAccountsRequest{}); err != nil || list.GetTotal() != 1 {
		t.Errorf("ListAccounts after rejected creations = %v, %v; want only the first account", list, err)
	}

	for _, perMinute := range []int32{math.MaxInt32, accounts.MaxRateLimitPerMinute + 1} {
		_, err := c.SetRateLimit(ctx, &accountsv1.SetRateLimitRequest{AccountId: a.GetId(), RateLimitPerMinute: perMinute})
		wantTwirp(t, fmt.Sprintf("SetRateLimit(%d)", perMinute), err, twirp.InvalidArgument, "rate_limit_per_minute")
	}
	if got, err := c.GetAccount(ctx, &accountsv1.GetAccountRequest{Id: a.GetId()}); err != nil || got.GetRateLimitPerMinute() != 600 {
		t.Errorf("GetAccount after rejected SetRateLimit = %v, %v; want the limit still 600", got, err)
	}
	if got, err := c.SetRateLimit(ctx, &accountsv1.SetRateLimitRequest{AccountId: a.GetId(), RateLimitPerMinute: accounts.MaxRateLimitPerMinute}); err != nil || got.GetRateLimitPerMinute() != accounts.MaxRateLimitPerMinute {
		t.Errorf("SetRateLimit(the maximum) = %v, %v", got, err)
	}

	for _, page := range []int32{math.MaxInt32, accounts.MaxPage + 1} {
		_, err := c.ListAccounts(ctx, &accountsv1.ListAccountsRequest{Page: page})
		wantTwirp(t, fmt.Sprintf("ListAccounts page %d", page), err, twirp.InvalidArgument, "page")
	}
	if list, err := c.ListAccounts(ctx, &accountsv1.ListAccountsRequest{Page: accounts.MaxPage}); err != nil || len(list.GetAccounts()) != 0 || list.GetTotal() != 1 {
		t.Errorf("ListAccounts at the last page = %v, %v; want an empty page and the total", list, err)
	}

	_, err = c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: a.GetId(), Environment: accountsv1.Environment_ENVIRONMENT_LIVE, Name: "\u202e\u200b"})
	wantTwirp(t, "CreateKey with an invisible name", err, twirp.InvalidArgument, "name")
	if keys, err := c.ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: a.GetId()}); err != nil || len(keys.GetKeys()) != 0 {
		t.Errorf("ListKeys after a rejected CreateKey = %v, %v; want none", keys, err)
	}
}

func TestPolicyCoversEveryMethod(t *testing.T) {
	var methods []string
	service := accountsv1.File_accounts_v1_accounts_proto.Services().ByName("Accounts")
	for i := range service.Methods().Len() {
		methods = append(methods, string(service.Methods().Get(i).Name()))
	}
	if err := twirpserver.Policy.Check(methods); err != nil {
		t.Fatal(err)
	}
}
