// Package postgres is the accounts Store over Postgres (pgx/v5), with its
// queries written in SQL and compiled by sqlc into package db.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/services/accounts"
	"github.com/esimplatform/esim/services/accounts/postgres/db"
)

// foreignKeyViolation is Postgres's SQLSTATE for a missing referenced row.
const foreignKeyViolation = "23503"

// Store implements accounts.Store.
type Store struct {
	pool *pgxpool.Pool
	q    *db.Queries
}

var _ accounts.Store = (*Store)(nil)

// NewStore returns a Store over pool; the pool stays the caller's to close.
func NewStore(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, q: db.New(pool)}
}

// page reads a page of rows and the total they are counted in, in one
// snapshot. It first refuses a page the domain would never ask for: the
// domain validates page and limit, and this keeps a caller that skips it
// (or a bug in the arithmetic) from reading an unbounded page, failing
// loudly rather than clamping, since a clamped page would disagree with
// the paging the caller computes from its own limit.
func page[R any](ctx context.Context, s *Store, limit int32, offset int64,
	list func(*db.Queries) ([]R, error), count func(*db.Queries) (int64, error)) ([]R, int64, error) {
	if limit < 1 || limit > accounts.MaxPageLimit || offset < 0 {
		return nil, 0, fmt.Errorf("page of %d rows at offset %d is out of range (limit 1..%d, offset >= 0)", limit, offset, accounts.MaxPageLimit)
	}
	var rows []R
	var total int64
	err := libpostgres.InSnapshot(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		var err error
		if rows, err = list(q); err != nil {
			return fmt.Errorf("select: %w", err)
		}
		if total, err = count(q); err != nil {
			return fmt.Errorf("count: %w", err)
		}
		return nil
	})
	return rows, total, err
}

// InsertAccount implements accounts.Store.
func (s *Store) InsertAccount(ctx context.Context, a accounts.Account) error {
	return insertAccount(ctx, s.q, a)
}

// insertAccount inserts a, on its own or in a sign-up's transaction;
// ErrConflict when its id is taken.
func insertAccount(ctx context.Context, q *db.Queries, a accounts.Account) error {
	n, err := q.InsertAccount(ctx, db.InsertAccountParams{
		ID:                 a.ID,
		Name:               a.Name,
		Currency:           string(a.Currency),
		RateLimitPerMinute: a.RateLimitPerMinute,
		CreatedAt:          a.CreatedAt,
		LiveEnabled:        a.LiveEnabled,
	})
	if err != nil {
		return fmt.Errorf("insert account: %w", err)
	}
	if n == 0 {
		return accounts.ErrConflict
	}
	return nil
}

// Account implements accounts.Store.
func (s *Store) Account(ctx context.Context, id uuid.UUID) (accounts.Account, error) {
	row, err := s.q.GetAccount(ctx, id)
	if err != nil {
		return accounts.Account{}, notFound(err, "select account")
	}
	return account(row), nil
}

// ListAccounts implements accounts.Store. The page and the count are read
// in one snapshot.
func (s *Store) ListAccounts(ctx context.Context, limit int32, offset int64) ([]accounts.Account, int64, error) {
	rows, total, err := page(ctx, s, limit, offset,
		func(q *db.Queries) ([]db.Account, error) {
			return q.ListAccounts(ctx, db.ListAccountsParams{RowLimit: limit, RowOffset: offset})
		},
		func(q *db.Queries) (int64, error) { return q.CountAccounts(ctx) })
	if err != nil {
		return nil, 0, fmt.Errorf("list accounts: %w", err)
	}
	list := make([]accounts.Account, len(rows))
	for i, r := range rows {
		list[i] = account(r)
	}
	return list, total, nil
}

// SetRateLimit implements accounts.Store.
func (s *Store) SetRateLimit(ctx context.Context, id uuid.UUID, perMinute int32) (accounts.Account, error) {
	row, err := s.q.SetRateLimit(ctx, db.SetRateLimitParams{ID: id, RateLimitPerMinute: perMinute})
	if err != nil {
		return accounts.Account{}, notFound(err, "update rate limit")
	}
	return account(row), nil
}

// EnableLive implements accounts.Store.
func (s *Store) EnableLive(ctx context.Context, id uuid.UUID) (accounts.Account, error) {
	row, err := s.q.EnableLive(ctx, id)
	if err != nil {
		return accounts.Account{}, notFound(err, "enable live")
	}
	return account(row), nil
}

// InsertKey implements accounts.Store.
func (s *Store) InsertKey(ctx context.Context, k accounts.APIKey, secretHash []byte) error {
	err := s.q.InsertKey(ctx, db.InsertKeyParams{
		ID:          k.ID,
		AccountID:   k.AccountID,
		Environment: string(k.Environment),
		Prefix:      k.Prefix,
		Name:        k.Name,
		SecretHash:  secretHash,
		CreatedAt:   k.CreatedAt,
	})
	return parentNotFound(err, "insert key")
}

// ListKeys implements accounts.Store. As in ListAccounts, the page and the
// count are read in one snapshot.
func (s *Store) ListKeys(ctx context.Context, accountID uuid.UUID, limit int32, offset int64) ([]accounts.APIKey, int64, error) {
	rows, total, err := page(ctx, s, limit, offset,
		func(q *db.Queries) ([]db.ListKeysRow, error) {
			return q.ListKeys(ctx, db.ListKeysParams{AccountID: accountID, RowLimit: limit, RowOffset: offset})
		},
		func(q *db.Queries) (int64, error) { return q.CountKeys(ctx, accountID) })
	if err != nil {
		return nil, 0, fmt.Errorf("list keys: %w", err)
	}
	keys := make([]accounts.APIKey, len(rows))
	for i, r := range rows {
		keys[i] = apiKey(r)
	}
	return keys, total, nil
}

// RevokeKey implements accounts.Store.
func (s *Store) RevokeKey(ctx context.Context, accountID, keyID uuid.UUID, at time.Time) (accounts.APIKey, error) {
	row, err := s.q.RevokeKey(ctx, db.RevokeKeyParams{ID: keyID, AccountID: accountID, RevokedAt: at})
	if err != nil {
		return accounts.APIKey{}, notFound(err, "revoke key")
	}
	return apiKey(db.ListKeysRow(row)), nil
}

// KeyByHash implements accounts.Store.
func (s *Store) KeyByHash(ctx context.Context, secretHash []byte) (accounts.KeyRecord, error) {
	row, err := s.q.KeyByHash(ctx, secretHash)
	if err != nil {
		return accounts.KeyRecord{}, notFound(err, "select key by hash")
	}
	return accounts.KeyRecord{
		Key: apiKey(db.ListKeysRow{
			ID:          row.ID,
			AccountID:   row.AccountID,
			Environment: row.Environment,
			Prefix:      row.Prefix,
			Name:        row.Name,
			CreatedAt:   row.CreatedAt,
			RevokedAt:   row.RevokedAt,
		}),
		SecretHash:         row.SecretHash,
		Currency:           accounts.Currency(row.Currency),
		RateLimitPerMinute: row.RateLimitPerMinute,
	}, nil
}

// notFound turns "no row" into the domain's ErrNotFound and wraps anything
// else with what was being done.
// parentNotFound is an insert's error: accounts.ErrNotFound when the row
// it refers to (an account, a user) is not there.
func parentNotFound(err error, doing string) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == foreignKeyViolation {
		return accounts.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("%s: %w", doing, err)
	}
	return nil
}

func notFound(err error, doing string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return accounts.ErrNotFound
	}
	return fmt.Errorf("%s: %w", doing, err)
}

func account(r db.Account) accounts.Account {
	return accounts.Account{
		ID:                 r.ID,
		Name:               r.Name,
		Currency:           accounts.Currency(r.Currency),
		RateLimitPerMinute: r.RateLimitPerMinute,
		// Postgres hands timestamps back in the session's zone; the domain
		// speaks UTC.
		CreatedAt:   r.CreatedAt.UTC(),
		LiveEnabled: r.LiveEnabled,
	}
}

func apiKey(r db.ListKeysRow) accounts.APIKey {
	k := accounts.APIKey{
		ID:          r.ID,
		AccountID:   r.AccountID,
		Environment: accounts.Environment(r.Environment),
		Prefix:      r.Prefix,
		Name:        r.Name,
		CreatedAt:   r.CreatedAt.UTC(),
	}
	if r.RevokedAt != nil {
		at := r.RevokedAt.UTC()
		k.RevokedAt = &at
	}
	return k
}
