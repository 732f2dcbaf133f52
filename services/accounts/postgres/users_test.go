package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/esimplatform/esim/services/accounts"
)

const phc = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U"

func TestUserSchemaConstraints(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t)
	a := insertAccount(t, s, at(0))
	u := uuid.New()
	if _, err := pool.Exec(ctx, "INSERT INTO users (id, account_id, email, password_hash, created_at, password_changed_at) VALUES ($1, $2, 'ann@example.com', $3, now(), now())", u, a.ID, phc); err != nil {
		t.Fatalf("insert a user: %v", err)
	}
	for name, tc := range map[string]struct {
		sql  string
		args []any
	}{
		"plaintext password":     {"INSERT INTO users (id, account_id, email, password_hash, created_at, password_changed_at) VALUES ($1, $2, 'bob@example.com', 'hunter2hunter2', now(), now())", []any{uuid.New(), a.ID}},
		"upper-case email":       {"INSERT INTO users (id, account_id, email, password_hash, created_at, password_changed_at) VALUES ($1, $2, 'Bob@example.com', $3, now(), now())", []any{uuid.New(), a.ID, phc}},
		"taken email":            {"INSERT INTO users (id, account_id, email, password_hash, created_at, password_changed_at) VALUES ($1, $2, 'ann@example.com', $3, now(), now())", []any{uuid.New(), a.ID, phc}},
		"user of no account":     {"INSERT INTO users (id, account_id, email, password_hash, created_at, password_changed_at) VALUES ($1, $2, 'cat@example.com', $3, now(), now())", []any{uuid.New(), uuid.New(), phc}},
		"session token in clear": {"INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES ('ps_abc', $1, now(), now() + interval '1h')", []any{u}},
		"session ending first":   {"INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, now(), now() - interval '1h')", []any{hash("s"), u}},
		"invite token in clear":  {"INSERT INTO invites (token_hash, account_id, email, created_at, expires_at) VALUES ('pi_abc', $1, 'dan@example.com', now(), now() + interval '1h')", []any{a.ID}},
		"invite upper-case":      {"INSERT INTO invites (token_hash, account_id, email, created_at, expires_at) VALUES ($1, $2, 'Dan@example.com', now(), now() + interval '1h')", []any{hash("i"), a.ID}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pool.Exec(ctx, tc.sql, tc.args...)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code[:2] != "23" {
				t.Errorf("err = %v, want an integrity constraint violation (class 23)", err)
			}
		})
	}
}

// TestSignUpIsOneTransaction: a taken email leaves neither the account nor
// the session behind.
func TestSignUpIsOneTransaction(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t)
	signUp := func(email string) error {
		a := accounts.Account{ID: uuid.New(), Name: "Acme", Currency: accounts.USD, CreatedAt: at(0)}
		u := accounts.UserRecord{User: accounts.User{ID: uuid.New(), AccountID: a.ID, Email: email, CreatedAt: at(0), PasswordChangedAt: at(0)}, PasswordHash: phc}
		return s.InsertSignUp(ctx, a, u, accounts.SessionRecord{TokenHash: hash(uuid.NewString()), UserID: u.User.ID, CreatedAt: at(0), ExpiresAt: at(time.Hour)})
	}
	if err := signUp("ann@example.com"); err != nil {
		t.Fatalf("InsertSignUp: %v", err)
	}
	if err := signUp("ann@example.com"); !errors.Is(err, accounts.ErrEmailTaken) || !errors.Is(err, accounts.ErrConflict) {
		t.Errorf("InsertSignUp with a taken email = %v, want ErrEmailTaken", err)
	}
	var nAccounts, nSessions int
	if err := pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM accounts), (SELECT count(*) FROM sessions)").Scan(&nAccounts, &nSessions); err != nil || nAccounts != 1 || nSessions != 1 {
		t.Errorf("after a refused sign-up: %d accounts, %d sessions (%v); want 1 and 1", nAccounts, nSessions, err)
	}
	got, err := s.Account(ctx, uuid.Nil)
	if !errors.Is(err, accounts.ErrNotFound) {
		t.Errorf("Account(nil) = %v, %v", got, err)
	}
	if _, err := s.EnableLive(ctx, uuid.New()); !errors.Is(err, accounts.ErrNotFound) {
		t.Errorf("EnableLive(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := s.SessionByHash(ctx, hash("unknown")); !errors.Is(err, accounts.ErrNotFound) {
		t.Errorf("SessionByHash(unknown) = %v, want ErrNotFound", err)
	}
}

// Invite reads an invite back by its token's hash, used or not, and an
// unknown hash as ErrNotFound.
func TestInviteByHash(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	a := insertAccount(t, s, at(0))
	inv := accounts.InviteRecord{TokenHash: hash("invite"), AccountID: a.ID, Email: "dan@example.com", CreatedAt: at(0), ExpiresAt: at(time.Hour)}
	if err := s.InsertInvite(ctx, inv); err != nil {
		t.Fatal(err)
	}
	got, err := s.Invite(ctx, inv.TokenHash)
	if err != nil || got.UsedAt != nil || got.Email != inv.Email || got.AccountID != a.ID || !got.ExpiresAt.Equal(inv.ExpiresAt) || string(got.TokenHash) != string(inv.TokenHash) {
		t.Fatalf("Invite = %+v, %v; want %+v unused", got, err, inv)
	}
	if _, err := s.AcceptInvite(ctx, accounts.Acceptance{TokenHash: inv.TokenHash, At: at(time.Minute), NewUserID: uuid.New(), PasswordHash: phc,
		Session: accounts.SessionRecord{TokenHash: hash("session"), CreatedAt: at(time.Minute), ExpiresAt: at(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Invite(ctx, inv.TokenHash); err != nil || got.UsedAt == nil || !got.UsedAt.Equal(at(time.Minute)) {
		t.Errorf("Invite after it was accepted = %+v, %v; want used at %s", got, err, at(time.Minute))
	}
	if _, err := s.Invite(ctx, hash("unknown")); !errors.Is(err, accounts.ErrNotFound) {
		t.Errorf("Invite(unknown) = %v, want ErrNotFound", err)
	}
}
