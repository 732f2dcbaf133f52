package postgres_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/postgres"
	"github.com/esimplatform/esim/services/ordering/sandbox"
)

// records are the sandbox's records as the store keeps them for a lock
// holder (nil: on the pool).
func records(s *postgres.Store) func(ordering.Locked) sandbox.Store {
	return func(tx ordering.Locked) sandbox.Store { return s.Records(tx) }
}

func newStore(t *testing.T) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.New(t, postgres.Migrations)
	if err := libpostgres.MigrateRiver(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return postgres.NewStore(pool, 0), pool
}

// at returns a fixed, microsecond-precision UTC instant, as the domain
// produces them, offset by d.
func at(d time.Duration) time.Time {
	return time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC).Add(d)
}

var (
	acme  = ordering.Scope{AccountID: uuid.MustParse("0195f0c4-1c2d-7abc-8def-0000000000a1"), Environment: ordering.Sandbox}
	other = ordering.Scope{AccountID: uuid.MustParse("0195f0c4-1c2d-7abc-8def-0000000000b2"), Environment: ordering.Sandbox}
)

func newOrder(scope ordering.Scope, key string, created time.Time) ordering.Order {
	fp := sha256.Sum256([]byte(key))
	return ordering.Order{
		ID: uuid.Must(uuid.NewV7()), Kind: ordering.KindEsims, Scope: scope, IdempotencyKey: key, Fingerprint: fp[:],
		PlanID: uuid.New(), PlanName: "Japan 5 GB, 30 days", TotalBytes: 5 << 30, ValidityDays: 30,
		Quantity: 2, Currency: ordering.USD, UnitMinor: 1650, TotalMinor: 3300,
		Customer: ordering.Customer{Name: "Ada", Email: "ada@example.com", Reference: "BK-1"},
		Status:   ordering.StatusPending, CreatedAt: created,
	}
}

// locked runs fn under a lock of its own, as the domain does.
func locked(t *testing.T, s *postgres.Store, fn func(context.Context, ordering.Locked) error) {
	t.Helper()
	if err := s.WithLock(context.Background(), "test/"+uuid.NewString(), fn); err != nil {
		t.Fatal(err)
	}
}

func insert(t *testing.T, s *postgres.Store, o ordering.Order) ordering.Order {
	t.Helper()
	locked(t, s, func(ctx context.Context, l ordering.Locked) error { return l.InsertOrder(ctx, o) })
	return o
}

// esims makes an order's eSIMs from sandbox allocations, as the domain
// does from a provider's profiles.
func esims(t *testing.T, s *postgres.Store, o ordering.Order) []ordering.Esim {
	t.Helper()
	p := sandbox.New(records(s), sandbox.DefaultSMDPAddress)
	profiles, err := p.Issue(context.Background(), nil, ordering.IssueRequest{OrderID: o.ID, Quantity: o.Quantity})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]ordering.Esim, len(profiles))
	for i, pr := range profiles {
		out[i] = ordering.Esim{
			ID: uuid.Must(uuid.NewV7()), OrderID: o.ID, Position: int32(i), PlanName: o.PlanName,
			ICCID: pr.ICCID, MatchingID: pr.MatchingID, SMDPAddress: pr.SMDPAddress,
			QRToken: qrToken(), Status: ordering.EsimAllocated,
			ValidityDays: o.ValidityDays, Data: ordering.EsimData{TotalBytes: o.TotalBytes, UpdatedAt: o.CreatedAt},
			CreatedAt: o.CreatedAt,
		}
	}
	return out
}

// event is a new event of the order, as the domain makes them.
func event(typ ordering.EventType, orderID uuid.UUID) ordering.Event {
	id := uuid.Must(uuid.NewV7())
	return ordering.Event{ID: "evt_" + hex.EncodeToString(id[:]), Type: typ, OrderID: orderID, CreatedAt: at(time.Hour)}
}

func qrToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func complete(t *testing.T, s *postgres.Store, o ordering.Order) ordering.Order {
	t.Helper()
	e := esims(t, s, o)
	locked(t, s, func(ctx context.Context, l ordering.Locked) error {
		return l.Complete(ctx, o.ID, e, event(ordering.EventOrderCompleted, o.ID))
	})
	o.Status, o.Esims = ordering.StatusCompleted, e
	return o
}

// An eSIM's ICCID is unique: completing an order with one another eSIM
// has is ErrICCIDInUse, and the order stays pending.
func TestCompleteRefusesAnICCIDInUse(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	a := complete(t, s, insert(t, s, newOrder(acme, "a", at(time.Minute))))
	b := insert(t, s, newOrder(acme, "b", at(time.Minute)))
	e := esims(t, s, b)
	e[0].ICCID = a.Esims[0].ICCID
	locked(t, s, func(ctx context.Context, l ordering.Locked) error {
		if err := l.Complete(ctx, b.ID, e, event(ordering.EventOrderCompleted, b.ID)); !errors.Is(err, ordering.ErrICCIDInUse) {
			t.Errorf("Complete = %v, want ErrICCIDInUse", err)
		}
		return nil
	})
	if got, err := s.Order(ctx, &acme, b.ID); err != nil || got.Status != ordering.StatusPending {
		t.Errorf("order b = %+v, %v; want it still pending", got, err)
	}
}

func TestOrderLifecycle(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	o := insert(t, s, newOrder(acme, "k1", at(0)))

	locked(t, s, func(ctx context.Context, l ordering.Locked) error {
		got, err := l.OrderByKey(ctx, acme, "k1")
		if err != nil || got.ID != o.ID || got.Status != ordering.StatusPending || got.TotalMinor != 3300 || string(got.Fingerprint) != string(o.Fingerprint) {
			t.Errorf("OrderByKey = %+v, %v", got, err)
		}
		if _, err := l.OrderByKey(ctx, other, "k1"); !errors.Is(err, ordering.ErrNotFound) {
			t.Errorf("another account's key: %v, want ErrNotFound", err)
		}
		if err := l.InsertOrder(ctx, newOrder(acme, "k1", at(time.Second))); !errors.Is(err, ordering.ErrConflict) {
			t.Errorf("a second order with the key: %v, want ErrConflict", err)
		}
		// The same key in another account or environment is another key.
		live := acme
		live.Environment = ordering.Live
		for _, sc := range []ordering.Scope{other, live} {
			if err := l.InsertOrder(ctx, newOrder(sc, "k1", at(time.Second))); err != nil {
				t.Errorf("key k1 in %+v: %v", sc, err)
			}
		}
		// Orders without a key never conflict.
		for range 2 {
			if err := l.InsertOrder(ctx, newOrder(acme, "", at(time.Second))); err != nil {
				t.Errorf("order without key: %v", err)
			}
		}
		return nil
	})

	done := complete(t, s, o)
	got, err := s.Order(ctx, &acme, o.ID)
	if err != nil || got.Status != ordering.StatusCompleted || len(got.Esims) != 2 || got.Esims[1].ICCID != done.Esims[1].ICCID ||
		got.Esims[0].Position != 0 || got.CreatedAt != o.CreatedAt || got.Esims[0].Data.UpdatedAt != o.CreatedAt {
		t.Errorf("Order after Complete = %+v, %v", got, err)
	}
	if _, err := s.Order(ctx, &other, o.ID); !errors.Is(err, ordering.ErrNotFound) {
		t.Errorf("another account's order: %v, want ErrNotFound", err)
	}
	if got, err := s.Order(ctx, nil, o.ID); err != nil || got.ID != o.ID {
		t.Errorf("an operator's read: %v", err)
	}
	e, err := s.EsimByQRToken(ctx, done.Esims[0].QRToken)
	if err != nil || e.ID != done.Esims[0].ID {
		t.Errorf("EsimByQRToken = %+v, %v", e, err)
	}
	if _, err := s.Esim(ctx, &other, e.ID); !errors.Is(err, ordering.ErrNotFound) {
		t.Errorf("another account's eSIM: %v", err)
	}
	if got, err := s.Esim(ctx, &acme, e.ID); err != nil || got.ICCID != e.ICCID {
		t.Errorf("Esim = %+v, %v", got, err)
	}

	// Failing, then failed.
	f := insert(t, s, newOrder(acme, "k2", at(time.Minute)))
	locked(t, s, func(ctx context.Context, l ordering.Locked) error {
		if err := l.MarkFailed(ctx, f.ID, event(ordering.EventOrderFailed, f.ID)); err == nil {
			t.Error("a pending order was marked failed without failing first")
		}
		if err := l.MarkFailing(ctx, f.ID, ordering.OrderError{Code: "provider_error", Message: "down"}); err != nil {
			return err
		}
		if err := l.DeletePending(ctx, f.ID); err == nil {
			t.Error("a failing order was deleted")
		}
		if err := l.Complete(ctx, f.ID, esims(t, s, f), event(ordering.EventOrderCompleted, f.ID)); err == nil {
			t.Error("a failing order was completed")
		}
		return l.MarkFailed(ctx, f.ID, event(ordering.EventOrderFailed, f.ID))
	})
	got, err = s.Order(ctx, &acme, f.ID)
	if err != nil || got.Status != ordering.StatusFailed || got.Error == nil || *got.Error != (ordering.OrderError{Code: "provider_error", Message: "down"}) || len(got.Esims) != 0 {
		t.Errorf("failed order = %+v, %v", got, err)
	}

	// A refused debit deletes the pending order and frees its key.
	d := insert(t, s, newOrder(acme, "k3", at(time.Minute)))
	locked(t, s, func(ctx context.Context, l ordering.Locked) error {
		if err := l.DeletePending(ctx, d.ID); err != nil {
			return err
		}
		if err := l.DeletePending(ctx, d.ID); err == nil {
			t.Error("deleted twice")
		}
		if _, err := l.OrderByID(ctx, d.ID); !errors.Is(err, ordering.ErrNotFound) {
			t.Errorf("deleted order: %v", err)
		}
		return l.InsertOrder(ctx, newOrder(acme, "k3", at(time.Hour)))
	})
}

func TestUnfinishedOrdersOldestFirst(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	old := insert(t, s, newOrder(acme, "a", at(0)))
	failing := insert(t, s, newOrder(other, "b", at(time.Second)))
	locked(t, s, func(ctx context.Context, l ordering.Locked) error {
		return l.MarkFailing(ctx, failing.ID, ordering.OrderError{Code: "provider_error", Message: "x"})
	})
	complete(t, s, insert(t, s, newOrder(acme, "c", at(2*time.Second))))
	insert(t, s, newOrder(acme, "young", at(time.Hour)))

	got, err := s.UnfinishedOrders(ctx, at(time.Minute), 10)
	if err != nil || len(got) != 2 || got[0].ID != old.ID || got[1].ID != failing.ID || got[1].Status != ordering.StatusFailing {
		t.Errorf("UnfinishedOrders = %+v, %v; want the pending and the failing order, oldest first", got, err)
	}
	if got, _ := s.UnfinishedOrders(ctx, at(time.Minute), 1); len(got) != 1 || got[0].ID != old.ID {
		t.Errorf("UnfinishedOrders limited to 1 = %+v", got)
	}
}

func TestListsPageFilterAndScope(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	var mine []ordering.Order
	for i := range 7 {
		o := newOrder(acme, fmt.Sprintf("k%d", i), at(time.Duration(i%3)*time.Second))
		if i%2 == 0 {
			o.Customer.Reference = "even"
		}
		o = insert(t, s, o)
		if i < 4 {
			o = complete(t, s, o)
		}
		mine = append(mine, o)
	}
	complete(t, s, insert(t, s, newOrder(other, "k0", at(time.Hour))))

	var walked []uuid.UUID
	for offset := int64(0); ; offset += 3 {
		page, total, err := s.ListOrders(ctx, ordering.OrderQuery{Scope: &acme, Limit: 3, Offset: offset})
		if err != nil || total != 7 {
			t.Fatalf("ListOrders: total %d, %v", total, err)
		}
		for i, o := range page {
			if o.Status == ordering.StatusCompleted && len(o.Esims) != 2 || o.Status == ordering.StatusPending && len(o.Esims) != 0 {
				t.Errorf("listed order %s is %s with %d eSIMs", o.ID, o.Status, len(o.Esims))
			}
			if i > 0 && (o.CreatedAt.After(page[i-1].CreatedAt) || o.CreatedAt.Equal(page[i-1].CreatedAt) && o.ID.String() > page[i-1].ID.String()) {
				t.Errorf("page not newest first, then by id descending")
			}
			walked = append(walked, o.ID)
		}
		if len(page) < 3 {
			break
		}
	}
	seen := map[uuid.UUID]bool{}
	for _, id := range walked {
		seen[id] = true
	}
	if len(walked) != 7 || len(seen) != 7 {
		t.Errorf("pages walked %d orders (%d distinct), want 7 once each", len(walked), len(seen))
	}

	for _, tc := range []struct {
		q    ordering.OrderQuery
		want int64
	}{
		{ordering.OrderQuery{Scope: &acme, Status: ordering.StatusCompleted}, 4},
		{ordering.OrderQuery{Scope: &acme, Status: ordering.StatusPending}, 3},
		{ordering.OrderQuery{Scope: &acme, Status: ordering.StatusFailed}, 0},
		{ordering.OrderQuery{Scope: &acme, Reference: "even"}, 4},
		{ordering.OrderQuery{Scope: &acme, Reference: "even", Status: ordering.StatusCompleted}, 2},
		{ordering.OrderQuery{Scope: &acme, Reference: "eve"}, 0},
		{ordering.OrderQuery{Scope: &other}, 1},
		{ordering.OrderQuery{}, 8},
		{ordering.OrderQuery{Status: ordering.StatusCompleted}, 5},
	} {
		tc.q.Limit = 100
		page, total, err := s.ListOrders(ctx, tc.q)
		if err != nil || total != tc.want || int64(len(page)) != tc.want {
			t.Errorf("ListOrders(%+v) = %d orders, total %d, %v; want %d", tc.q, len(page), total, err, tc.want)
		}
	}

	for _, tc := range []struct {
		q    ordering.EsimQuery
		want int64
	}{
		{ordering.EsimQuery{Scope: &acme}, 8},
		{ordering.EsimQuery{Scope: &acme, OrderID: mine[0].ID}, 2},
		{ordering.EsimQuery{Scope: &other, OrderID: mine[0].ID}, 0},
		{ordering.EsimQuery{Scope: &acme, ICCID: mine[1].Esims[1].ICCID}, 1},
		{ordering.EsimQuery{Scope: &other, ICCID: mine[1].Esims[1].ICCID}, 0},
		{ordering.EsimQuery{}, 10},
		{ordering.EsimQuery{OrderID: mine[2].ID}, 2},
	} {
		tc.q.Limit = 100
		page, total, err := s.ListEsims(ctx, tc.q)
		if err != nil || total != tc.want || int64(len(page)) != tc.want {
			t.Errorf("ListEsims(%+v) = %d eSIMs, total %d, %v; want %d", tc.q, len(page), total, err, tc.want)
		}
	}

	for _, p := range []struct {
		limit  int32
		offset int64
	}{{ordering.MaxPageLimit + 1, 0}, {0, 0}, {10, -1}} {
		if _, _, err := s.ListOrders(ctx, ordering.OrderQuery{Scope: &acme, Limit: p.limit, Offset: p.offset}); err == nil {
			t.Errorf("ListOrders(limit %d, offset %d) read a page", p.limit, p.offset)
		}
		if _, _, err := s.ListEsims(ctx, ordering.EsimQuery{Scope: &acme, Limit: p.limit, Offset: p.offset}); err == nil {
			t.Errorf("ListEsims(limit %d, offset %d) read a page", p.limit, p.offset)
		}
	}
}

// Two holders of one key take turns; TryLock fails while it is held and
// succeeds once it is released; other keys are not held up.
func TestLockSerialisesHoldersOfAKey(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	const key = "ordering/key/acme/sandbox/k"
	entered, release := make(chan struct{}), make(chan struct{})
	var inside atomic.Int32
	var wg sync.WaitGroup
	hold := func(ctx context.Context, _ ordering.Locked) error {
		if inside.Add(1) != 1 {
			t.Error("two holders of one lock at once")
		}
		entered <- struct{}{}
		<-release
		inside.Add(-1)
		return nil
	}
	for range 2 {
		wg.Go(func() {
			if err := s.WithLock(ctx, key, hold); err != nil {
				t.Error(err)
			}
		})
	}
	<-entered
	ran, err := s.WithTryLock(ctx, key, func(context.Context, ordering.Locked) error { t.Error("TryLock ran while held"); return nil })
	if ran || err != nil {
		t.Errorf("WithTryLock while held = %t, %v; want false, nil", ran, err)
	}
	if ran, err := s.WithTryLock(ctx, key+"/other", func(context.Context, ordering.Locked) error { return nil }); !ran || err != nil {
		t.Errorf("WithTryLock of another key = %t, %v", ran, err)
	}
	select {
	case <-entered:
		t.Fatal("the second holder entered while the first held the lock")
	case <-time.After(200 * time.Millisecond):
	}
	release <- struct{}{}
	<-entered
	release <- struct{}{}
	wg.Wait()
	if ran, err := s.WithTryLock(ctx, key, func(context.Context, ordering.Locked) error { return nil }); !ran || err != nil {
		t.Errorf("WithTryLock once released = %t, %v", ran, err)
	}

	// A waiter that gives up leaves nothing held.
	entered2, release2 := make(chan struct{}), make(chan struct{})
	go func() {
		_ = s.WithLock(ctx, key, func(context.Context, ordering.Locked) error { close(entered2); <-release2; return nil })
	}()
	<-entered2
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := s.WithLock(short, key, func(context.Context, ordering.Locked) error { t.Error("ran"); return nil }); err == nil {
		t.Error("a waiter past its deadline got the lock")
	}
	close(release2)
	deadline := time.Now().Add(5 * time.Second)
	for {
		ran, err := s.WithTryLock(ctx, key, func(context.Context, ordering.Locked) error { return nil })
		if ran && err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lock stayed held after its holder and a waiter that gave up were gone (%v)", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A holder whose connection dies (its process crashed, its node fell off
// the network and the server noticed) holds nothing any more.
func TestLockDiesWithItsConnection(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t)
	const key = "ordering/order/x"
	pid := make(chan uint32)
	done := make(chan error)
	go func() {
		done <- s.WithLock(ctx, key, func(ctx context.Context, l ordering.Locked) error {
			var p uint32
			if err := pool.QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
				AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&p); err != nil {
				return err
			}
			pid <- p
			// Still holding, as far as this holder knows; its next
			// statement finds its session gone.
			time.Sleep(300 * time.Millisecond)
			_, err := l.OrderByID(ctx, uuid.New())
			return err
		})
	}()
	p := <-pid
	if ran, _ := s.WithTryLock(ctx, key, func(context.Context, ordering.Locked) error { return nil }); ran {
		t.Fatal("TryLock got a held lock")
	}
	if _, err := pool.Exec(ctx, "SELECT pg_terminate_backend($1)", p); err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{})
	go func() {
		_ = s.WithLock(ctx, key, func(context.Context, ordering.Locked) error { close(got); return nil })
	}()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the lock outlived its holder's connection")
	}
	if err := <-done; err == nil || errors.Is(err, ordering.ErrNotFound) {
		t.Errorf("the holder whose connection died went on: %v", err)
	}
}

// Callers waiting for a key hold no connection: however many retries of
// one order queue behind it, other keys are locked and reads answered
// from a pool of four, and the waiters all get their turn once the
// holder is done.
func TestWaitersHoldNoConnection(t *testing.T) {
	ctx := context.Background()
	base, pool := newStore(t)
	small, err := libpostgres.Connect(ctx, pool.Config().ConnString()+"&pool_max_conns=4")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(small.Close)
	s := postgres.NewStore(small, 2)
	o := insert(t, base, newOrder(acme, "k", at(0)))
	provider := sandbox.New(records(s), sandbox.DefaultSMDPAddress)

	held, hold := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release) // before the pool closes, should the test stop early
	var wg sync.WaitGroup
	wg.Go(func() {
		err := s.WithLock(ctx, "k", func(context.Context, ordering.Locked) error {
			close(held)
			<-hold
			return nil
		})
		if err != nil {
			t.Errorf("holder: %v", err)
		}
	})
	<-held
	const waiters = 20
	var finished atomic.Int32
	for range waiters {
		wg.Go(func() {
			err := s.WithLock(ctx, "k", func(ctx context.Context, l ordering.Locked) error {
				if _, err := l.OrderByID(ctx, o.ID); err != nil {
					return err
				}
				_, err := provider.Issue(ctx, l, ordering.IssueRequest{OrderID: o.ID, Quantity: 2})
				return err
			})
			if err != nil {
				t.Errorf("waiter: %v", err)
				return
			}
			finished.Add(1)
		})
	}
	waitFor(t, func() bool { return postgres.Waiters(s, "k") == waiters })

	// Every waiter is waiting: the pool still serves everyone else.
	other, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.WithLock(other, "another order", func(ctx context.Context, l ordering.Locked) error {
		_, err := l.OrderByID(ctx, o.ID)
		return err
	}); err != nil {
		t.Errorf("another key while %d callers wait for k: %v", waiters, err)
	}
	if _, err := s.Order(other, nil, o.ID); err != nil {
		t.Errorf("a read while %d callers wait for k: %v", waiters, err)
	}
	if n := small.Stat().AcquiredConns(); n > 2 {
		t.Errorf("%d connections acquired while one holder holds k: the waiters hold some", n)
	}
	release()
	wg.Wait()
	if finished.Load() != waiters {
		t.Errorf("%d of %d waiters finished", finished.Load(), waiters)
	}
	if n := postgres.Waiters(s, "k"); n != 0 {
		t.Errorf("%d waiters left registered", n)
	}
}

// A wait that its context ends is ErrBusy, whether for the key or for a
// holder's place, and leaves nothing held.
func TestWaitsEndAsBusy(t *testing.T) {
	ctx := context.Background()
	_, pool := newStore(t)
	s := postgres.NewStore(pool, 1)
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- s.WithLock(ctx, "k", func(context.Context, ordering.Locked) error { close(held); <-release; return nil })
	}()
	<-held
	for _, key := range []string{"k", "another key, no place free"} {
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := s.WithLock(short, key, func(context.Context, ordering.Locked) error { t.Errorf("%s: ran", key); return nil })
		cancel()
		if !errors.Is(err, ordering.ErrBusy) {
			t.Errorf("%s: %v, want ErrBusy", key, err)
		}
		if ran, err := s.WithTryLock(ctx, key, func(context.Context, ordering.Locked) error { return nil }); ran || err != nil {
			t.Errorf("%s: WithTryLock = %t, %v while the one place is held", key, ran, err)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ran, err := s.WithTryLock(ctx, "another key, no place free", func(context.Context, ordering.Locked) error { return nil }); !ran || err != nil {
		t.Errorf("WithTryLock once the place is free = %t, %v", ran, err)
	}
}

// A scope's places in flight are shared by every replica (every Store on
// the database), end with their holder, and locking one takes no other:
// the query's filter runs under its LIMIT.
func TestInFlightPlacesPerScope(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t)
	replica := postgres.NewStore(pool, 0)
	type holder struct {
		claimed chan error
		release chan struct{}
		done    chan error
	}
	hold := func(st *postgres.Store, key string, scope ordering.Scope) holder {
		h := holder{make(chan error, 1), make(chan struct{}), make(chan error, 1)}
		go func() {
			h.done <- st.WithLock(ctx, key, func(ctx context.Context, l ordering.Locked) error {
				err := l.ClaimInFlight(ctx, scope, 2)
				h.claimed <- err
				<-h.release
				return err
			})
		}()
		return h
	}
	twoKeyLocks := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a, b := hold(s, "a", acme), hold(replica, "b", acme)
	for _, h := range []holder{a, b} {
		if err := <-h.claimed; err != nil {
			t.Fatalf("claim within the cap: %v", err)
		}
	}
	c := hold(s, "c", acme)
	if err := <-c.claimed; !errors.Is(err, ordering.ErrTooManyInFlight) {
		t.Errorf("a third order of the scope: %v, want ErrTooManyInFlight", err)
	}
	close(c.release)
	if err := <-c.done; !errors.Is(err, ordering.ErrTooManyInFlight) {
		t.Errorf("WithLock = %v", err)
	}
	if n := twoKeyLocks(); n != 2 {
		t.Errorf("%d places locked, want 2: a claim that found none took some", n)
	}
	other := hold(replica, "d", ordering.Scope{AccountID: acme.AccountID, Environment: ordering.Live})
	if err := <-other.claimed; err != nil {
		t.Errorf("the same account's other environment: %v", err)
	}
	close(a.release)
	if err := <-a.done; err != nil {
		t.Fatal(err)
	}
	e := hold(s, "e", acme)
	if err := <-e.claimed; err != nil {
		t.Errorf("a place freed by its holder: %v", err)
	}
	for _, h := range []holder{b, other, e} {
		close(h.release)
		<-h.done
	}
	if n := twoKeyLocks(); n != 0 {
		t.Errorf("%d places still locked after every holder ended", n)
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSandboxAllocationIsIdempotent(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t)
	o := newOrder(acme, "k", at(0))
	o.Quantity = 5
	o.TotalMinor = 5 * o.UnitMinor
	insert(t, s, o)
	p := sandbox.New(records(s), "smdp.example.invalid")
	req := ordering.IssueRequest{OrderID: o.ID, Environment: ordering.Sandbox, Quantity: 5}
	first, err := p.Issue(ctx, nil, req)
	if err != nil || len(first) != 5 {
		t.Fatalf("Issue = %v, %v", first, err)
	}
	again, err := p.Issue(ctx, nil, req)
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		if first[i] != again[i] {
			t.Errorf("profile %d: %+v, then %+v", i, first[i], again[i])
		}
		if first[i].SMDPAddress != "smdp.example.invalid" {
			t.Errorf("SM-DP+ address %q", first[i].SMDPAddress)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM sandbox_profiles WHERE order_id = $1", o.ID).Scan(&n); err != nil || n != 5 {
		t.Errorf("%d allocations stored (%v), want 5", n, err)
	}
	req.CustomerReference = sandbox.ProviderErrorReference
	if _, err := p.Issue(ctx, nil, req); !errors.Is(err, ordering.ErrProviderFailed) {
		t.Errorf("the trigger: %v, want ErrProviderFailed", err)
	}
}

// ICCIDs are 19 digits, 89 first, pass Luhn and are never handed out
// twice, however many orders allocate at once.
func TestSandboxICCIDsAreValidAndUnique(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	p := sandbox.New(records(s), sandbox.DefaultSMDPAddress)
	const orders, each = 16, 25
	var mu sync.Mutex
	iccids, matching := map[string]bool{}, map[string]bool{}
	var wg sync.WaitGroup
	for range orders {
		o := newOrder(acme, "", at(0))
		o.Quantity, o.TotalMinor = each, each*o.UnitMinor
		insert(t, s, o)
		wg.Go(func() {
			profiles, err := p.Issue(ctx, nil, ordering.IssueRequest{OrderID: o.ID, Quantity: each})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, pr := range profiles {
				if len(pr.ICCID) != 19 || !strings.HasPrefix(pr.ICCID, "89") || !ordering.LuhnValid(pr.ICCID) || !ordering.ValidICCID(pr.ICCID) {
					t.Errorf("ICCID %q", pr.ICCID)
				}
				if iccids[pr.ICCID] || matching[pr.MatchingID] {
					t.Errorf("handed out twice: %s / %s", pr.ICCID, pr.MatchingID)
				}
				iccids[pr.ICCID], matching[pr.MatchingID] = true, true
			}
		})
	}
	wg.Wait()
	if len(iccids) != orders*each {
		t.Errorf("%d ICCIDs, want %d", len(iccids), orders*each)
	}
	if got := sandbox.ICCID(sandbox.MaxSerial); len(got) != 19 || !ordering.ValidICCID(got) {
		t.Errorf("ICCID(MaxSerial) = %q", got)
	}
}

// The schema defends its invariants even against writers that skip the
// domain.
func TestSchemaConstraints(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t)
	pending := insert(t, s, newOrder(acme, "p", at(0)))
	done := complete(t, s, insert(t, s, newOrder(acme, "c", at(0))))
	failed := insert(t, s, newOrder(acme, "f", at(0)))
	locked(t, s, func(ctx context.Context, l ordering.Locked) error {
		if err := l.MarkFailing(ctx, failed.ID, ordering.OrderError{Code: "provider_error", Message: "x"}); err != nil {
			return err
		}
		return l.MarkFailed(ctx, failed.ID, event(ordering.EventOrderFailed, failed.ID))
	})

	good := sandbox.ICCID(999_999)
	bad := good[:18] + string('0'+(good[18]-'0'+1)%10)
	// An eSIM like one of the completed order's, with what each case sets.
	esimSQL := func(orderID, accountID, position, iccid string) string {
		return "INSERT INTO esims SELECT gen_random_uuid(), " + orderID + ", " + accountID + ", environment, " + position +
			", plan_name, '" + iccid + "', 'X', 's', repeat('a', 43), status, validity_days, unlimited, total_bytes, 0, now(), now()" +
			" FROM esims WHERE order_id = $1 AND $2::uuid IS NOT NULL LIMIT 1"
	}
	for name, tc := range map[string]struct {
		sql  string
		args []any
	}{
		"status":                                      {"UPDATE orders SET status = 'lost' WHERE id = $1", []any{pending.ID}},
		"completed back to pending":                   {"UPDATE orders SET status = 'pending' WHERE id = $1", []any{done.ID}},
		"failed back to failing":                      {"UPDATE orders SET status = 'failing' WHERE id = $1", []any{failed.ID}},
		"failed to completed":                         {"UPDATE orders SET status = 'completed', error_code = NULL, error_message = NULL WHERE id = $1", []any{failed.ID}},
		"pending straight to failed":                  {"UPDATE orders SET status = 'failed', error_code = 'provider_error', error_message = 'x' WHERE id = $1", []any{pending.ID}},
		"completed without eSIMs":                     {"UPDATE orders SET status = 'completed' WHERE id = $1", []any{pending.ID}},
		"reprice":                                     {"UPDATE orders SET unit_minor = 1, total_minor = 2 WHERE id = $1", []any{pending.ID}},
		"move to another account":                     {"UPDATE orders SET account_id = $2 WHERE id = $1", []any{pending.ID, other.AccountID}},
		"rewrite the error":                           {"UPDATE orders SET error_message = 'y' WHERE id = $1", []any{failed.ID}},
		"total not unit x quantity":                   {"UPDATE orders SET total_minor = 1 WHERE id = $1", []any{pending.ID}},
		"quantity 51":                                 {"UPDATE orders SET quantity = 51, total_minor = 51 * unit_minor WHERE id = $1", []any{pending.ID}},
		"delete a completed order":                    {"DELETE FROM orders WHERE id = $1", []any{done.ID}},
		"delete a failed order":                       {"DELETE FROM orders WHERE id = $1", []any{failed.ID}},
		"delete an eSIM":                              {"DELETE FROM esims WHERE id = $1", []any{done.Esims[0].ID}},
		"change an ICCID":                             {"UPDATE esims SET iccid = '89440000000000000000' WHERE id = $1", []any{done.Esims[0].ID}},
		"eSIM on a pending order":                     {esimSQL("$2", "account_id", "0", good), []any{done.ID, pending.ID}},
		"eSIM in another scope":                       {esimSQL("order_id", "'"+other.AccountID.String()+"'", "2", good), []any{done.ID, done.ID}},
		"third eSIM of two":                           {esimSQL("order_id", "account_id", "2", good), []any{done.ID, done.ID}},
		"ICCID failing Luhn":                          {esimSQL("order_id", "account_id", "2", bad), []any{done.ID, done.ID}},
		"ICCID of 20 digits":                          {esimSQL("order_id", "account_id", "2", good+"0"), []any{done.ID, done.ID}},
		"a $ in the matching id":                      {"UPDATE esims SET matching_id = 'A$B' WHERE id = $1", []any{done.Esims[0].ID}},
		"an order without a key or a fingerprint":     {"INSERT INTO orders (id, account_id, environment, fingerprint, plan_id, plan_name, per_day, unlimited, total_bytes, validity_days, quantity, days, currency, unit_minor, total_minor, status, created_at) VALUES ($1, $2, 'sandbox', 'short', gen_random_uuid(), 'x', false, false, 1, 1, 1, 0, 'USD', 1, 1, 'pending', now())", []any{uuid.New(), acme.AccountID}},
		"days on a fixed plan":                        {"INSERT INTO orders (id, account_id, environment, fingerprint, plan_id, plan_name, per_day, unlimited, total_bytes, validity_days, quantity, days, currency, unit_minor, total_minor, status, created_at) VALUES ($1, $2, 'sandbox', sha256('x'), gen_random_uuid(), 'x', false, false, 1, 1, 1, 3, 'USD', 1, 1, 'pending', now())", []any{uuid.New(), acme.AccountID}},
		"per day without unlimited":                   {"INSERT INTO orders (id, account_id, environment, fingerprint, plan_id, plan_name, per_day, unlimited, total_bytes, validity_days, quantity, days, currency, unit_minor, total_minor, status, created_at) VALUES ($1, $2, 'sandbox', sha256('x'), gen_random_uuid(), 'x', true, false, 1, 3, 1, 3, 'USD', 1, 1, 'pending', now())", []any{uuid.New(), acme.AccountID}},
		"an order whose total is not unit x quantity": {"INSERT INTO orders (id, account_id, environment, fingerprint, plan_id, plan_name, per_day, unlimited, total_bytes, validity_days, quantity, days, currency, unit_minor, total_minor, status, created_at) VALUES ($1, $2, 'sandbox', sha256('x'), gen_random_uuid(), 'x', false, false, 1, 1, 3, 0, 'USD', 100, 200, 'pending', now())", []any{uuid.New(), acme.AccountID}},
		"a free order":                                {"INSERT INTO orders (id, account_id, environment, fingerprint, plan_id, plan_name, per_day, unlimited, total_bytes, validity_days, quantity, days, currency, unit_minor, total_minor, status, created_at) VALUES ($1, $2, 'sandbox', sha256('x'), gen_random_uuid(), 'x', false, false, 1, 1, 1, 0, 'USD', 0, 0, 'pending', now())", []any{uuid.New(), acme.AccountID}},
		"a key with a newline":                        {"INSERT INTO orders (id, account_id, environment, idempotency_key, fingerprint, plan_id, plan_name, per_day, unlimited, total_bytes, validity_days, quantity, days, currency, unit_minor, total_minor, status, created_at) VALUES ($1, $2, 'sandbox', E'a\\nb', sha256('x'), gen_random_uuid(), 'x', false, false, 1, 1, 1, 0, 'USD', 1, 1, 'pending', now())", []any{uuid.New(), acme.AccountID}},
		"a failed order without error":                {"INSERT INTO orders (id, account_id, environment, fingerprint, plan_id, plan_name, per_day, unlimited, total_bytes, validity_days, quantity, days, currency, unit_minor, total_minor, status, created_at) VALUES ($1, $2, 'sandbox', sha256('x'), gen_random_uuid(), 'x', false, false, 1, 1, 1, 0, 'USD', 1, 1, 'failed', now())", []any{uuid.New(), acme.AccountID}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pool.Exec(ctx, tc.sql, tc.args...)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code[:2] != "23" {
				t.Errorf("err = %v, want an integrity constraint violation (class 23)", err)
			}
			if testing.Verbose() {
				t.Log(err)
			}
		})
	}
	// What may change still can.
	if _, err := pool.Exec(ctx, "UPDATE esims SET used_bytes = 1024, data_updated_at = now() WHERE id = $1", done.Esims[0].ID); err != nil {
		t.Errorf("recording data use: %v", err)
	}
	if got, _ := s.Order(ctx, &acme, done.ID); got.Status != ordering.StatusCompleted || len(got.Esims) != 2 {
		t.Errorf("the completed order after the attempts: %+v", got)
	}
}

func TestMigrationsGoDownAndUpAgain(t *testing.T) {
	pgtest.CheckMigrationsReversible(t, postgres.Migrations)
}

// The pool holds a connection per order in flight unless the URL says
// otherwise, and every session tells the server to notice a vanished
// client within about a minute.
func TestPoolDefaults(t *testing.T) {
	for url, want := range map[string]int32{
		"postgres://u@h/db":                       postgres.DefaultMaxConns,
		"postgres://u@h/db?pool_max_conns=3":      3,
		"postgres://u@h/db?tcp_keepalives_idle=5": postgres.DefaultMaxConns,
	} {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		postgres.WithPoolDefaults()(cfg)
		if cfg.MaxConns != want {
			t.Errorf("%s: %d connections, want %d", url, cfg.MaxConns, want)
		}
		idle := cfg.ConnConfig.RuntimeParams["tcp_keepalives_idle"]
		if wantIdle := map[bool]string{true: "5", false: "30"}[strings.Contains(url, "idle=5")]; idle != wantIdle {
			t.Errorf("%s: tcp_keepalives_idle %q, want %q", url, idle, wantIdle)
		}
	}
}
