package postgres_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/services/accounts"
	"github.com/esimplatform/esim/services/accounts/postgres"
)

func newStore(t *testing.T) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.New(t, postgres.Migrations)
	return postgres.NewStore(pool), pool
}

// at returns a fixed, microsecond-precision UTC instant, as the domain
// produces them, offset by d.
func at(d time.Duration) time.Time {
	return time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC).Add(d)
}

func hash(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func insertAccount(t *testing.T, s *postgres.Store, created time.Time) accounts.Account {
	t.Helper()
	a := accounts.Account{ID: uuid.New(), Name: "Acme Travel", Currency: accounts.EUR, RateLimitPerMinute: 600, CreatedAt: created}
	if err := s.InsertAccount(context.Background(), a); err != nil {
		t.Fatalf("InsertAccount: %v", err)
	}
	return a
}

func insertKey(t *testing.T, s *postgres.Store, accountID uuid.UUID, secret string, created time.Time) accounts.APIKey {
	t.Helper()
	k := accounts.APIKey{ID: uuid.New(), AccountID: accountID, Environment: accounts.Live, Prefix: "sk_live_abcdef", Name: "prod", CreatedAt: created}
	if err := s.InsertKey(context.Background(), k, hash(secret)); err != nil {
		t.Fatalf("InsertKey: %v", err)
	}
	return k
}

func TestAccountRoundTripAndConflict(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	a := insertAccount(t, s, at(0))

	got, err := s.Account(ctx, a.ID)
	if err != nil {
		t.Fatalf("Account: %v", err)
	}
	if got != a {
		t.Errorf("Account = %+v, want %+v", got, a)
	}

	dup := a
	dup.Name = "Someone else"
	if err := s.InsertAccount(ctx, dup); !errors.Is(err, accounts.ErrConflict) {
		t.Errorf("InsertAccount with a taken id: err = %v, want ErrConflict", err)
	}
	if got, _ := s.Account(ctx, a.ID); got.Name != a.Name {
		t.Errorf("conflicting insert overwrote the name: %q", got.Name)
	}

	if _, err := s.Account(ctx, uuid.New()); !errors.Is(err, accounts.ErrNotFound) {
		t.Errorf("Account(unknown): err = %v, want ErrNotFound", err)
	}
}

func TestListAccountsNewestFirstWithTotal(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	var ids []uuid.UUID
	for i := range 5 {
		ids = append(ids, insertAccount(t, s, at(time.Duration(i)*time.Second)).ID)
	}

	page, total, err := s.ListAccounts(ctx, 2, 1)
	if err != nil {
		t.Fatalf("ListAccounts: %v", err)
	}
	if total != 5 {
		t.Errorf("total = %d, want 5", total)
	}
	// Newest is ids[4]; offset 1 skips it.
	if len(page) != 2 || page[0].ID != ids[3] || page[1].ID != ids[2] {
		t.Errorf("page = %v, want ids %v, %v", page, ids[3], ids[2])
	}

	beyond, total, err := s.ListAccounts(ctx, 2, 10)
	if err != nil || len(beyond) != 0 || total != 5 {
		t.Errorf("past the end: %d accounts, total %d, err %v; want none, 5, nil", len(beyond), total, err)
	}
}

func TestSetRateLimit(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	a := insertAccount(t, s, at(0))

	got, err := s.SetRateLimit(ctx, a.ID, 0)
	if err != nil || got.RateLimitPerMinute != 0 || got.Name != a.Name {
		t.Errorf("SetRateLimit = %+v, %v; want the account with limit 0", got, err)
	}
	if _, err := s.SetRateLimit(ctx, uuid.New(), 10); !errors.Is(err, accounts.ErrNotFound) {
		t.Errorf("SetRateLimit(unknown): err = %v, want ErrNotFound", err)
	}
}

func TestKeysListRevokeAndLookup(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	a := insertAccount(t, s, at(0))
	older := insertKey(t, s, a.ID, "secret-one", at(time.Second))
	newer := insertKey(t, s, a.ID, "secret-two", at(2*time.Second))

	keys, total, err := s.ListKeys(ctx, a.ID, 100, 0)
	if err != nil {
		t.Fatalf("ListKeys: %v", err)
	}
	if len(keys) != 2 || keys[0].ID != newer.ID || keys[1].ID != older.ID || total != 2 {
		t.Fatalf("ListKeys = %v, total %d; want newest first, 2", keys, total)
	}

	rec, err := s.KeyByHash(ctx, hash("secret-one"))
	if err != nil {
		t.Fatalf("KeyByHash: %v", err)
	}
	if rec.Key.ID != older.ID || rec.Key.Environment != accounts.Live || rec.Currency != accounts.EUR ||
		rec.RateLimitPerMinute != 600 || !bytes.Equal(rec.SecretHash, hash("secret-one")) || rec.Key.Revoked() {
		t.Errorf("KeyByHash = %+v", rec)
	}
	if _, err := s.KeyByHash(ctx, hash("no such secret")); !errors.Is(err, accounts.ErrNotFound) {
		t.Errorf("KeyByHash(unknown): err = %v, want ErrNotFound", err)
	}

	first, err := s.RevokeKey(ctx, a.ID, older.ID, at(time.Minute))
	if err != nil || first.RevokedAt == nil || !first.RevokedAt.Equal(at(time.Minute)) {
		t.Fatalf("RevokeKey = %+v, %v; want revoked at %v", first, err, at(time.Minute))
	}
	again, err := s.RevokeKey(ctx, a.ID, older.ID, at(time.Hour))
	if err != nil || again.RevokedAt == nil || !again.RevokedAt.Equal(at(time.Minute)) {
		t.Errorf("second RevokeKey = %+v, %v; want the first revocation time kept", again, err)
	}
	rec, err = s.KeyByHash(ctx, hash("secret-one"))
	if err != nil || !rec.Key.Revoked() {
		t.Errorf("KeyByHash after revoke = %+v, %v; want a revoked key", rec, err)
	}

	other := insertAccount(t, s, at(0))
	if _, err := s.RevokeKey(ctx, other.ID, newer.ID, at(time.Minute)); !errors.Is(err, accounts.ErrNotFound) {
		t.Errorf("RevokeKey through another account: err = %v, want ErrNotFound", err)
	}
	if rec, _ := s.KeyByHash(ctx, hash("secret-two")); rec.Key.Revoked() {
		t.Error("another account revoked the key")
	}
}

// Pages of an account's keys are in one total order, newest first and, for
// keys created in the same microsecond, by id descending: walking them
// yields every key exactly once. Other accounts' keys are neither listed
// nor counted, and a page past the end is empty with the real total.
func TestListKeysPagesInAStableOrder(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	a := insertAccount(t, s, at(0))
	other := insertAccount(t, s, at(0))
	insertKey(t, s, other.ID, "other-account", at(time.Second))

	// Eleven keys over four instants, most sharing theirs with others, so
	// that page boundaries fall inside runs of equal created_at.
	var keys []accounts.APIKey
	for i := range 11 {
		keys = append(keys, insertKey(t, s, a.ID, fmt.Sprintf("secret-%d", i), at(time.Duration(i%4)*time.Second)))
	}
	if _, err := s.RevokeKey(ctx, a.ID, keys[5].ID, at(time.Minute)); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(keys)
	slices.SortFunc(want, func(x, y accounts.APIKey) int {
		if c := y.CreatedAt.Compare(x.CreatedAt); c != 0 {
			return c
		}
		return bytes.Compare(y.ID[:], x.ID[:])
	})

	for _, limit := range []int32{1, 3, 4, 11, 100} {
		var got []uuid.UUID
		for offset := int64(0); ; offset += int64(limit) {
			page, total, err := s.ListKeys(ctx, a.ID, limit, offset)
			if err != nil {
				t.Fatalf("ListKeys(limit %d, offset %d): %v", limit, offset, err)
			}
			if total != 11 {
				t.Errorf("ListKeys(limit %d, offset %d): total %d, want 11", limit, offset, total)
			}
			if len(page) > int(limit) {
				t.Fatalf("ListKeys(limit %d, offset %d): %d keys", limit, offset, len(page))
			}
			for _, k := range page {
				got = append(got, k.ID)
			}
			if len(page) < int(limit) {
				break
			}
		}
		var wantIDs []uuid.UUID
		for _, k := range want {
			wantIDs = append(wantIDs, k.ID)
		}
		if !slices.Equal(got, wantIDs) {
			t.Errorf("pages of %d: %v\nwant %v", limit, got, wantIDs)
		}
	}

	beyond, total, err := s.ListKeys(ctx, a.ID, 5, 1000)
	if err != nil || len(beyond) != 0 || total != 11 {
		t.Errorf("past the end: %d keys, total %d, err %v; want none, 11, nil", len(beyond), total, err)
	}
	none, total, err := s.ListKeys(ctx, uuid.New(), 5, 0)
	if err != nil || len(none) != 0 || total != 0 {
		t.Errorf("unknown account: %d keys, total %d, err %v; want none, 0, nil", len(none), total, err)
	}
}

func TestInsertKeyRules(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)

	err := s.InsertKey(ctx, accounts.APIKey{ID: uuid.New(), AccountID: uuid.New(), Environment: accounts.Sandbox, Prefix: "sk_sandbox_abcdef", CreatedAt: at(0)}, hash("x"))
	if !errors.Is(err, accounts.ErrNotFound) {
		t.Errorf("InsertKey for an unknown account: err = %v, want ErrNotFound", err)
	}

	a := insertAccount(t, s, at(0))
	insertKey(t, s, a.ID, "same secret", at(time.Second))
	err = s.InsertKey(ctx, accounts.APIKey{ID: uuid.New(), AccountID: a.ID, Environment: accounts.Sandbox, Prefix: "sk_sandbox_abcdef", CreatedAt: at(0)}, hash("same secret"))
	if err == nil || errors.Is(err, accounts.ErrNotFound) || errors.Is(err, accounts.ErrConflict) {
		t.Errorf("InsertKey with a duplicate hash: err = %v, want a plain failure from the unique index", err)
	}
}

// The schema defends its invariants even against writers that skip the
// domain's validation.
func TestSchemaConstraints(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t)
	a := insertAccount(t, s, at(0))

	for name, tc := range map[string]struct {
		sql  string
		args []any
	}{
		"currency":                          {"INSERT INTO accounts (id, name, currency) VALUES ($1, 'x', 'JPY')", []any{uuid.New()}},
		"empty name":                        {"INSERT INTO accounts (id, name) VALUES ($1, '')", []any{uuid.New()}},
		"rate limit":                        {"INSERT INTO accounts (id, name, rate_limit_per_minute) VALUES ($1, 'x', -1)", []any{uuid.New()}},
		"environment":                       {"INSERT INTO api_keys (id, account_id, environment, prefix, secret_hash) VALUES ($1, $2, 'staging', 'sk_staging_abcdef', $3)", []any{uuid.New(), a.ID, hash("e")}},
		"hash length":                       {"INSERT INTO api_keys (id, account_id, environment, prefix, secret_hash) VALUES ($1, $2, 'live', 'sk_live_abcdef', 'short')", []any{uuid.New(), a.ID}},
		"foreign key":                       {"INSERT INTO api_keys (id, account_id, environment, prefix, secret_hash) VALUES ($1, $2, 'live', 'sk_live_abcdef', $3)", []any{uuid.New(), uuid.New(), hash("f")}},
		"rate limit above the domain's":     {"INSERT INTO accounts (id, name, rate_limit_per_minute) VALUES ($1, 'x', 1000001)", []any{uuid.New()}},
		"prefix of the other environment":   {"INSERT INTO api_keys (id, account_id, environment, prefix, secret_hash) VALUES ($1, $2, 'live', 'sk_sandbox_abcdef', $3)", []any{uuid.New(), a.ID, hash("g")}},
		"prefix holding the whole secret":   {"INSERT INTO api_keys (id, account_id, environment, prefix, secret_hash) VALUES ($1, $2, 'live', 'sk_live_abcdefghijklmnopqrstuvwxyz012345', $3)", []any{uuid.New(), a.ID, hash("h")}},
		"prefix without the environment":    {"INSERT INTO api_keys (id, account_id, environment, prefix, secret_hash) VALUES ($1, $2, 'live', 'abcdef', $3)", []any{uuid.New(), a.ID, hash("i")}},
		"default currency is USD, not null": {"INSERT INTO accounts (id, name, currency) VALUES ($1, 'x', NULL)", []any{uuid.New()}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pool.Exec(ctx, tc.sql, tc.args...)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code[:2] != "23" {
				t.Errorf("err = %v, want an integrity constraint violation (class 23)", err)
			}
		})
	}

	var currency string
	id := uuid.New()
	if err := pool.QueryRow(ctx, "INSERT INTO accounts (id, name) VALUES ($1, 'x') RETURNING currency", id).Scan(&currency); err != nil || currency != "USD" {
		t.Errorf("default currency = %q, %v; want USD", currency, err)
	}
}

// A revoked key stays revoked, and a key stays the key it was issued as,
// whoever writes to the table: the gateway's caches, the audit trail and
// partners all rely on revocation being final.
func TestRevocationIsFinalAndKeysKeepTheirIdentity(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t)
	a := insertAccount(t, s, at(0))
	other := insertAccount(t, s, at(0))
	revoked := insertKey(t, s, a.ID, "revoked", at(time.Second))
	active := insertKey(t, s, a.ID, "active", at(time.Second))
	if _, err := s.RevokeKey(ctx, a.ID, revoked.ID, at(time.Minute)); err != nil {
		t.Fatal(err)
	}

	for name, tc := range map[string]struct {
		sql string
		id  uuid.UUID
		arg any
	}{
		"un-revoke":                 {"UPDATE api_keys SET revoked_at = NULL WHERE id = $1 AND $2::int = 0", revoked.ID, 0},
		"move the revocation":       {"UPDATE api_keys SET revoked_at = $2 WHERE id = $1", revoked.ID, at(time.Hour)},
		"move to another account":   {"UPDATE api_keys SET account_id = $2 WHERE id = $1", active.ID, other.ID},
		"switch environment":        {"UPDATE api_keys SET environment = 'sandbox', prefix = 'sk_sandbox_abcdef' WHERE id = $1 AND $2::int = 0", active.ID, 0},
		"answer to another secret":  {"UPDATE api_keys SET secret_hash = $2 WHERE id = $1", active.ID, hash("another")},
		"rewrite the creation time": {"UPDATE api_keys SET created_at = $2 WHERE id = $1", active.ID, at(time.Hour)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pool.Exec(ctx, tc.sql, tc.id, tc.arg)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code[:2] != "23" {
				t.Errorf("err = %v, want an integrity constraint violation (class 23)", err)
			}
		})
	}

	rec, err := s.KeyByHash(ctx, hash("revoked"))
	if err != nil || rec.Key.RevokedAt == nil || !rec.Key.RevokedAt.Equal(at(time.Minute)) {
		t.Errorf("revoked key after the attempts: %+v, %v; want revoked at %v", rec.Key, err, at(time.Minute))
	}
	// What may change still can: revoking again keeps the first time,
	// revoking an active key works, and a name is only a label.
	if k, err := s.RevokeKey(ctx, a.ID, revoked.ID, at(time.Hour)); err != nil || !k.RevokedAt.Equal(at(time.Minute)) {
		t.Errorf("revoking again: %+v, %v", k, err)
	}
	if _, err := pool.Exec(ctx, "UPDATE api_keys SET name = 'renamed' WHERE id = $1", active.ID); err != nil {
		t.Errorf("renaming a key: %v", err)
	}
	if k, err := s.RevokeKey(ctx, a.ID, active.ID, at(time.Minute)); err != nil || k.RevokedAt == nil {
		t.Errorf("revoking an active key: %+v, %v", k, err)
	}
}

// A page and its total come from one snapshot: an account or key committed
// between the statement that reads the page and the one that counts must
// not be counted without being listed (a partner would see "3 keys" over
// a list of two, and has_more on the last page).
func TestListsReadPageAndTotalInOneSnapshot(t *testing.T) {
	ctx := context.Background()
	base, pool := newStore(t)
	a := insertAccount(t, base, at(0))
	insertKey(t, base, a.ID, "first", at(time.Second))

	interleaved := func(statement string, write func()) *postgres.Store {
		t.Helper()
		p, err := libpostgres.Connect(ctx, pool.Config().ConnString(), pgtest.AfterStatement(statement, write))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return postgres.NewStore(p)
	}

	s := interleaved("ListAccounts", func() { insertAccount(t, base, at(time.Hour)) })
	list, total, err := s.ListAccounts(ctx, 100, 0)
	if err != nil || int64(len(list)) != total {
		t.Errorf("ListAccounts: %d accounts listed, total %d (%v); a page holding every account must match its total", len(list), total, err)
	}

	s = interleaved("ListKeys", func() { insertKey(t, base, a.ID, "second", at(time.Hour)) })
	keys, total, err := s.ListKeys(ctx, a.ID, 100, 0)
	if err != nil || int64(len(keys)) != total {
		t.Errorf("ListKeys: %d keys listed, total %d (%v); a page holding every key must match its total", len(keys), total, err)
	}
}

// The store bounds what it reads even for a caller that skips the
// domain's paging rules.
func TestListsRefusePagesOutOfRange(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	a := insertAccount(t, s, at(0))
	for _, p := range []struct {
		limit  int32
		offset int64
	}{{accounts.MaxPageLimit + 1, 0}, {1 << 30, 0}, {0, 0}, {-1, 0}, {10, -1}} {
		if _, _, err := s.ListAccounts(ctx, p.limit, p.offset); err == nil {
			t.Errorf("ListAccounts(limit %d, offset %d) read a page", p.limit, p.offset)
		}
		if _, _, err := s.ListKeys(ctx, a.ID, p.limit, p.offset); err == nil {
			t.Errorf("ListKeys(limit %d, offset %d) read a page", p.limit, p.offset)
		}
	}
	if list, total, err := s.ListAccounts(ctx, accounts.MaxPageLimit, 0); err != nil || len(list) != 1 || total != 1 {
		t.Errorf("largest page: %d accounts, total %d, %v", len(list), total, err)
	}
}

// The key's record decides its environment, and a record that disagrees
// with the secret it answers to (a sandbox-looking secret stored as a live
// key, which only a bug or a manual fix could write) grants nothing.
func TestAuthenticateRefusesARecordThatContradictsItsSecret(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	svc := accounts.NewService(s)
	a, err := svc.CreateAccount(ctx, accounts.NewAccount{Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	sandboxSecret := "sk_sandbox_" + strings.Repeat("a", 32)
	k := accounts.APIKey{ID: uuid.New(), AccountID: a.ID, Environment: accounts.Live, Prefix: "sk_live_aaaaaa", CreatedAt: at(0)}
	if err := s.InsertKey(ctx, k, hash(sandboxSecret)); err != nil {
		t.Fatal(err)
	}
	if p, err := svc.Authenticate(ctx, sandboxSecret); !errors.Is(err, accounts.ErrUnauthenticated) {
		t.Fatalf("a sandbox secret stored as a live key: %+v, %v; want ErrUnauthenticated", p, err)
	}

	issued, err := svc.CreateKey(ctx, accounts.NewKey{AccountID: a.ID, Environment: accounts.Live})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := svc.Authenticate(ctx, issued.Secret.Reveal()); err != nil || p.Environment != accounts.Live || p.KeyID != issued.Key.ID {
		t.Fatalf("a live key: %+v, %v", p, err)
	}
}

func TestMigrationsGoDownAndUpAgain(t *testing.T) {
	pgtest.CheckMigrationsReversible(t, postgres.Migrations)
}
