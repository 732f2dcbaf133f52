// Package postgres is the wallet Store over Postgres (pgx/v5), with its
// queries written in SQL and compiled by sqlc into package db.
//
// Each movement is one transaction under Postgres's default READ
// COMMITTED: it changes the balance with one guarded statement, which
// locks the balance's row until the transaction ends, then inserts its
// ledger entry ON CONFLICT DO NOTHING on the reference. Movements of one
// balance therefore run one after the other from the balance's change on,
// and the guard is evaluated on the latest committed amount: concurrent
// debits cannot spend the same money twice. When the insert finds the
// reference taken, by a concurrent call with the same reference that
// committed first, the transaction rolls back, so the money it moved was
// never moved, and the call answers with the entry that won. The entry is
// inserted after the balance changed, not before, because it records the
// balance after it and entries are never updated.
package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/services/wallet"
	"github.com/esimplatform/esim/services/wallet/postgres/db"
)

// Store implements wallet.Store.
type Store struct {
	pool *pgxpool.Pool
	q    *db.Queries
}

var _ wallet.Store = (*Store)(nil)

// NewStore returns a Store over pool; the pool stays the caller's to close.
func NewStore(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, q: db.New(pool)}
}

// Why a movement's transaction rolled back without failing.
var (
	// errRefused: the balance's guard refused the change (no row).
	errRefused = errors.New("balance refused the change")
	// errTaken: the entry's reference was taken.
	errTaken = errors.New("reference taken")
)

// TopUp implements wallet.Store.
func (s *Store) TopUp(ctx context.Context, e wallet.Entry) (wallet.Entry, bool, error) {
	if prior, ok, err := s.recorded(ctx, e); err != nil || ok {
		return prior, false, err
	}
	return s.record(ctx, e, s.credit(ctx, e), func() error {
		// Credit refuses only a balance held in another currency.
		return s.otherCurrency(ctx, e, errors.New("top-up refused by a balance in its own currency"))
	})
}

// Debit implements wallet.Store.
func (s *Store) Debit(ctx context.Context, e wallet.Entry) (wallet.Entry, bool, error) {
	if prior, ok, err := s.recorded(ctx, e); err != nil || ok {
		return prior, false, err
	}
	take := func(q *db.Queries) (db.CreditRow, error) {
		row, err := q.Debit(ctx, db.DebitParams{
			AccountID:   e.AccountID,
			Environment: string(e.Environment),
			Currency:    string(e.Currency),
			AmountMinor: e.AmountMinor,
		})
		return db.CreditRow(row), err
	}
	// No balance, one that does not cover the amount or one in another
	// currency: only the last is the caller's mistake to fix in the
	// request; the others are insufficient funds.
	return s.record(ctx, e, take, func() error { return s.otherCurrency(ctx, e, wallet.ErrInsufficientFunds) })
}

// Refund implements wallet.Store.
func (s *Store) Refund(ctx context.Context, e wallet.Entry) (wallet.Entry, bool, error) {
	if prior, ok, err := s.recorded(ctx, e); err != nil || ok {
		return prior, false, err
	}
	// Debits are never changed nor removed: what is read here holds for
	// the transaction below, whose insert the schema checks against it
	// once more (ledger_entries_refund_of_debit_fkey).
	debit, ok, err := s.entry(ctx, e.AccountID, e.Environment, wallet.Debit, e.Reference)
	if err != nil {
		return wallet.Entry{}, false, err
	}
	if !ok {
		return wallet.Entry{}, false, wallet.ErrNotFound
	}
	e.AmountMinor, e.Currency = debit.AmountMinor, debit.Currency
	return s.record(ctx, e, s.credit(ctx, e), func() error {
		// The debit's balance exists, in the debit's currency: the schema
		// keeps both.
		return fmt.Errorf("refund of debit %s refused by its own balance", debit.ID)
	})
}

// credit adds e's amount to its balance, creating the balance in e's
// currency.
func (s *Store) credit(ctx context.Context, e wallet.Entry) func(*db.Queries) (db.CreditRow, error) {
	return func(q *db.Queries) (db.CreditRow, error) {
		if err := q.EnsureBalance(ctx, db.EnsureBalanceParams{
			AccountID:   e.AccountID,
			Environment: string(e.Environment),
			Currency:    string(e.Currency),
		}); err != nil {
			return db.CreditRow{}, err
		}
		return q.Credit(ctx, db.CreditParams{
			AccountID:   e.AccountID,
			Environment: string(e.Environment),
			Currency:    string(e.Currency),
			AmountMinor: e.AmountMinor,
		})
	}
}

// record is a movement's transaction: move changes the balance (no row
// when its guard refuses), then e is inserted with the balance after it
// and the time the balance moved. refused says why the guard refused, when
// no entry with e's reference explains it.
func (s *Store) record(ctx context.Context, e wallet.Entry, move func(*db.Queries) (db.CreditRow, error), refused func() error) (wallet.Entry, bool, error) {
	var stored wallet.Entry
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		moved, err := move(q)
		if errors.Is(err, pgx.ErrNoRows) {
			return errRefused
		}
		if err != nil {
			return fmt.Errorf("move balance: %w", err)
		}
		row, err := q.InsertEntry(ctx, db.InsertEntryParams{
			ID:                e.ID,
			AccountID:         e.AccountID,
			Environment:       string(e.Environment),
			Kind:              string(e.Kind),
			AmountMinor:       e.AmountMinor,
			Currency:          string(e.Currency),
			Reference:         e.Reference,
			BalanceAfterMinor: moved.AmountMinor,
			Actor:             e.Actor,
			Note:              e.Note,
			CreatedAt:         moved.UpdatedAt,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return errTaken // rolls the balance's change back
		}
		if err != nil {
			return fmt.Errorf("insert entry: %w", err)
		}
		stored = entry(db.EntryByReferenceRow(row))
		return nil
	})
	if err == nil {
		return stored, true, nil
	}
	if !errors.Is(err, errRefused) && !errors.Is(err, errTaken) {
		return wallet.Entry{}, false, fmt.Errorf("record %s: %w", e.Kind, err)
	}
	// A concurrent call with the same reference committed after this
	// call's first lookup: its entry is the answer, even when, having
	// spent the money, it is why the guard refused. Read after the
	// rollback, so the statement sees what committed since.
	prior, ok, lookupErr := s.recorded(ctx, e)
	switch {
	case lookupErr != nil:
		return wallet.Entry{}, false, lookupErr
	case ok:
		return prior, false, nil
	case errors.Is(err, errTaken):
		return wallet.Entry{}, false, fmt.Errorf("record %s: reference %q taken, yet no entry has it", e.Kind, e.Reference)
	}
	return wallet.Entry{}, false, refused()
}

// otherCurrency returns CurrencyMismatch when e's balance is held in
// another currency than e's, and otherwise err.
func (s *Store) otherCurrency(ctx context.Context, e wallet.Entry, err error) error {
	b, lookupErr := s.Balance(ctx, e.AccountID, e.Environment)
	switch {
	case errors.Is(lookupErr, wallet.ErrNotFound):
		return err
	case lookupErr != nil:
		return lookupErr
	case b.Currency != e.Currency:
		return wallet.CurrencyMismatch(b.Currency)
	}
	return err
}

// recorded returns the entry of e's kind with e's reference, if any.
func (s *Store) recorded(ctx context.Context, e wallet.Entry) (wallet.Entry, bool, error) {
	return s.entry(ctx, e.AccountID, e.Environment, e.Kind, e.Reference)
}

func (s *Store) entry(ctx context.Context, accountID uuid.UUID, env wallet.Environment, kind wallet.Kind, reference string) (wallet.Entry, bool, error) {
	row, err := s.q.EntryByReference(ctx, db.EntryByReferenceParams{
		AccountID:   accountID,
		Environment: string(env),
		Kind:        string(kind),
		Reference:   reference,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return wallet.Entry{}, false, nil
	}
	if err != nil {
		return wallet.Entry{}, false, fmt.Errorf("select %s by reference: %w", kind, err)
	}
	return entry(row), true, nil
}

// Balance implements wallet.Store.
func (s *Store) Balance(ctx context.Context, accountID uuid.UUID, env wallet.Environment) (wallet.Balance, error) {
	row, err := s.q.GetBalance(ctx, db.GetBalanceParams{AccountID: accountID, Environment: string(env)})
	if errors.Is(err, pgx.ErrNoRows) {
		return wallet.Balance{}, wallet.ErrNotFound
	}
	if err != nil {
		return wallet.Balance{}, fmt.Errorf("select balance: %w", err)
	}
	return wallet.Balance{
		AccountID:   row.AccountID,
		Environment: wallet.Environment(row.Environment),
		Currency:    wallet.Currency(row.Currency),
		AmountMinor: row.AmountMinor,
		UpdatedAt:   row.UpdatedAt.UTC(),
	}, nil
}

// ListEntries implements wallet.Store. The page and the count are read in
// one snapshot, so that they agree while movements commit. It first
// refuses a page the domain would never ask for, as accounts does: failing
// loudly rather than clamping, since a clamped page would disagree with
// the paging the caller computes from its own limit.
func (s *Store) ListEntries(ctx context.Context, accountID uuid.UUID, env wallet.Environment, limit int32, offset int64) ([]wallet.Entry, int64, error) {
	if limit < 1 || limit > wallet.MaxPageLimit || offset < 0 {
		return nil, 0, fmt.Errorf("page of %d rows at offset %d is out of range (limit 1..%d, offset >= 0)", limit, offset, wallet.MaxPageLimit)
	}
	var rows []db.ListEntriesRow
	var total int64
	err := libpostgres.InSnapshot(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		var err error
		rows, err = q.ListEntries(ctx, db.ListEntriesParams{AccountID: accountID, Environment: string(env), RowLimit: limit, RowOffset: offset})
		if err != nil {
			return fmt.Errorf("select: %w", err)
		}
		if total, err = q.CountEntries(ctx, db.CountEntriesParams{AccountID: accountID, Environment: string(env)}); err != nil {
			return fmt.Errorf("count: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list entries: %w", err)
	}
	entries := make([]wallet.Entry, len(rows))
	for i, r := range rows {
		entries[i] = entry(db.EntryByReferenceRow(r))
	}
	return entries, total, nil
}

func entry(r db.EntryByReferenceRow) wallet.Entry {
	return wallet.Entry{
		ID:                r.ID,
		AccountID:         r.AccountID,
		Environment:       wallet.Environment(r.Environment),
		Kind:              wallet.Kind(r.Kind),
		AmountMinor:       r.AmountMinor,
		Currency:          wallet.Currency(r.Currency),
		Reference:         r.Reference,
		BalanceAfterMinor: r.BalanceAfterMinor,
		Actor:             r.Actor,
		Note:              r.Note,
		// Postgres hands timestamps back in the session's zone; the domain
		// speaks UTC.
		CreatedAt: r.CreatedAt.UTC(),
	}
}
