// Package wallet owns the prepaid balances, one per account and
// environment, and the append-only ledger of every movement of money
// between them and the outside world: top-ups (an operator credits a
// balance), debits (ordering charges an order) and refunds (ordering gives
// a debit back).
//
// Money is exact and never created or lost: amounts are int64 minor units,
// a balance never goes below zero, and every change of a balance is one
// ledger entry, written in the same transaction, so that for every account
// and environment top-ups - debits + refunds = balance. Every movement is
// idempotent by its reference: a repeated call returns the first call's
// entry and moves nothing, so callers retry freely.
package wallet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/esimplatform/esim/proto/limits"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/input"
)

// Currency is the ISO 4217 code a balance is held in.
type Currency string

// The currencies the platform sells in, as accounts and the catalogue
// know them.
const (
	USD Currency = "USD"
	EUR Currency = "EUR"
	GBP Currency = "GBP"
)

// Currencies lists them.
var Currencies = []Currency{USD, EUR, GBP}

// Valid reports whether c is a currency the platform sells in.
func (c Currency) Valid() bool { return slices.Contains(Currencies, c) }

// Environment separates test money from real money: sandbox and live
// balances of one account are two balances, which never mix.
type Environment string

// The two environments.
const (
	Sandbox Environment = "sandbox"
	Live    Environment = "live"
)

// Valid reports whether e is sandbox or live.
func (e Environment) Valid() bool { return e == Sandbox || e == Live }

// Kind is which way a ledger entry moved money.
type Kind string

// The kinds of entries. Amounts are always positive; the kind gives the
// sign: a top-up and a refund add, a debit takes.
const (
	TopUp  Kind = "top_up"
	Debit  Kind = "debit"
	Refund Kind = "refund"
)

// Limits on what callers may ask.
const (
	// The bounds of a movement (proto/limits).
	MaxAmountMinor     = limits.MaxAmountMinor
	MaxReferenceLength = limits.MaxReferenceLength
	MaxNoteLength      = limits.MaxNoteLength

	// Paging, as every list of the platform pages (proto/limits).
	DefaultPageLimit = limits.DefaultPageLimit
	MaxPageLimit     = limits.MaxPageLimit
	MaxPage          = limits.MaxPage
)

// Entry is one movement in the ledger. Entries are never changed or
// removed once written.
type Entry struct {
	ID          uuid.UUID
	AccountID   uuid.UUID
	Environment Environment
	Kind        Kind
	// AmountMinor is positive; Kind says which way it moved.
	AmountMinor int64
	Currency    Currency
	// Reference is unique per account, environment and kind: the
	// idempotency key of the movement. A refund's is its debit's.
	Reference string
	// BalanceAfterMinor is the balance right after this entry.
	BalanceAfterMinor int64
	// Actor is who made the movement: the authenticated caller
	// ("operator", "ordering").
	Actor string
	// Note is an operator's free text on a top-up; empty otherwise.
	Note string
	// CreatedAt is when the balance moved.
	CreatedAt time.Time
}

// Balance is what an account holds in one environment.
type Balance struct {
	AccountID   uuid.UUID
	Environment Environment
	// Currency is fixed by the balance's first top-up.
	Currency    Currency
	AmountMinor int64
	// UpdatedAt is the time of the last movement; zero for a balance
	// never topped up.
	UpdatedAt time.Time
}

// Store persists balances and the ledger. Each movement is atomic: its
// entry is written and its balance changed together, or neither is.
//
// TopUp, Debit and Refund record e unless an entry of e's kind with e's
// reference already exists in e's account and environment: then they
// return that entry with recorded false and move nothing, whatever e says
// (the Service compares). Otherwise they return the entry as stored, with
// recorded true: the store sets CreatedAt, the moment the balance moved,
// and BalanceAfterMinor. A balance held in another currency than e's is
// the error CurrencyMismatch returns. Implementations wrap every other
// failure.
type Store interface {
	// TopUp adds e's amount to the balance, creating it in e's currency.
	TopUp(ctx context.Context, e Entry) (entry Entry, recorded bool, err error)
	// Debit takes e's amount from the balance, or returns
	// ErrInsufficientFunds, having stored nothing, when the balance (none
	// at all counts as 0) does not cover it.
	Debit(ctx context.Context, e Entry) (entry Entry, recorded bool, err error)
	// Refund gives back the debit whose reference is e's: it sets e's
	// amount and currency to the debit's. ErrNotFound when there is no
	// such debit in e's account and environment.
	Refund(ctx context.Context, e Entry) (entry Entry, recorded bool, err error)
	// Balance returns ErrNotFound for a balance never topped up.
	Balance(ctx context.Context, accountID uuid.UUID, env Environment) (Balance, error)
	// ListEntries returns one page of a balance's entries, newest first
	// (ties by id), and their total count.
	ListEntries(ctx context.Context, accountID uuid.UUID, env Environment, limit int32, offset int64) ([]Entry, int64, error)
}

// Service holds the wallet use cases.
type Service struct {
	store Store
	moved func(context.Context, Entry)
}

// NewService returns the use cases over store.
func NewService(store Store) *Service {
	return &Service{store: store}
}

// ObserveMovements has f hear of every entry written, as the balance
// moves (a repeated reference moves nothing and is not heard of): the
// server counts the money moved for /metrics. Call it before serving.
func (s *Service) ObserveMovements(f func(context.Context, Entry)) { s.moved = f }

// recorded hands a newly written entry to the observer.
func (s *Service) recorded(ctx context.Context, e Entry, recorded bool) {
	if recorded && s.moved != nil {
		s.moved(ctx, e)
	}
}

// NewTopUp is the input of TopUp.
type NewTopUp struct {
	AccountID   uuid.UUID
	Environment Environment
	Currency    Currency
	AmountMinor int64
	Reference   string
	// Note is optional; spaces around it are dropped.
	Note string
	// Actor is the authenticated caller, never caller input.
	Actor string
}

// NewDebit is the input of Debit.
type NewDebit struct {
	AccountID   uuid.UUID
	Environment Environment
	Currency    Currency
	AmountMinor int64
	Reference   string
	Actor       string
}

// NewRefund is the input of Refund.
type NewRefund struct {
	AccountID      uuid.UUID
	Environment    Environment
	DebitReference string
	Actor          string
}

// TopUp credits a balance; the balance's first top-up fixes its currency.
// A repeated reference returns the first top-up and moves nothing; with
// another amount or currency it is ErrConflict.
func (s *Service) TopUp(ctx context.Context, in NewTopUp) (Entry, error) {
	note := strings.TrimSpace(in.Note)
	if err := first(
		validBalance(in.AccountID, in.Environment),
		validMoney(in.Currency, in.AmountMinor),
		validReference("reference", in.Reference),
		validNote(note),
	); err != nil {
		return Entry{}, err
	}
	e, err := newEntry(TopUp, in.AccountID, in.Environment, in.Reference, in.Actor)
	if err != nil {
		return Entry{}, err
	}
	e.Currency, e.AmountMinor, e.Note = in.Currency, in.AmountMinor, note
	got, recorded, err := s.store.TopUp(ctx, e)
	if err != nil {
		return Entry{}, fmt.Errorf("top up %s %s with reference %q: %w", in.AccountID, in.Environment, in.Reference, err)
	}
	s.recorded(ctx, got, recorded)
	return same(got, recorded, e)
}

// Debit takes money from a balance that covers it. A balance that does
// not (one never topped up holds 0) is ErrInsufficientFunds, and nothing
// is stored: the reference stays free for a later attempt. A repeated
// reference returns the first debit and moves nothing, even when the
// balance would no longer cover it; with another amount or currency it is
// ErrConflict.
func (s *Service) Debit(ctx context.Context, in NewDebit) (Entry, error) {
	if err := first(
		validBalance(in.AccountID, in.Environment),
		validMoney(in.Currency, in.AmountMinor),
		validReference("reference", in.Reference),
	); err != nil {
		return Entry{}, err
	}
	e, err := newEntry(Debit, in.AccountID, in.Environment, in.Reference, in.Actor)
	if err != nil {
		return Entry{}, err
	}
	e.Currency, e.AmountMinor = in.Currency, in.AmountMinor
	got, recorded, err := s.store.Debit(ctx, e)
	if err != nil {
		return Entry{}, fmt.Errorf("debit %s %s with reference %q: %w", in.AccountID, in.Environment, in.Reference, err)
	}
	s.recorded(ctx, got, recorded)
	return same(got, recorded, e)
}

// Refund gives back the whole debit with the given reference, at most
// once: a second call returns the first refund. A debit that does not
// exist in the account and environment is ErrNotFound.
func (s *Service) Refund(ctx context.Context, in NewRefund) (Entry, error) {
	if err := first(
		validBalance(in.AccountID, in.Environment),
		validReference("debit_reference", in.DebitReference),
	); err != nil {
		return Entry{}, err
	}
	e, err := newEntry(Refund, in.AccountID, in.Environment, in.DebitReference, in.Actor)
	if err != nil {
		return Entry{}, err
	}
	// The amount and currency are the debit's, which the store reads in
	// the transaction that writes the refund; nothing to compare.
	got, recorded, err := s.store.Refund(ctx, e)
	if err != nil {
		return Entry{}, fmt.Errorf("refund debit %q of %s %s: %w", in.DebitReference, in.AccountID, in.Environment, err)
	}
	s.recorded(ctx, got, recorded)
	return got, nil
}

// GetBalance returns the balance. One never topped up is 0 in the
// requested currency (and nothing is stored); a balance held in another
// currency is a validation error on currency, as a movement in it would
// be.
func (s *Service) GetBalance(ctx context.Context, accountID uuid.UUID, env Environment, currency Currency) (Balance, error) {
	if err := first(validBalance(accountID, env), validCurrency(currency)); err != nil {
		return Balance{}, err
	}
	b, err := s.store.Balance(ctx, accountID, env)
	if errors.Is(err, ErrNotFound) {
		return Balance{AccountID: accountID, Environment: env, Currency: currency}, nil
	}
	if err != nil {
		return Balance{}, fmt.Errorf("get balance %s %s: %w", accountID, env, err)
	}
	if b.Currency != currency {
		return Balance{}, CurrencyMismatch(b.Currency)
	}
	return b, nil
}

// LedgerPage is one page of a balance's entries and the total across all
// pages.
type LedgerPage struct {
	Entries []Entry
	Total   int64
}

// ListLedger returns a balance's entries newest first (ties by id, so
// pages neither repeat nor skip an entry). page is 1..MaxPage; 0 means 1.
// limit is 1..MaxPageLimit; 0 means DefaultPageLimit. A balance never
// topped up has no entries.
func (s *Service) ListLedger(ctx context.Context, accountID uuid.UUID, env Environment, page, limit int32) (LedgerPage, error) {
	if err := validBalance(accountID, env); err != nil {
		return LedgerPage{}, err
	}
	limit, offset, err := paging(page, limit)
	if err != nil {
		return LedgerPage{}, err
	}
	entries, total, err := s.store.ListEntries(ctx, accountID, env, limit, offset)
	if err != nil {
		return LedgerPage{}, fmt.Errorf("list ledger of %s %s: %w", accountID, env, err)
	}
	return LedgerPage{Entries: entries, Total: total}, nil
}

// newEntry starts the entry of a movement: its kind, balance, reference
// and actor, and a fresh id.
func newEntry(kind Kind, accountID uuid.UUID, env Environment, reference, actor string) (Entry, error) {
	// The actor comes from authentication, never from the request: a
	// movement without one is a wiring bug, answered as internal.
	if actor == "" {
		return Entry{}, fmt.Errorf("%s without an actor: the caller was not authenticated", kind)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Entry{}, fmt.Errorf("new entry id: %w", err)
	}
	return Entry{ID: id, AccountID: accountID, Environment: env, Kind: kind, Reference: reference, Actor: actor}, nil
}

// same answers a movement the store found recorded already: the first
// entry when the call repeats it, ErrConflict when the reference was used
// for another amount or currency.
func same(got Entry, recorded bool, want Entry) (Entry, error) {
	if recorded || (got.AmountMinor == want.AmountMinor && got.Currency == want.Currency) {
		return got, nil
	}
	return Entry{}, fmt.Errorf("%s with reference %q was %d %s, not %d %s: %w",
		want.Kind, want.Reference, got.AmountMinor, got.Currency, want.AmountMinor, want.Currency, ErrConflict)
}

// validBalance checks what names a balance. The account id is not looked
// up: accounts own them, and a balance of any account starts at 0. The
// nil UUID names no account, though.
func validBalance(accountID uuid.UUID, env Environment) error {
	if accountID == uuid.Nil {
		return invalid("account_id", "must be an account's id, not the nil UUID")
	}
	if !env.Valid() {
		return invalid("environment", "must be sandbox or live")
	}
	return nil
}

func validCurrency(c Currency) error {
	if !c.Valid() {
		return invalid("currency", "must be one of USD, EUR, GBP")
	}
	return nil
}

func validMoney(c Currency, amountMinor int64) error {
	if err := validCurrency(c); err != nil {
		return err
	}
	if amountMinor < 1 || amountMinor > MaxAmountMinor {
		return invalid("amount_minor", fmt.Sprintf("must be between 1 and %d minor units", int64(MaxAmountMinor)))
	}
	return nil
}

// validReference checks an idempotency key: 1 to MaxReferenceLength
// printable ASCII characters, space included, as the public API's
// Idempotency-Key. It is compared byte for byte and never trimmed, since
// two keys that differ only in spaces are two keys.
func validReference(field, ref string) error {
	if ref == "" || len(ref) > MaxReferenceLength {
		return invalid(field, fmt.Sprintf("must be 1 to %d printable ASCII characters", MaxReferenceLength))
	}
	for i := range len(ref) {
		if ref[i] < ' ' || ref[i] > '~' {
			return invalid(field, fmt.Sprintf("must be printable ASCII (found byte 0x%02X at %d)", ref[i], i))
		}
	}
	return nil
}

// validNote checks a note as it is stored (trimmed): display text, shown
// in the portal and esimctl.
func validNote(note string) error {
	if reason := input.TextReason(note, MaxNoteLength); reason != "" {
		return invalid("note", reason)
	}
	return nil
}

// first returns the first failed check: callers learn of one field at a
// time, in the order of the request's fields, as in accounts.
func first(checks ...error) error {
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	return nil
}

// paging checks a requested page and page size (0 means page 1 and
// DefaultPageLimit) and returns the limit and offset to read.
func paging(page, limit int32) (int32, int64, error) {
	rules := input.Pages{DefaultLimit: DefaultPageLimit, MaxLimit: MaxPageLimit, MaxPage: MaxPage}
	p, field, reason := rules.Check(int(page), int(limit))
	if reason != "" {
		return 0, 0, invalid(field, reason)
	}
	// Both fit: the rules bound them far below MaxInt32.
	return int32(p.Limit), int64(p.Offset()), nil
}
