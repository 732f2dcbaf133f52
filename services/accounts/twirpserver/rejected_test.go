package twirpserver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twitchtv/twirp"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/services/accounts"
)

// tables reads every row of every table, hashes and revocation times
// included, so that a call which changed anything at all shows up.
func tables(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var dump string
	err := pool.QueryRow(context.Background(), `SELECT
		coalesce((SELECT json_agg(a ORDER BY a.id) FROM accounts a)::text, '') || ' ' ||
		coalesce((SELECT json_agg(k ORDER BY k.id) FROM api_keys k)::text, '') || ' ' ||
		coalesce((SELECT json_agg(u ORDER BY u.id) FROM users u)::text, '') || ' ' ||
		coalesce((SELECT json_agg(s ORDER BY s.token_hash) FROM sessions s)::text, '') || ' ' ||
		coalesce((SELECT json_agg(i ORDER BY i.token_hash) FROM invites i)::text, '') || ' ' ||
		coalesce((SELECT json_agg(r ORDER BY r.token_hash) FROM password_resets r)::text, '') || ' ' ||
		coalesce((SELECT json_agg(l ORDER BY l.account_id) FROM live_requests l)::text, '')`).Scan(&dump)
	if err != nil {
		t.Fatalf("read the tables: %v", err)
	}
	return dump
}

// TestRejectedCallsChangeNothing sends every method bad and edge input:
// each answer has the code the contract promises, a message free of
// secrets and storage details, and not one row changes.
func TestRejectedCallsChangeNothing(t *testing.T) {
	ctx := context.Background()
	c, pool := newClient(t)
	owner, err := c.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Name: "Owner", Currency: "EUR", RateLimitPerMinute: 600})
	if err != nil {
		t.Fatal(err)
	}
	other := createAccount(t, c, "GBP")
	newKey := func(accountID string, env accountsv1.Environment) *accountsv1.CreateKeyResponse {
		k, err := c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: accountID, Environment: env, Name: "ci"})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	sandbox := newKey(owner.GetId(), accountsv1.Environment_ENVIRONMENT_SANDBOX)
	revoked := newKey(owner.GetId(), accountsv1.Environment_ENVIRONMENT_LIVE)
	if _, err := c.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: owner.GetId(), KeyId: revoked.GetKey().GetId()}); err != nil {
		t.Fatal(err)
	}
	othersKey := newKey(other.GetId(), accountsv1.Environment_ENVIRONMENT_LIVE)
	before := tables(t, pool)

	secret := sandbox.GetSecret()
	random := strings.TrimPrefix(secret, "sk_sandbox_")
	unknown := uuid.NewString()
	long := strings.Repeat("f", 10_000)
	const (
		sbx  = accountsv1.Environment_ENVIRONMENT_SANDBOX
		live = accountsv1.Environment_ENVIRONMENT_LIVE
	)
	createAccount := func(r *accountsv1.CreateAccountRequest) func() error {
		return func() error { _, err := c.CreateAccount(ctx, r); return err }
	}
	getAccount := func(id string) func() error {
		return func() error { _, err := c.GetAccount(ctx, &accountsv1.GetAccountRequest{Id: id}); return err }
	}
	listAccounts := func(page, limit int32) func() error {
		return func() error {
			_, err := c.ListAccounts(ctx, &accountsv1.ListAccountsRequest{Page: page, Limit: limit})
			return err
		}
	}
	setRateLimit := func(id string, perMinute int32) func() error {
		return func() error {
			_, err := c.SetRateLimit(ctx, &accountsv1.SetRateLimitRequest{AccountId: id, RateLimitPerMinute: perMinute})
			return err
		}
	}
	createKey := func(id string, env accountsv1.Environment, name string) func() error {
		return func() error {
			_, err := c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: id, Environment: env, Name: name})
			return err
		}
	}
	listKeys := func(id string, page, limit int32) func() error {
		return func() error {
			_, err := c.ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: id, Page: page, Limit: limit})
			return err
		}
	}
	revokeKey := func(accountID, keyID string) func() error {
		return func() error {
			_, err := c.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: accountID, KeyId: keyID})
			return err
		}
	}
	authenticate := func(s string) func() error {
		return func() error { _, err := c.Authenticate(ctx, &accountsv1.AuthenticateRequest{Secret: s}); return err }
	}

	for _, tc := range []struct {
		name     string
		call     func() error
		code     twirp.ErrorCode
		argument string
	}{
		{"CreateAccount over an existing id", createAccount(&accountsv1.CreateAccountRequest{Id: owner.GetId(), Name: "Hijack", Currency: "USD", RateLimitPerMinute: 1}), twirp.AlreadyExists, ""},
		{"CreateAccount over an existing id in capitals", createAccount(&accountsv1.CreateAccountRequest{Id: strings.ToUpper(owner.GetId()), Name: "Hijack"}), twirp.AlreadyExists, ""},
		{"CreateAccount lower-case currency", createAccount(&accountsv1.CreateAccountRequest{Name: "x", Currency: "usd"}), twirp.InvalidArgument, "currency"},
		{"CreateAccount unsold currency", createAccount(&accountsv1.CreateAccountRequest{Name: "x", Currency: "JPY"}), twirp.InvalidArgument, "currency"},
		{"CreateAccount padded currency", createAccount(&accountsv1.CreateAccountRequest{Name: "x", Currency: " EUR"}), twirp.InvalidArgument, "currency"},
		{"CreateAccount no name", createAccount(&accountsv1.CreateAccountRequest{}), twirp.InvalidArgument, "name"},
		{"CreateAccount name with NUL", createAccount(&accountsv1.CreateAccountRequest{Name: "Acme\x00"}), twirp.InvalidArgument, "name"},
		{"CreateAccount name with escape", createAccount(&accountsv1.CreateAccountRequest{Name: "Acme\x1b[31m"}), twirp.InvalidArgument, "name"},
		{"CreateAccount name with C1 control", createAccount(&accountsv1.CreateAccountRequest{Name: "Acme\u0085Travel"}), twirp.InvalidArgument, "name"},
		{"CreateAccount name with bidi override", createAccount(&accountsv1.CreateAccountRequest{Name: "Acme\u202eofni"}), twirp.InvalidArgument, "name"},
		{"CreateAccount name of 121 characters", createAccount(&accountsv1.CreateAccountRequest{Name: strings.Repeat("é", accounts.MaxNameLength+1)}), twirp.InvalidArgument, "name"},
		{"CreateAccount name of 1 MiB", createAccount(&accountsv1.CreateAccountRequest{Name: strings.Repeat("a", 1<<20)}), twirp.InvalidArgument, "name"},
		{"CreateAccount negative rate limit", createAccount(&accountsv1.CreateAccountRequest{Name: "x", RateLimitPerMinute: -1}), twirp.InvalidArgument, "rate_limit_per_minute"},
		{"CreateAccount rate limit above the bound", createAccount(&accountsv1.CreateAccountRequest{Name: "x", RateLimitPerMinute: accounts.MaxRateLimitPerMinute + 1}), twirp.InvalidArgument, "rate_limit_per_minute"},
		{"CreateAccount malformed id", createAccount(&accountsv1.CreateAccountRequest{Id: "acme", Name: "x"}), twirp.InvalidArgument, "id"},
		{"CreateAccount padded id", createAccount(&accountsv1.CreateAccountRequest{Id: " " + unknown, Name: "x"}), twirp.InvalidArgument, "id"},
		{"CreateAccount oversized id", createAccount(&accountsv1.CreateAccountRequest{Id: long, Name: "x"}), twirp.InvalidArgument, "id"},
		{"CreateAccount nil id", createAccount(&accountsv1.CreateAccountRequest{Id: uuid.Nil.String(), Name: "x"}), twirp.InvalidArgument, "id"},

		{"GetAccount empty id", getAccount(""), twirp.NotFound, ""},
		{"GetAccount oversized id", getAccount(long), twirp.NotFound, ""},
		{"GetAccount nil id", getAccount(uuid.Nil.String()), twirp.NotFound, ""},
		{"GetAccount unknown id", getAccount(unknown), twirp.NotFound, ""},

		{"ListAccounts negative page", listAccounts(-1, 0), twirp.InvalidArgument, "page"},
		{"ListAccounts page past the bound", listAccounts(accounts.MaxPage+1, 0), twirp.InvalidArgument, "page"},
		{"ListAccounts negative limit", listAccounts(0, -1), twirp.InvalidArgument, "limit"},
		{"ListAccounts limit past the bound", listAccounts(0, accounts.MaxPageLimit+1), twirp.InvalidArgument, "limit"},

		{"SetRateLimit empty id", setRateLimit("", 1), twirp.NotFound, ""},
		{"SetRateLimit malformed id", setRateLimit("acme", 1), twirp.NotFound, ""},
		{"SetRateLimit nil id", setRateLimit(uuid.Nil.String(), 1), twirp.NotFound, ""},
		{"SetRateLimit unknown id", setRateLimit(unknown, 1), twirp.NotFound, ""},
		{"SetRateLimit negative", setRateLimit(owner.GetId(), -1), twirp.InvalidArgument, "rate_limit_per_minute"},
		{"SetRateLimit above the bound", setRateLimit(owner.GetId(), accounts.MaxRateLimitPerMinute+1), twirp.InvalidArgument, "rate_limit_per_minute"},

		{"CreateKey unspecified environment", createKey(owner.GetId(), 0, ""), twirp.InvalidArgument, "environment"},
		{"CreateKey unknown environment", createKey(owner.GetId(), 3, ""), twirp.InvalidArgument, "environment"},
		{"CreateKey negative environment", createKey(owner.GetId(), -1, ""), twirp.InvalidArgument, "environment"},
		{"CreateKey name with a control character", createKey(owner.GetId(), live, "prod\n"+"x"), twirp.InvalidArgument, "name"},
		{"CreateKey name of 121 characters", createKey(owner.GetId(), live, strings.Repeat("n", accounts.MaxNameLength+1)), twirp.InvalidArgument, "name"},
		{"CreateKey unknown account", createKey(unknown, live, ""), twirp.NotFound, ""},
		{"CreateKey nil account", createKey(uuid.Nil.String(), sbx, ""), twirp.NotFound, ""},
		{"CreateKey malformed account", createKey("acme", sbx, ""), twirp.NotFound, ""},
		{"CreateKey empty account", createKey("", sbx, ""), twirp.NotFound, ""},

		{"ListKeys unknown account", listKeys(unknown, 0, 0), twirp.NotFound, ""},
		{"ListKeys oversized account id", listKeys(long, 0, 0), twirp.NotFound, ""},
		{"ListKeys negative page", listKeys(owner.GetId(), -1, 0), twirp.InvalidArgument, "page"},
		{"ListKeys limit past the bound", listKeys(owner.GetId(), 1, accounts.MaxPageLimit+1), twirp.InvalidArgument, "limit"},

		{"RevokeKey another account's key", revokeKey(owner.GetId(), othersKey.GetKey().GetId()), twirp.NotFound, ""},
		{"RevokeKey own key through another account", revokeKey(other.GetId(), sandbox.GetKey().GetId()), twirp.NotFound, ""},
		{"RevokeKey unknown key", revokeKey(owner.GetId(), unknown), twirp.NotFound, ""},
		{"RevokeKey unknown account", revokeKey(unknown, sandbox.GetKey().GetId()), twirp.NotFound, ""},
		{"RevokeKey by display prefix", revokeKey(owner.GetId(), sandbox.GetKey().GetPrefix()), twirp.NotFound, ""},
		{"RevokeKey by secret", revokeKey(owner.GetId(), secret), twirp.NotFound, ""},
		{"RevokeKey empty ids", revokeKey("", ""), twirp.NotFound, ""},

		{"Authenticate empty", authenticate(""), twirp.Unauthenticated, ""},
		{"Authenticate revoked key", authenticate(revoked.GetSecret()), twirp.Unauthenticated, ""},
		{"Authenticate sandbox secret as live", authenticate("sk_live_" + random), twirp.Unauthenticated, ""},
		{"Authenticate upper-cased", authenticate(strings.ToUpper(secret)), twirp.Unauthenticated, ""},
		{"Authenticate trailing space", authenticate(secret + " "), twirp.Unauthenticated, ""},
		{"Authenticate truncated", authenticate(secret[:len(secret)-1]), twirp.Unauthenticated, ""},
		{"Authenticate one too long", authenticate(secret + "a"), twirp.Unauthenticated, ""},
		{"Authenticate 1 MiB", authenticate(secret + strings.Repeat("a", 1<<20)), twirp.Unauthenticated, ""},
		{"Authenticate display prefix", authenticate(sandbox.GetKey().GetPrefix()), twirp.Unauthenticated, ""},
		{"Authenticate another vendor's prefix", authenticate("sk_test_" + random), twirp.Unauthenticated, ""},
		{"Authenticate key id", authenticate(sandbox.GetKey().GetId()), twirp.Unauthenticated, ""},
	} {
		err := tc.call()
		wantTwirp(t, tc.name, err, tc.code, tc.argument)
		var twerr twirp.Error
		if !errors.As(err, &twerr) {
			continue
		}
		msg := fmt.Sprint(twerr.Msg(), twerr.MetaMap())
		for _, leak := range []string{random, revoked.GetSecret()[len("sk_live_"):], othersKey.GetSecret()[len("sk_live_"):], "SQLSTATE", "SELECT", "INSERT", "UPDATE", "127.0.0.1", "postgres"} {
			if strings.Contains(msg, leak) {
				t.Errorf("%s: message %q reveals %.12q", tc.name, msg, leak)
			}
		}
		if len(msg) > 300 {
			t.Errorf("%s: message of %d bytes echoes the input: %.80q", tc.name, len(msg), msg)
		}
	}

	if after := tables(t, pool); after != before {
		t.Errorf("rejected calls changed the tables\nbefore: %s\nafter:  %s", before, after)
	}
	for _, k := range []*accountsv1.CreateKeyResponse{sandbox, othersKey} {
		if _, err := c.Authenticate(ctx, &accountsv1.AuthenticateRequest{Secret: k.GetSecret()}); err != nil {
			t.Errorf("key %s stopped authenticating: %v", k.GetKey().GetId(), err)
		}
	}
}

// Concurrent creates of one chosen id make one account, and every other
// call is told it exists; concurrent revocations of one key all answer
// with the one revocation time that was stored.
func TestConcurrentCreatesAndRevokes(t *testing.T) {
	ctx := context.Background()
	c, pool := newClient(t)
	const n = 16

	id := uuid.NewString()
	codes := make([]twirp.ErrorCode, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := c.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Id: id, Name: fmt.Sprintf("racer %d", i)})
			var twerr twirp.Error
			switch {
			case errors.As(err, &twerr):
				codes[i] = twerr.Code()
			case err != nil:
				codes[i] = twirp.Unknown
			default:
				codes[i] = twirp.NoError
			}
		})
	}
	wg.Wait()
	created := 0
	for i, code := range codes {
		switch code {
		case twirp.NoError:
			created++
		case twirp.AlreadyExists:
		default:
			t.Errorf("CreateAccount %d: code %s, want success or already_exists", i, code)
		}
	}
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM accounts WHERE id = $1", id).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if created != 1 || rows != 1 {
		t.Errorf("%d concurrent creates of one id: %d succeeded, %d rows; want 1 and 1", n, created, rows)
	}

	key, err := c.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: id, Environment: accountsv1.Environment_ENVIRONMENT_LIVE})
	if err != nil {
		t.Fatal(err)
	}
	revokedAt := make([]string, n)
	for i := range n {
		wg.Go(func() {
			k, err := c.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: id, KeyId: key.GetKey().GetId()})
			if err != nil {
				revokedAt[i] = err.Error()
				return
			}
			revokedAt[i] = k.GetRevokedAt().AsTime().String()
		})
	}
	wg.Wait()
	list, err := c.ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: id})
	if err != nil || len(list.GetKeys()) != 1 || list.GetKeys()[0].GetRevokedAt() == nil {
		t.Fatalf("ListKeys after the revocations = %v, %v; want the one key, revoked", list, err)
	}
	stored := list.GetKeys()[0].GetRevokedAt().AsTime().String()
	for i, at := range revokedAt {
		if at != stored {
			t.Errorf("RevokeKey %d answered %s; want the stored revocation time %s", i, at, stored)
		}
	}
	if _, err := c.Authenticate(ctx, &accountsv1.AuthenticateRequest{Secret: key.GetSecret()}); err == nil {
		t.Error("the revoked key still authenticates")
	}
}

// The nil UUID is a UUID: refusing it as "must be a UUID" sends the
// operator looking for a typo that is not there.
func TestNilChosenIDSaysWhy(t *testing.T) {
	c, _ := newClient(t)
	for id, want := range map[string]string{
		uuid.Nil.String(): "must not be the nil UUID; leave it empty to have one generated",
		"acme":            "must be a UUID",
	} {
		_, err := c.CreateAccount(context.Background(), &accountsv1.CreateAccountRequest{Id: id, Name: "Acme"})
		wantTwirp(t, "CreateAccount id "+id, err, twirp.InvalidArgument, "id")
		var twerr twirp.Error
		if errors.As(err, &twerr) && twerr.Meta("reason") != want {
			t.Errorf("CreateAccount id %s: reason %q, want %q", id, twerr.Meta("reason"), want)
		}
	}
}
