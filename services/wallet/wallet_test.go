package wallet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// memStore is an in-memory Store for the domain's own rules; the real
// Store, its transactions and its concurrency are tested against Postgres
// in package postgres.
type memStore struct {
	mu       sync.Mutex
	balances map[balanceKey]Balance
	entries  []Entry
	// pages records the (limit, offset) of every ListEntries call.
	pages [][2]int64
	fail  error
}

type balanceKey struct {
	account uuid.UUID
	env     Environment
}

func newMemStore() *memStore {
	return &memStore{balances: map[balanceKey]Balance{}}
}

func (m *memStore) find(e Entry) (Entry, bool) {
	for _, x := range m.entries {
		if x.AccountID == e.AccountID && x.Environment == e.Environment && x.Kind == e.Kind && x.Reference == e.Reference {
			return x, true
		}
	}
	return Entry{}, false
}

// move applies delta to e's balance and records e, the way the real store
// does: a prior entry with the reference wins, then the currency and the
// guard are checked.
func (m *memStore) move(e Entry, sign int64, create bool) (Entry, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return Entry{}, false, m.fail
	}
	if prior, ok := m.find(e); ok {
		return prior, false, nil
	}
	k := balanceKey{e.AccountID, e.Environment}
	b, ok := m.balances[k]
	switch {
	case !ok && !create:
		return Entry{}, false, ErrInsufficientFunds
	case !ok:
		b = Balance{AccountID: e.AccountID, Environment: e.Environment, Currency: e.Currency}
	case b.Currency != e.Currency:
		return Entry{}, false, CurrencyMismatch(b.Currency)
	}
	if b.AmountMinor+sign*e.AmountMinor < 0 {
		return Entry{}, false, ErrInsufficientFunds
	}
	b.AmountMinor += sign * e.AmountMinor
	b.UpdatedAt = time.Now().UTC()
	m.balances[k] = b
	e.BalanceAfterMinor, e.CreatedAt = b.AmountMinor, b.UpdatedAt
	m.entries = append(m.entries, e)
	return e, true, nil
}

func (m *memStore) TopUp(_ context.Context, e Entry) (Entry, bool, error) { return m.move(e, 1, true) }
func (m *memStore) Debit(_ context.Context, e Entry) (Entry, bool, error) {
	return m.move(e, -1, false)
}

func (m *memStore) Refund(_ context.Context, e Entry) (Entry, bool, error) {
	m.mu.Lock()
	if prior, ok := m.find(e); ok {
		m.mu.Unlock()
		return prior, false, nil
	}
	debit := e
	debit.Kind = Debit
	d, ok := m.find(debit)
	m.mu.Unlock()
	if !ok {
		return Entry{}, false, ErrNotFound
	}
	e.AmountMinor, e.Currency = d.AmountMinor, d.Currency
	return m.move(e, 1, false)
}

func (m *memStore) Balance(_ context.Context, accountID uuid.UUID, env Environment) (Balance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return Balance{}, m.fail
	}
	b, ok := m.balances[balanceKey{accountID, env}]
	if !ok {
		return Balance{}, ErrNotFound
	}
	return b, nil
}

func (m *memStore) ListEntries(_ context.Context, accountID uuid.UUID, env Environment, limit int32, offset int64) ([]Entry, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pages = append(m.pages, [2]int64{int64(limit), offset})
	var list []Entry
	for _, e := range slices.Backward(m.entries) {
		if e.AccountID == accountID && e.Environment == env {
			list = append(list, e)
		}
	}
	total := int64(len(list))
	list = list[min(offset, total):min(offset+int64(limit), total)]
	return list, total, nil
}

func (m *memStore) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

func newService(t *testing.T) (*Service, *memStore) {
	t.Helper()
	m := newMemStore()
	return NewService(m), m
}

const actor = "operator"

func topUp(account uuid.UUID, env Environment, c Currency, amount int64, ref string) NewTopUp {
	return NewTopUp{AccountID: account, Environment: env, Currency: c, AmountMinor: amount, Reference: ref, Actor: actor}
}

func debit(account uuid.UUID, env Environment, c Currency, amount int64, ref string) NewDebit {
	return NewDebit{AccountID: account, Environment: env, Currency: c, AmountMinor: amount, Reference: ref, Actor: "ordering"}
}

func balanceOf(t *testing.T, svc *Service, account uuid.UUID, env Environment, c Currency) int64 {
	t.Helper()
	b, err := svc.GetBalance(context.Background(), account, env, c)
	if err != nil {
		t.Fatalf("GetBalance: %v", err)
	}
	return b.AmountMinor
}

func wantField(t *testing.T, what string, err error, field string) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != field {
		t.Errorf("%s: err = %v, want a validation error on %s", what, err, field)
	}
}

func TestTopUpDebitRefund(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	a := uuid.New()

	top, err := svc.TopUp(ctx, NewTopUp{AccountID: a, Environment: Live, Currency: EUR, AmountMinor: 10_000, Reference: "wire 2026-03-01", Note: "  March prepayment  ", Actor: "operator"})
	if err != nil {
		t.Fatalf("TopUp: %v", err)
	}
	if top.ID.Version() != 7 || top.Kind != TopUp || top.AmountMinor != 10_000 || top.Currency != EUR || top.BalanceAfterMinor != 10_000 ||
		top.Actor != "operator" || top.Note != "March prepayment" || top.Reference != "wire 2026-03-01" {
		t.Errorf("top-up = %+v", top)
	}
	d, err := svc.Debit(ctx, debit(a, Live, EUR, 2_550, "order-1"))
	if err != nil {
		t.Fatalf("Debit: %v", err)
	}
	if d.Kind != Debit || d.AmountMinor != 2_550 || d.BalanceAfterMinor != 7_450 || d.Actor != "ordering" || d.Note != "" {
		t.Errorf("debit = %+v", d)
	}
	r, err := svc.Refund(ctx, NewRefund{AccountID: a, Environment: Live, DebitReference: "order-1", Actor: "ordering"})
	if err != nil {
		t.Fatalf("Refund: %v", err)
	}
	if r.Kind != Refund || r.AmountMinor != 2_550 || r.Currency != EUR || r.Reference != "order-1" || r.BalanceAfterMinor != 10_000 {
		t.Errorf("refund = %+v", r)
	}
	if got := balanceOf(t, svc, a, Live, EUR); got != 10_000 {
		t.Errorf("balance = %d, want 10000", got)
	}
}

// Invalid input names its field and stores nothing.
func TestValidation(t *testing.T) {
	ctx := context.Background()
	svc, m := newService(t)
	a := uuid.New()
	if _, err := svc.TopUp(ctx, topUp(a, Live, USD, 500, "seed")); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Debit(ctx, debit(a, Live, USD, 100, "order-1")); err != nil {
		t.Fatal(err)
	}
	stored := m.count()

	ok := topUp(a, Live, USD, 100, "ref")
	with := func(change func(*NewTopUp)) NewTopUp {
		in := ok
		change(&in)
		return in
	}
	for _, tc := range []struct {
		name  string
		in    NewTopUp
		field string
	}{
		{"nil account", with(func(in *NewTopUp) { in.AccountID = uuid.Nil }), "account_id"},
		{"no environment", with(func(in *NewTopUp) { in.Environment = "" }), "environment"},
		{"unknown environment", with(func(in *NewTopUp) { in.Environment = "staging" }), "environment"},
		{"capital environment", with(func(in *NewTopUp) { in.Environment = "LIVE" }), "environment"},
		{"no currency", with(func(in *NewTopUp) { in.Currency = "" }), "currency"},
		{"lower-case currency", with(func(in *NewTopUp) { in.Currency = "usd" }), "currency"},
		{"unsold currency", with(func(in *NewTopUp) { in.Currency = "JPY" }), "currency"},
		{"zero amount", with(func(in *NewTopUp) { in.AmountMinor = 0 }), "amount_minor"},
		{"negative amount", with(func(in *NewTopUp) { in.AmountMinor = -100 }), "amount_minor"},
		{"amount over the cap", with(func(in *NewTopUp) { in.AmountMinor = MaxAmountMinor + 1 }), "amount_minor"},
		{"no reference", with(func(in *NewTopUp) { in.Reference = "" }), "reference"},
		{"long reference", with(func(in *NewTopUp) { in.Reference = strings.Repeat("r", 256) }), "reference"},
		{"non-ASCII reference", with(func(in *NewTopUp) { in.Reference = "café" }), "reference"},
		{"reference with NUL", with(func(in *NewTopUp) { in.Reference = "a\x00" }), "reference"},
		{"reference with newline", with(func(in *NewTopUp) { in.Reference = "a\nb" }), "reference"},
		{"reference with DEL", with(func(in *NewTopUp) { in.Reference = "a\x7f" }), "reference"},
		{"long note", with(func(in *NewTopUp) { in.Note = strings.Repeat("é", 256) }), "note"},
		{"note with a control character", with(func(in *NewTopUp) { in.Note = "paid\x1b[31m" }), "note"},
		{"note with a bidi override", with(func(in *NewTopUp) { in.Note = "paid \u202eevil" }), "note"},
		{"note of punctuation only", with(func(in *NewTopUp) { in.Note = "..." }), "note"},
	} {
		_, err := svc.TopUp(ctx, tc.in)
		wantField(t, "TopUp with "+tc.name, err, tc.field)
	}

	for _, tc := range []struct {
		name  string
		in    NewDebit
		field string
	}{
		{"nil account", debit(uuid.Nil, Live, USD, 1, "x"), "account_id"},
		{"no environment", debit(a, "", USD, 1, "x"), "environment"},
		{"unsold currency", debit(a, Live, "CHF", 1, "x"), "currency"},
		{"zero amount", debit(a, Live, USD, 0, "x"), "amount_minor"},
		{"amount over the cap", debit(a, Live, USD, MaxAmountMinor+1, "x"), "amount_minor"},
		{"no reference", debit(a, Live, USD, 1, ""), "reference"},
		{"non-ASCII reference", debit(a, Live, USD, 1, "ordér"), "reference"},
		// The first field at fault, in the request's order.
		{"everything wrong", debit(uuid.Nil, "", "", 0, ""), "account_id"},
	} {
		_, err := svc.Debit(ctx, tc.in)
		wantField(t, "Debit with "+tc.name, err, tc.field)
	}

	for _, tc := range []struct {
		name  string
		in    NewRefund
		field string
	}{
		{"nil account", NewRefund{AccountID: uuid.Nil, Environment: Live, DebitReference: "order-1", Actor: "ordering"}, "account_id"},
		{"no environment", NewRefund{AccountID: a, DebitReference: "order-1", Actor: "ordering"}, "environment"},
		{"no reference", NewRefund{AccountID: a, Environment: Live, Actor: "ordering"}, "debit_reference"},
		{"long reference", NewRefund{AccountID: a, Environment: Live, DebitReference: strings.Repeat("o", 256), Actor: "ordering"}, "debit_reference"},
	} {
		_, err := svc.Refund(ctx, tc.in)
		wantField(t, "Refund with "+tc.name, err, tc.field)
	}

	_, err := svc.GetBalance(ctx, uuid.Nil, Live, USD)
	wantField(t, "GetBalance of the nil account", err, "account_id")
	_, err = svc.GetBalance(ctx, a, "test", USD)
	wantField(t, "GetBalance in no environment", err, "environment")
	_, err = svc.GetBalance(ctx, a, Live, "")
	wantField(t, "GetBalance in no currency", err, "currency")
	_, err = svc.ListLedger(ctx, uuid.Nil, Live, 0, 0)
	wantField(t, "ListLedger of the nil account", err, "account_id")
	_, err = svc.ListLedger(ctx, a, "", 0, 0)
	wantField(t, "ListLedger in no environment", err, "environment")

	if m.count() != stored {
		t.Errorf("%d entries stored by rejected calls", m.count()-stored)
	}
	if got := balanceOf(t, svc, a, Live, USD); got != 400 {
		t.Errorf("balance = %d after rejected calls, want 400", got)
	}

	// The bounds themselves pass.
	if _, err := svc.TopUp(ctx, topUp(a, Live, USD, MaxAmountMinor, strings.Repeat("~", MaxReferenceLength))); err != nil {
		t.Errorf("TopUp of the largest amount with the longest reference: %v", err)
	}
	if _, err := svc.TopUp(ctx, with(func(in *NewTopUp) {
		in.Reference = " !\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~"
		in.Note = strings.Repeat("é", 255)
	})); err != nil {
		t.Errorf("TopUp with every kind of printable ASCII in its reference: %v", err)
	}
}

// A movement repeated with its reference returns the first entry and moves
// nothing; the same reference for another amount or currency is a
// conflict, which moves nothing either.
func TestMovementsAreIdempotentByReference(t *testing.T) {
	ctx := context.Background()
	svc, m := newService(t)
	a := uuid.New()

	first, err := svc.TopUp(ctx, topUp(a, Sandbox, GBP, 1_000, "t1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.TopUp(ctx, NewTopUp{AccountID: a, Environment: Sandbox, Currency: GBP, AmountMinor: 1_000, Reference: "t1", Note: "another note", Actor: "someone else"})
	if err != nil || again != first {
		t.Errorf("repeated TopUp = %+v, %v; want the first entry %+v", again, err, first)
	}
	for name, in := range map[string]NewTopUp{
		"another amount":   topUp(a, Sandbox, GBP, 1_001, "t1"),
		"another currency": topUp(a, Sandbox, EUR, 1_000, "t1"),
	} {
		if _, err := svc.TopUp(ctx, in); !errors.Is(err, ErrConflict) {
			t.Errorf("TopUp with a used reference and %s: err = %v, want ErrConflict", name, err)
		}
	}

	d, err := svc.Debit(ctx, debit(a, Sandbox, GBP, 1_000, "o1"))
	if err != nil {
		t.Fatal(err)
	}
	// The balance is now 0: the repeated debit still answers with the
	// first, not with insufficient funds.
	if again, err := svc.Debit(ctx, debit(a, Sandbox, GBP, 1_000, "o1")); err != nil || again != d {
		t.Errorf("repeated Debit on an emptied balance = %+v, %v; want the first entry", again, err)
	}
	for name, in := range map[string]NewDebit{
		"another amount":   debit(a, Sandbox, GBP, 999, "o1"),
		"another currency": debit(a, Sandbox, USD, 1_000, "o1"),
	} {
		if _, err := svc.Debit(ctx, in); !errors.Is(err, ErrConflict) {
			t.Errorf("Debit with a used reference and %s: err = %v, want ErrConflict", name, err)
		}
	}
	if got := balanceOf(t, svc, a, Sandbox, GBP); got != 0 || m.count() != 2 {
		t.Errorf("balance %d and %d entries after repeats and conflicts, want 0 and 2", got, m.count())
	}

	// A reference is the key of one kind in one account and environment:
	// the same text elsewhere is another movement.
	if _, err := svc.TopUp(ctx, topUp(a, Sandbox, GBP, 5, "o1")); err != nil {
		t.Errorf("TopUp with a debit's reference: %v", err)
	}
	if _, err := svc.TopUp(ctx, topUp(a, Live, USD, 1_000, "t1")); err != nil {
		t.Errorf("TopUp with the reference of another environment's: %v", err)
	}
	if _, err := svc.TopUp(ctx, topUp(uuid.New(), Sandbox, GBP, 1_000, "t1")); err != nil {
		t.Errorf("TopUp with the reference of another account's: %v", err)
	}
	// References are compared exactly.
	if e, err := svc.TopUp(ctx, topUp(a, Sandbox, GBP, 7, "T1")); err != nil || e.ID == first.ID {
		t.Errorf("TopUp with the reference in capitals = %+v, %v; want a new entry", e, err)
	}
}

// A debit the balance does not cover stores nothing, so its reference can
// debit once the balance is topped up.
func TestInsufficientFundsStoresNothing(t *testing.T) {
	ctx := context.Background()
	svc, m := newService(t)
	a := uuid.New()

	if _, err := svc.Debit(ctx, debit(a, Live, USD, 1, "o1")); !errors.Is(err, ErrInsufficientFunds) {
		t.Fatalf("Debit of a balance never topped up: err = %v, want ErrInsufficientFunds", err)
	}
	if _, err := svc.TopUp(ctx, topUp(a, Live, USD, 999, "t1")); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Debit(ctx, debit(a, Live, USD, 1_000, "o1")); !errors.Is(err, ErrInsufficientFunds) {
		t.Fatalf("Debit of 1000 from 999: err = %v, want ErrInsufficientFunds", err)
	}
	if m.count() != 1 || balanceOf(t, svc, a, Live, USD) != 999 {
		t.Fatalf("refused debits stored something: %d entries", m.count())
	}
	if _, err := svc.TopUp(ctx, topUp(a, Live, USD, 1, "t2")); err != nil {
		t.Fatal(err)
	}
	if d, err := svc.Debit(ctx, debit(a, Live, USD, 1_000, "o1")); err != nil || d.BalanceAfterMinor != 0 {
		t.Errorf("Debit with the refused reference after a top-up = %+v, %v; want it to empty the balance", d, err)
	}
}

// The first top-up fixes a balance's currency; sandbox and live are two
// balances, each with its own.
func TestCurrencyIsFixedByTheFirstTopUp(t *testing.T) {
	ctx := context.Background()
	svc, m := newService(t)
	a := uuid.New()
	if _, err := svc.TopUp(ctx, topUp(a, Live, EUR, 1_000, "t1")); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.TopUp(ctx, topUp(a, Sandbox, USD, 50, "t1")); err != nil {
		t.Fatalf("a sandbox balance in another currency: %v", err)
	}

	_, err := svc.TopUp(ctx, topUp(a, Live, USD, 1_000, "t2"))
	wantField(t, "TopUp in another currency", err, "currency")
	_, err = svc.Debit(ctx, debit(a, Live, GBP, 1, "o1"))
	wantField(t, "Debit in another currency", err, "currency")
	_, err = svc.GetBalance(ctx, a, Live, USD)
	wantField(t, "GetBalance in another currency", err, "currency")
	if err != nil && !strings.Contains(err.Error(), "EUR") {
		t.Errorf("the error does not say which currency the balance is in: %v", err)
	}

	if got := balanceOf(t, svc, a, Live, EUR); got != 1_000 {
		t.Errorf("live balance = %d, want 1000", got)
	}
	if got := balanceOf(t, svc, a, Sandbox, USD); got != 50 {
		t.Errorf("sandbox balance = %d, want 50", got)
	}
	if m.count() != 2 {
		t.Errorf("%d entries, want the two top-ups", m.count())
	}
}

func TestRefundOnceAndOnlyOfADebit(t *testing.T) {
	ctx := context.Background()
	svc, m := newService(t)
	a := uuid.New()
	if _, err := svc.TopUp(ctx, topUp(a, Live, USD, 1_000, "order-1")); err != nil {
		t.Fatal(err)
	}
	// A top-up's reference is not a debit's.
	refund := NewRefund{AccountID: a, Environment: Live, DebitReference: "order-1", Actor: "ordering"}
	if _, err := svc.Refund(ctx, refund); !errors.Is(err, ErrNotFound) {
		t.Errorf("Refund of a top-up's reference: err = %v, want ErrNotFound", err)
	}
	if _, err := svc.Debit(ctx, debit(a, Live, USD, 300, "order-1")); err != nil {
		t.Fatal(err)
	}

	first, err := svc.Refund(ctx, refund)
	if err != nil || first.AmountMinor != 300 || first.BalanceAfterMinor != 1_000 {
		t.Fatalf("Refund = %+v, %v; want 300 back", first, err)
	}
	if again, err := svc.Refund(ctx, refund); err != nil || again != first {
		t.Errorf("second Refund = %+v, %v; want the first refund", again, err)
	}
	for name, in := range map[string]NewRefund{
		"unknown reference":     {AccountID: a, Environment: Live, DebitReference: "order-2", Actor: "ordering"},
		"other environment":     {AccountID: a, Environment: Sandbox, DebitReference: "order-1", Actor: "ordering"},
		"other account":         {AccountID: uuid.New(), Environment: Live, DebitReference: "order-1", Actor: "ordering"},
		"reference in capitals": {AccountID: a, Environment: Live, DebitReference: "ORDER-1", Actor: "ordering"},
	} {
		if _, err := svc.Refund(ctx, in); !errors.Is(err, ErrNotFound) {
			t.Errorf("Refund of %s: err = %v, want ErrNotFound", name, err)
		}
	}
	if got := balanceOf(t, svc, a, Live, USD); got != 1_000 || m.count() != 3 {
		t.Errorf("balance %d with %d entries, want 1000 with 3", got, m.count())
	}
}

// A balance never topped up is 0 in the currency asked, and asking
// creates nothing.
func TestGetBalanceOfABalanceNeverToppedUp(t *testing.T) {
	ctx := context.Background()
	svc, m := newService(t)
	a := uuid.New()
	for _, c := range Currencies {
		b, err := svc.GetBalance(ctx, a, Sandbox, c)
		if err != nil || b != (Balance{AccountID: a, Environment: Sandbox, Currency: c}) {
			t.Errorf("GetBalance in %s = %+v, %v; want 0 and no time", c, b, err)
		}
	}
	if len(m.balances) != 0 || m.count() != 0 {
		t.Errorf("GetBalance stored something: %v", m.balances)
	}
}

func TestListLedgerPaging(t *testing.T) {
	ctx := context.Background()
	svc, m := newService(t)
	a := uuid.New()
	for i := range 3 {
		if _, err := svc.TopUp(ctx, topUp(a, Live, USD, 100, fmt.Sprint("t", i))); err != nil {
			t.Fatal(err)
		}
	}
	page, err := svc.ListLedger(ctx, a, Live, 0, 0)
	if err != nil || page.Total != 3 || len(page.Entries) != 3 || page.Entries[0].Reference != "t2" {
		t.Errorf("ListLedger = %+v, %v; want 3 entries newest first", page, err)
	}
	if _, err := svc.ListLedger(ctx, a, Live, 3, 7); err != nil {
		t.Fatal(err)
	}
	if want := [][2]int64{{DefaultPageLimit, 0}, {7, 14}}; !slices.Equal(m.pages, want) {
		t.Errorf("store asked for pages %v, want %v", m.pages, want)
	}
	for _, tc := range []struct {
		page, limit int32
		field       string
	}{{-1, 0, "page"}, {MaxPage + 1, 0, "page"}, {1, -1, "limit"}, {1, MaxPageLimit + 1, "limit"}} {
		_, err := svc.ListLedger(ctx, a, Live, tc.page, tc.limit)
		wantField(t, fmt.Sprintf("ListLedger page %d limit %d", tc.page, tc.limit), err, tc.field)
	}
	if len(m.pages) != 2 {
		t.Errorf("refused pages reached the store: %v", m.pages)
	}
}

// The actor comes from authentication: a movement without one is a bug in
// the caller's wiring, not the request's fault, and moves nothing.
func TestMovementsNeedAnActor(t *testing.T) {
	ctx := context.Background()
	svc, m := newService(t)
	a := uuid.New()
	in := topUp(a, Live, USD, 100, "t1")
	in.Actor = ""
	_, err := svc.TopUp(ctx, in)
	var ve *ValidationError
	if err == nil || errors.As(err, &ve) {
		t.Errorf("TopUp without an actor: err = %v, want an internal failure", err)
	}
	d := debit(a, Live, USD, 1, "o1")
	d.Actor = ""
	if _, err := svc.Debit(ctx, d); err == nil || errors.Is(err, ErrInsufficientFunds) {
		t.Errorf("Debit without an actor: err = %v, want an internal failure", err)
	}
	if _, err := svc.Refund(ctx, NewRefund{AccountID: a, Environment: Live, DebitReference: "o1"}); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Refund without an actor: err = %v, want an internal failure", err)
	}
	if m.count() != 0 {
		t.Errorf("%d entries stored without an actor", m.count())
	}
}

// A storage failure is no domain error, and keeps its cause for the logs.
func TestStorageFailuresAreWrapped(t *testing.T) {
	ctx := context.Background()
	svc, m := newService(t)
	cause := errors.New("connection refused")
	m.fail = cause
	a := uuid.New()
	_, topUpErr := svc.TopUp(ctx, topUp(a, Live, USD, 1, "t1"))
	_, balanceErr := svc.GetBalance(ctx, a, Live, USD)
	for name, err := range map[string]error{"TopUp": topUpErr, "GetBalance": balanceErr} {
		if !errors.Is(err, cause) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) || errors.Is(err, ErrInsufficientFunds) {
			t.Errorf("%s during an outage: err = %v, want the cause wrapped", name, err)
		}
	}
}

// ObserveMovements hears of each movement once, as the balance moves: a
// repeated reference moves nothing and is not heard of.
func TestObserveMovementsHearsWhatMoved(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	var heard []string
	svc.ObserveMovements(func(_ context.Context, e Entry) {
		heard = append(heard, fmt.Sprintf("%s %d %s %s", e.Kind, e.AmountMinor, e.Currency, e.Environment))
	})
	account := uuid.New()
	for range 2 {
		if _, err := svc.TopUp(ctx, topUp(account, Sandbox, USD, 1000, "t1")); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Debit(ctx, debit(account, Sandbox, USD, 300, "d1")); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Refund(ctx, NewRefund{AccountID: account, Environment: Sandbox, DebitReference: "d1", Actor: "ordering"}); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"top_up 1000 USD sandbox", "debit 300 USD sandbox", "refund 300 USD sandbox"}; !slices.Equal(heard, want) {
		t.Errorf("heard %q, want %q", heard, want)
	}
}
