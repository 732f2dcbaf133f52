package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/esimplatform/esim/services/accounts"
)

// insertUser stores a user of account accountID with email.
func insertUser(t *testing.T, pool *pgxpool.Pool, accountID uuid.UUID, email string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	if _, err := pool.Exec(context.Background(), "INSERT INTO users (id, account_id, email, password_hash, created_at, password_changed_at) VALUES ($1, $2, $3, $4, now(), now())",
		id, accountID, email, phc); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestAccessSchemaConstraints(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t)
	a := insertAccount(t, s, at(0))
	u := insertUser(t, pool, a.ID, "ann@example.com")
	for name, tc := range map[string]struct {
		sql  string
		args []any
	}{
		"reset token in clear":   {"INSERT INTO password_resets (token_hash, user_id, created_at, expires_at) VALUES ('pr_abc', $1, now(), now() + interval '1h')", []any{u}},
		"reset of no user":       {"INSERT INTO password_resets (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, now(), now() + interval '1h')", []any{hash("r"), uuid.New()}},
		"reset ending first":     {"INSERT INTO password_resets (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, now(), now() - interval '1h')", []any{hash("r"), u}},
		"live request of none":   {"INSERT INTO live_requests (account_id, requested_by, requested_at) VALUES ($1, 'ann@example.com', now())", []any{uuid.New()}},
		"live request by no one": {"INSERT INTO live_requests (account_id, requested_by, requested_at) VALUES ($1, '', now())", []any{a.ID}},
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

// Two users removing each other at once: the account's row lock lets one
// through, and the other finds the remover its last user.
func TestConcurrentRemovalsKeepOneUser(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t)
	for round := range 20 {
		a := insertAccount(t, s, at(time.Duration(round)))
		ann := insertUser(t, pool, a.ID, uuid.NewString()+"@example.com")
		bob := insertUser(t, pool, a.ID, uuid.NewString()+"@example.com")
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, id := range []uuid.UUID{ann, bob} {
			wg.Go(func() { errs[i] = s.RemoveUser(ctx, a.ID, id) })
		}
		wg.Wait()
		users, err := s.ListUsers(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(users) != 1 || (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("round %d: %d users left, errors %v; want one removal and one ErrLastUser", round, len(users), errs)
		}
		for _, err := range errs {
			if err != nil && !errors.Is(err, accounts.ErrLastUser) {
				t.Errorf("round %d: %v, want ErrLastUser", round, err)
			}
		}
	}
}

// A reset token spent twice at once sets one password and one session.
func TestResetIsSpentOnce(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t)
	a := insertAccount(t, s, at(0))
	u := insertUser(t, pool, a.ID, "ann@example.com")
	r := accounts.ResetRecord{TokenHash: hash("reset"), UserID: u, CreatedAt: at(0), ExpiresAt: at(time.Hour)}
	if err := s.InsertReset(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.InsertReset(ctx, accounts.ResetRecord{TokenHash: hash("other"), UserID: uuid.New(), CreatedAt: at(0), ExpiresAt: at(time.Hour)}); !errors.Is(err, accounts.ErrNotFound) {
		t.Errorf("InsertReset for an unknown user = %v, want ErrNotFound", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = s.SpendReset(ctx, r.TokenHash, phc, at(time.Minute),
				accounts.SessionRecord{TokenHash: hash(uuid.NewString()), CreatedAt: at(time.Minute), ExpiresAt: at(time.Hour)})
		})
	}
	wg.Wait()
	spent := 0
	for _, err := range errs {
		switch {
		case err == nil:
			spent++
		case !errors.Is(err, accounts.ErrNotFound):
			t.Errorf("SpendReset: %v, want ErrNotFound for all but one", err)
		}
	}
	var sessions int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM sessions WHERE user_id = $1", u).Scan(&sessions); err != nil {
		t.Fatal(err)
	}
	if spent != 1 || sessions != 1 {
		t.Errorf("%d spends and %d sessions from one reset token, want 1 and 1", spent, sessions)
	}
	// Removing the user takes the spent reset with it.
	insertUser(t, pool, a.ID, "bob@example.com")
	if err := s.RemoveUser(ctx, a.ID, u); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reset(ctx, r.TokenHash); !errors.Is(err, accounts.ErrNotFound) {
		t.Errorf("a removed user's reset = %v, want ErrNotFound", err)
	}
}
