package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/services/wallet"
	"github.com/esimplatform/esim/services/wallet/postgres"
)

func newService(t *testing.T) (*wallet.Service, *postgres.Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.New(t, postgres.Migrations)
	store := postgres.NewStore(pool)
	return wallet.NewService(store), store, pool
}

func topUp(t *testing.T, svc *wallet.Service, account uuid.UUID, env wallet.Environment, c wallet.Currency, amount int64, ref string) wallet.Entry {
	t.Helper()
	e, err := svc.TopUp(context.Background(), wallet.NewTopUp{AccountID: account, Environment: env, Currency: c, AmountMinor: amount, Reference: ref, Actor: "operator"})
	if err != nil {
		t.Fatalf("TopUp %s: %v", ref, err)
	}
	return e
}

func debit(account uuid.UUID, env wallet.Environment, c wallet.Currency, amount int64, ref string) wallet.NewDebit {
	return wallet.NewDebit{AccountID: account, Environment: env, Currency: c, AmountMinor: amount, Reference: ref, Actor: "ordering"}
}

func refund(account uuid.UUID, env wallet.Environment, ref string) wallet.NewRefund {
	return wallet.NewRefund{AccountID: account, Environment: env, DebitReference: ref, Actor: "ordering"}
}

func balance(t *testing.T, s *postgres.Store, account uuid.UUID, env wallet.Environment) int64 {
	t.Helper()
	b, err := s.Balance(context.Background(), account, env)
	if err != nil {
		t.Fatalf("Balance: %v", err)
	}
	return b.AmountMinor
}

func count(t *testing.T, pool *pgxpool.Pool, where string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM ledger_entries WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatalf("count entries: %v", err)
	}
	return n
}

// tables reads every row of both tables, so that a call which changed
// anything at all shows up.
func tables(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var dump string
	err := pool.QueryRow(context.Background(), `SELECT
		coalesce((SELECT json_agg(b ORDER BY b.account_id, b.environment) FROM balances b)::text, '') || ' ' ||
		coalesce((SELECT json_agg(e ORDER BY e.id) FROM ledger_entries e)::text, '')`).Scan(&dump)
	if err != nil {
		t.Fatalf("read the tables: %v", err)
	}
	return dump
}

// conserved checks, in SQL over everything stored, that money was neither
// created nor lost: for every account and environment, top-ups - debits +
// refunds = balance; and that the ledger, read in its own order, is the
// history of the balance: each entry's balance_after is the running sum.
func conserved(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `
		SELECT b.account_id::text, b.environment, b.amount_minor,
		       coalesce(sum(CASE e.kind WHEN 'debit' THEN -e.amount_minor ELSE e.amount_minor END), 0)::bigint
		FROM balances b
		LEFT JOIN ledger_entries e ON e.account_id = b.account_id AND e.environment = b.environment
		GROUP BY b.account_id, b.environment, b.amount_minor
		HAVING b.amount_minor <> coalesce(sum(CASE e.kind WHEN 'debit' THEN -e.amount_minor ELSE e.amount_minor END), 0)`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var account, env string
		var held, ledger int64
		if err := rows.Scan(&account, &env, &held, &ledger); err != nil {
			t.Fatal(err)
		}
		t.Errorf("balance %s %s holds %d, but its ledger sums to %d", account, env, held, ledger)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	var broken int
	err = pool.QueryRow(ctx, `
		SELECT count(*) FROM (
		    SELECT balance_after_minor, sum(CASE kind WHEN 'debit' THEN -amount_minor ELSE amount_minor END)
		           OVER (PARTITION BY account_id, environment ORDER BY created_at, id) AS running
		    FROM ledger_entries) x
		WHERE balance_after_minor <> running`).Scan(&broken)
	if err != nil {
		t.Fatal(err)
	}
	if broken > 0 {
		t.Errorf("%d entries record a balance after them that is not the running sum of the ledger in its order", broken)
	}
}

// TestConcurrentDebitsNeverOverdraw: 200 debits of 1.00 race for exactly
// 100.00. Exactly 100 succeed, the others are refused for insufficient
// funds, the balance ends at 0, never below, and the ledger accounts for
// every cent.
func TestConcurrentDebitsNeverOverdraw(t *testing.T) {
	ctx := context.Background()
	svc, store, pool := newService(t)
	a := uuid.New()
	topUp(t, svc, a, wallet.Live, wallet.USD, 100_00, "prepayment")

	start := make(chan struct{})
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			<-start
			_, err := svc.Debit(ctx, debit(a, wallet.Live, wallet.USD, 1_00, fmt.Sprintf("order-%d", i)))
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, wallet.ErrInsufficientFunds):
				refused.Add(1)
			default:
				t.Errorf("debit %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()

	if ok.Load() != 100 || refused.Load() != 100 {
		t.Errorf("%d debits succeeded and %d were refused, want 100 and 100", ok.Load(), refused.Load())
	}
	if got := balance(t, store, a, wallet.Live); got != 0 {
		t.Errorf("balance = %d, want 0", got)
	}
	if n := count(t, pool, "kind = 'debit'"); n != 100 {
		t.Errorf("%d debits in the ledger, want 100: refused debits store nothing", n)
	}
	conserved(t, pool)
}

// TestConcurrentRepeatsMoveMoneyOnce: 50 calls with one reference, at
// once, record one entry and move its amount once; every call answers
// with that entry. Both ways a repeat can lose the race are covered: to
// the reference (the balance covers every call) and to the guard (it
// covers one, and the winner spent it).
func TestConcurrentRepeatsMoveMoneyOnce(t *testing.T) {
	for name, funds := range map[string]int64{"balance covers all": 50_00, "balance covers one": 2_50} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			svc, store, pool := newService(t)
			a := uuid.New()
			topUp(t, svc, a, wallet.Sandbox, wallet.EUR, funds, "prepayment")

			ids := make([]uuid.UUID, 50)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range ids {
				wg.Go(func() {
					<-start
					e, err := svc.Debit(ctx, debit(a, wallet.Sandbox, wallet.EUR, 2_50, "order-1"))
					if err != nil {
						t.Errorf("debit %d: %v", i, err)
					}
					ids[i] = e.ID
				})
			}
			close(start)
			wg.Wait()

			for i, id := range ids {
				if id != ids[0] {
					t.Errorf("call %d answered with entry %s, call 0 with %s", i, id, ids[0])
				}
			}
			if n := count(t, pool, "kind = 'debit'"); n != 1 {
				t.Errorf("%d debits recorded, want 1", n)
			}
			if got := balance(t, store, a, wallet.Sandbox); got != funds-2_50 {
				t.Errorf("balance = %d, want %d", got, funds-2_50)
			}
			conserved(t, pool)
		})
	}
}

// The first top-up creates the balance: concurrent repeats of it race on
// creating the row as well as on the reference.
func TestConcurrentFirstTopUpsMoveMoneyOnce(t *testing.T) {
	ctx := context.Background()
	svc, store, pool := newService(t)
	a := uuid.New()
	ids := make([]uuid.UUID, 30)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			<-start
			e, err := svc.TopUp(ctx, wallet.NewTopUp{AccountID: a, Environment: wallet.Live, Currency: wallet.GBP, AmountMinor: 10_00, Reference: "wire-1", Actor: "operator"})
			if err != nil {
				t.Errorf("top-up %d: %v", i, err)
			}
			ids[i] = e.ID
		})
	}
	close(start)
	wg.Wait()
	for i, id := range ids {
		if id != ids[0] {
			t.Errorf("call %d answered with entry %s, call 0 with %s", i, id, ids[0])
		}
	}
	if got := balance(t, store, a, wallet.Live); got != 10_00 || count(t, pool, "true") != 1 {
		t.Errorf("balance %d with %d entries, want 1000 with 1", got, count(t, pool, "true"))
	}
	conserved(t, pool)
}

// TestConcurrentRefundsRefundOnce: 20 refunds of one debit, at once, give
// its amount back once; every call answers with the one refund.
func TestConcurrentRefundsRefundOnce(t *testing.T) {
	ctx := context.Background()
	svc, store, pool := newService(t)
	a := uuid.New()
	topUp(t, svc, a, wallet.Live, wallet.USD, 10_00, "prepayment")
	if _, err := svc.Debit(ctx, debit(a, wallet.Live, wallet.USD, 7_25, "order-1")); err != nil {
		t.Fatal(err)
	}

	entries := make([]wallet.Entry, 20)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range entries {
		wg.Go(func() {
			<-start
			e, err := svc.Refund(ctx, refund(a, wallet.Live, "order-1"))
			if err != nil {
				t.Errorf("refund %d: %v", i, err)
			}
			entries[i] = e
		})
	}
	close(start)
	wg.Wait()

	for i, e := range entries {
		if e != entries[0] {
			t.Errorf("call %d answered %+v, call 0 %+v", i, e, entries[0])
		}
	}
	if e := entries[0]; e.Kind != wallet.Refund || e.AmountMinor != 7_25 || e.BalanceAfterMinor != 10_00 || e.Reference != "order-1" {
		t.Errorf("refund = %+v, want 7.25 back", e)
	}
	if n := count(t, pool, "kind = 'refund'"); n != 1 {
		t.Errorf("%d refunds recorded, want 1", n)
	}
	if got := balance(t, store, a, wallet.Live); got != 10_00 {
		t.Errorf("balance = %d, want 1000", got)
	}
	conserved(t, pool)
}

// TestMoneyIsConservedUnderMixedWork runs top-ups, debits, refunds and
// repeats of each at once over several balances, then checks that the
// ledger accounts for every balance.
func TestMoneyIsConservedUnderMixedWork(t *testing.T) {
	ctx := context.Background()
	svc, store, pool := newService(t)
	accounts := []uuid.UUID{uuid.New(), uuid.New()}
	envs := []wallet.Environment{wallet.Sandbox, wallet.Live}
	for _, a := range accounts {
		for _, env := range envs {
			topUp(t, svc, a, env, wallet.USD, 20_00, "seed")
		}
	}

	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			<-start
			for range 40 {
				a, env := accounts[rng.IntN(len(accounts))], envs[rng.IntN(len(envs))]
				// Few references, so that calls repeat and race each other.
				ref := fmt.Sprintf("ref-%d", rng.IntN(15))
				var err error
				switch rng.IntN(3) {
				case 0:
					_, err = svc.TopUp(ctx, wallet.NewTopUp{AccountID: a, Environment: env, Currency: wallet.USD, AmountMinor: 3_00, Reference: ref, Actor: "operator"})
				case 1:
					_, err = svc.Debit(ctx, debit(a, env, wallet.USD, 2_00, ref))
				case 2:
					_, err = svc.Refund(ctx, refund(a, env, ref))
				}
				if err != nil && !errors.Is(err, wallet.ErrInsufficientFunds) && !errors.Is(err, wallet.ErrNotFound) {
					t.Errorf("worker %d: %v", w, err)
				}
			}
		})
	}
	close(start)
	wg.Wait()

	conserved(t, pool)
	for _, a := range accounts {
		for _, env := range envs {
			if got := balance(t, store, a, env); got < 0 {
				t.Errorf("balance %s %s = %d", a, env, got)
			}
		}
	}
	if n := count(t, pool, "kind = 'refund'"); n == 0 {
		t.Error("no refund happened: the workload does not exercise refunds")
	}
}

// The same reference with another amount or currency is a conflict and
// moves nothing, whether the balance could cover it or not.
func TestConflictingReferenceMovesNothing(t *testing.T) {
	ctx := context.Background()
	svc, _, pool := newService(t)
	a := uuid.New()
	topUp(t, svc, a, wallet.Live, wallet.EUR, 10_00, "wire-1")
	if _, err := svc.Debit(ctx, debit(a, wallet.Live, wallet.EUR, 4_00, "order-1")); err != nil {
		t.Fatal(err)
	}
	before := tables(t, pool)

	for name, err := range map[string]error{
		"top-up of another amount":   second(svc.TopUp(ctx, wallet.NewTopUp{AccountID: a, Environment: wallet.Live, Currency: wallet.EUR, AmountMinor: 10_01, Reference: "wire-1", Actor: "operator"})),
		"top-up in another currency": second(svc.TopUp(ctx, wallet.NewTopUp{AccountID: a, Environment: wallet.Live, Currency: wallet.USD, AmountMinor: 10_00, Reference: "wire-1", Actor: "operator"})),
		"debit of a smaller amount":  second(svc.Debit(ctx, debit(a, wallet.Live, wallet.EUR, 1_00, "order-1"))),
		"debit of more than held":    second(svc.Debit(ctx, debit(a, wallet.Live, wallet.EUR, 99_00, "order-1"))),
		"debit in another currency":  second(svc.Debit(ctx, debit(a, wallet.Live, wallet.GBP, 4_00, "order-1"))),
	} {
		if !errors.Is(err, wallet.ErrConflict) {
			t.Errorf("%s: err = %v, want ErrConflict", name, err)
		}
	}
	if after := tables(t, pool); after != before {
		t.Errorf("conflicting calls changed the tables:\n%s\nwant\n%s", after, before)
	}
}

func second[T any](_ T, err error) error { return err }

// Refunds name a debit of the same account and environment, and nothing
// else.
func TestRefundOfUnknownDebitIsNotFound(t *testing.T) {
	ctx := context.Background()
	svc, _, pool := newService(t)
	a, other := uuid.New(), uuid.New()
	topUp(t, svc, a, wallet.Live, wallet.USD, 10_00, "order-1")
	topUp(t, svc, a, wallet.Sandbox, wallet.USD, 10_00, "seed")
	topUp(t, svc, other, wallet.Live, wallet.USD, 10_00, "seed")
	if _, err := svc.Debit(ctx, debit(a, wallet.Sandbox, wallet.USD, 1_00, "order-2")); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Debit(ctx, debit(other, wallet.Live, wallet.USD, 1_00, "order-3")); err != nil {
		t.Fatal(err)
	}
	before := tables(t, pool)

	for name, in := range map[string]wallet.NewRefund{
		"no such reference":             refund(a, wallet.Live, "order-9"),
		"a top-up's reference":          refund(a, wallet.Live, "order-1"),
		"a debit of the other env":      refund(a, wallet.Live, "order-2"),
		"a debit of another account":    refund(a, wallet.Live, "order-3"),
		"an account never topped up":    refund(uuid.New(), wallet.Live, "order-3"),
		"the reference in another case": refund(a, wallet.Sandbox, "ORDER-2"),
	} {
		if _, err := svc.Refund(ctx, in); !errors.Is(err, wallet.ErrNotFound) {
			t.Errorf("Refund of %s: err = %v, want ErrNotFound", name, err)
		}
	}
	if after := tables(t, pool); after != before {
		t.Errorf("refused refunds changed the tables")
	}
}

// A debit the balance does not cover, of a balance never topped up or in
// another currency, stores nothing; the refused reference debits later.
func TestRefusedDebitsStoreNothing(t *testing.T) {
	ctx := context.Background()
	svc, store, pool := newService(t)
	a := uuid.New()

	if _, err := svc.Debit(ctx, debit(a, wallet.Live, wallet.USD, 1, "order-1")); !errors.Is(err, wallet.ErrInsufficientFunds) {
		t.Errorf("debit of a balance never topped up: err = %v, want ErrInsufficientFunds", err)
	}
	if b, err := svc.GetBalance(ctx, a, wallet.Live, wallet.USD); err != nil || b.AmountMinor != 0 || !b.UpdatedAt.IsZero() {
		t.Errorf("GetBalance of a balance never topped up = %+v, %v", b, err)
	}
	if dump := tables(t, pool); dump != " " {
		t.Errorf("a refused debit or a balance read stored something: %s", dump)
	}

	topUp(t, svc, a, wallet.Live, wallet.GBP, 5_00, "wire-1")
	before := tables(t, pool)
	_, err := svc.Debit(ctx, debit(a, wallet.Live, wallet.USD, 1_00, "order-1"))
	var ve *wallet.ValidationError
	if !errors.As(err, &ve) || ve.Field != "currency" || !strings.Contains(ve.Reason, "GBP") {
		t.Errorf("debit in another currency: err = %v, want invalid currency naming GBP", err)
	}
	_, err = svc.TopUp(ctx, wallet.NewTopUp{AccountID: a, Environment: wallet.Live, Currency: wallet.EUR, AmountMinor: 1_00, Reference: "wire-2", Actor: "operator"})
	if !errors.As(err, &ve) || ve.Field != "currency" {
		t.Errorf("top-up in another currency: err = %v, want invalid currency", err)
	}
	if _, err := svc.Debit(ctx, debit(a, wallet.Live, wallet.GBP, 5_01, "order-1")); !errors.Is(err, wallet.ErrInsufficientFunds) {
		t.Errorf("debit of more than held: err = %v, want ErrInsufficientFunds", err)
	}
	if after := tables(t, pool); after != before {
		t.Errorf("refused movements changed the tables")
	}

	topUp(t, svc, a, wallet.Live, wallet.GBP, 1, "wire-2")
	if d, err := svc.Debit(ctx, debit(a, wallet.Live, wallet.GBP, 5_01, "order-1")); err != nil || d.BalanceAfterMinor != 0 {
		t.Errorf("the refused reference after a top-up = %+v, %v; want it to empty the balance", d, err)
	}
	if got := balance(t, store, a, wallet.Live); got != 0 {
		t.Errorf("balance = %d, want 0", got)
	}
	conserved(t, pool)
}

func TestEntriesAsStored(t *testing.T) {
	ctx := context.Background()
	svc, store, _ := newService(t)
	a := uuid.New()
	top, err := svc.TopUp(ctx, wallet.NewTopUp{AccountID: a, Environment: wallet.Sandbox, Currency: wallet.EUR, AmountMinor: 12_34, Reference: "wire 1", Note: "first top-up", Actor: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	if top.ID.Version() != 7 || top.CreatedAt.IsZero() || top.CreatedAt.Location().String() != "UTC" || top.BalanceAfterMinor != 12_34 || top.Note != "first top-up" {
		t.Errorf("top-up = %+v", top)
	}
	b, err := store.Balance(ctx, a, wallet.Sandbox)
	if err != nil || b.Currency != wallet.EUR || b.AmountMinor != 12_34 || !b.UpdatedAt.Equal(top.CreatedAt) {
		t.Errorf("Balance = %+v, %v; want 12.34 EUR updated at the top-up's time", b, err)
	}
	page, total, err := store.ListEntries(ctx, a, wallet.Sandbox, 10, 0)
	if err != nil || total != 1 || len(page) != 1 || page[0] != top {
		t.Errorf("ListEntries = %+v (%d), %v; want the top-up exactly as returned", page, total, err)
	}
	if _, err := store.Balance(ctx, a, wallet.Live); !errors.Is(err, wallet.ErrNotFound) {
		t.Errorf("Balance of the other environment: err = %v, want ErrNotFound", err)
	}
}

// Pages walk a balance's entries newest first, each once, with the
// balance's total; other balances' entries are neither listed nor
// counted.
func TestListEntriesPagesNewestFirst(t *testing.T) {
	ctx := context.Background()
	svc, store, _ := newService(t)
	a := uuid.New()
	topUp(t, svc, a, wallet.Live, wallet.USD, 100_00, "seed")
	topUp(t, svc, a, wallet.Sandbox, wallet.USD, 1_00, "other env")
	topUp(t, svc, uuid.New(), wallet.Live, wallet.USD, 1_00, "other account")
	for i := range 6 {
		if _, err := svc.Debit(ctx, debit(a, wallet.Live, wallet.USD, int64(i+1), fmt.Sprint("order-", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.Refund(ctx, refund(a, wallet.Live, "order-2")); err != nil {
		t.Fatal(err)
	}
	all, total, err := store.ListEntries(ctx, a, wallet.Live, 100, 0)
	if err != nil || total != 8 || len(all) != 8 {
		t.Fatalf("ListEntries = %d entries, total %d, %v; want 8", len(all), total, err)
	}
	if all[0].Kind != wallet.Refund || all[7].Reference != "seed" {
		t.Errorf("ListEntries is not newest first: first %+v, last %+v", all[0], all[7])
	}
	for i := 1; i < len(all); i++ {
		if all[i].CreatedAt.After(all[i-1].CreatedAt) {
			t.Errorf("entry %d is newer than the one before it", i)
		}
	}
	for _, limit := range []int32{1, 3, 8} {
		var walked []uuid.UUID
		for offset := int64(0); ; offset += int64(limit) {
			page, total, err := store.ListEntries(ctx, a, wallet.Live, limit, offset)
			if err != nil || total != 8 {
				t.Fatalf("ListEntries(%d, %d): total %d, %v", limit, offset, total, err)
			}
			for _, e := range page {
				walked = append(walked, e.ID)
			}
			if len(page) < int(limit) {
				break
			}
		}
		for i, id := range walked {
			if i >= len(all) || id != all[i].ID {
				t.Fatalf("pages of %d walk %v, want %v", limit, walked, all)
			}
		}
		if len(walked) != len(all) {
			t.Errorf("pages of %d walk %d entries, want %d", limit, len(walked), len(all))
		}
	}
	none, total, err := store.ListEntries(ctx, uuid.New(), wallet.Live, 10, 0)
	if err != nil || len(none) != 0 || total != 0 {
		t.Errorf("ListEntries of an unknown balance = %v, %d, %v; want none", none, total, err)
	}
}

// A page and its total come from one snapshot: an entry committed between
// the statement that reads the page and the one that counts must not be
// counted without being listed.
func TestListEntriesReadsPageAndTotalInOneSnapshot(t *testing.T) {
	ctx := context.Background()
	svc, _, pool := newService(t)
	a := uuid.New()
	topUp(t, svc, a, wallet.Live, wallet.USD, 1_00, "seed")
	p, err := libpostgres.Connect(ctx, pool.Config().ConnString(), pgtest.AfterStatement("ListEntries", func() {
		topUp(t, svc, a, wallet.Live, wallet.USD, 1_00, "between")
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	list, total, err := postgres.NewStore(p).ListEntries(ctx, a, wallet.Live, 100, 0)
	if err != nil || int64(len(list)) != total {
		t.Errorf("ListEntries: %d entries listed, total %d (%v); a page holding every entry must match its total", len(list), total, err)
	}
}

// The store bounds what it reads even for a caller that skips the
// domain's paging rules.
func TestListEntriesRefusesPagesOutOfRange(t *testing.T) {
	ctx := context.Background()
	_, store, _ := newService(t)
	for _, p := range []struct {
		limit  int32
		offset int64
	}{{wallet.MaxPageLimit + 1, 0}, {0, 0}, {-1, 0}, {10, -1}} {
		if _, _, err := store.ListEntries(ctx, uuid.New(), wallet.Live, p.limit, p.offset); err == nil {
			t.Errorf("ListEntries(limit %d, offset %d) read a page", p.limit, p.offset)
		}
	}
}

func wantIntegrityViolation(t *testing.T, err error) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code[:2] != "23" {
		t.Errorf("err = %v, want an integrity constraint violation (class 23)", err)
	}
}

// TestLedgerIsAppendOnly: no entry can be changed or removed, whoever
// writes to the table.
func TestLedgerIsAppendOnly(t *testing.T) {
	ctx := context.Background()
	svc, _, pool := newService(t)
	a := uuid.New()
	topUp(t, svc, a, wallet.Live, wallet.USD, 10_00, "wire-1")
	if _, err := svc.Debit(ctx, debit(a, wallet.Live, wallet.USD, 3_00, "order-1")); err != nil {
		t.Fatal(err)
	}
	before := tables(t, pool)

	for _, sql := range []string{
		"UPDATE ledger_entries SET amount_minor = 1 WHERE kind = 'debit'",
		"UPDATE ledger_entries SET note = 'edited' WHERE kind = 'top_up'",
		"UPDATE ledger_entries SET created_at = created_at",
		"DELETE FROM ledger_entries WHERE kind = 'debit'",
		"DELETE FROM ledger_entries",
		"TRUNCATE ledger_entries",
		"TRUNCATE balances CASCADE",
	} {
		t.Run(sql, func(t *testing.T) {
			_, err := pool.Exec(ctx, sql)
			if err == nil {
				t.Fatal("the statement succeeded")
			}
			wantIntegrityViolation(t, err)
		})
	}
	if after := tables(t, pool); after != before {
		t.Errorf("the ledger changed:\n%s\nwant\n%s", after, before)
	}
}

// The schema defends the wallet's invariants even against writers that
// skip the domain and the store.
func TestSchemaConstraints(t *testing.T) {
	ctx := context.Background()
	svc, _, pool := newService(t)
	a := uuid.New()
	topUp(t, svc, a, wallet.Live, wallet.USD, 10_00, "wire-1")
	if _, err := svc.Debit(ctx, debit(a, wallet.Live, wallet.USD, 3_00, "order-1")); err != nil {
		t.Fatal(err)
	}
	before := tables(t, pool)

	const insert = `INSERT INTO ledger_entries (id, account_id, environment, kind, amount_minor, currency, reference, balance_after_minor, actor, note, created_at)
		VALUES (gen_random_uuid(), $1, $2, $3, $4, $5, $6, 0, $7, $8, now())`
	entry := func(env, kind string, amount int64, currency, ref, actor, note string) []any {
		return []any{a, env, kind, amount, currency, ref, actor, note}
	}
	for name, tc := range map[string]struct {
		sql  string
		args []any
	}{
		"negative balance":              {"UPDATE balances SET amount_minor = -1 WHERE account_id = $1", []any{a}},
		"overdrawing debit":             {"UPDATE balances SET amount_minor = amount_minor - 10000 WHERE account_id = $1", []any{a}},
		"balance in an unsold currency": {"INSERT INTO balances VALUES ($1, 'sandbox', 'JPY', 0, now())", []any{a}},
		"balance in no environment":     {"INSERT INTO balances VALUES ($1, 'staging', 'USD', 0, now())", []any{a}},
		"currency of a used balance":    {"UPDATE balances SET currency = 'EUR' WHERE account_id = $1", []any{a}},
		"removing a used balance":       {"DELETE FROM balances WHERE account_id = $1", []any{a}},
		"zero amount":                   {insert, entry("live", "top_up", 0, "USD", "z", "operator", "")},
		"negative amount":               {insert, entry("live", "top_up", -5, "USD", "z", "operator", "")},
		"amount over the cap":           {insert, entry("live", "top_up", wallet.MaxAmountMinor+1, "USD", "z", "operator", "")},
		"unknown kind":                  {insert, entry("live", "gift", 1, "USD", "z", "operator", "")},
		"entry in another currency":     {insert, entry("live", "top_up", 1, "EUR", "z", "operator", "")},
		"entry without a balance":       {insert, entry("sandbox", "top_up", 1, "USD", "z", "operator", "")},
		"reused reference":              {insert, entry("live", "debit", 3_00, "USD", "order-1", "ordering", "")},
		"empty reference":               {insert, entry("live", "top_up", 1, "USD", "", "operator", "")},
		"non-ASCII reference":           {insert, entry("live", "top_up", 1, "USD", "café", "operator", "")},
		"reference with a newline":      {insert, entry("live", "top_up", 1, "USD", "a\nb", "operator", "")},
		"long reference":                {insert, entry("live", "top_up", 1, "USD", strings.Repeat("r", 256), "operator", "")},
		"no actor":                      {insert, entry("live", "top_up", 1, "USD", "z", "", "")},
		"long note":                     {insert, entry("live", "top_up", 1, "USD", "z", "operator", strings.Repeat("n", 256))},
		"note on a debit":               {insert, entry("live", "debit", 1, "USD", "z", "ordering", "why")},
		"refund of no debit":            {insert, entry("live", "refund", 1, "USD", "order-9", "ordering", "")},
		"refund of a top-up":            {insert, entry("live", "refund", 10_00, "USD", "wire-1", "operator", "")},
		"refund of more than debited":   {insert, entry("live", "refund", 3_01, "USD", "order-1", "ordering", "")},
		"refund of less than debited":   {insert, entry("live", "refund", 2_99, "USD", "order-1", "ordering", "")},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pool.Exec(ctx, tc.sql, tc.args...)
			wantIntegrityViolation(t, err)
		})
	}
	if after := tables(t, pool); after != before {
		t.Errorf("refused writes changed the tables")
	}

	// The exact refund passes, once.
	if _, err := pool.Exec(ctx, insert, entry("live", "refund", 3_00, "USD", "order-1", "ordering", "")...); err != nil {
		t.Errorf("the refund of the debit's amount: %v", err)
	}
	_, err := pool.Exec(ctx, insert, entry("live", "refund", 3_00, "USD", "order-1", "ordering", "")...)
	wantIntegrityViolation(t, err)
}

func TestMigrationsGoDownAndUpAgain(t *testing.T) {
	pgtest.CheckMigrationsReversible(t, postgres.Migrations)
}
