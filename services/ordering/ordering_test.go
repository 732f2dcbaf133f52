package ordering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// The fakes below stand in for Postgres, the catalogue, the wallet and a
// provider, for the domain's own rules; the real ones are tested in
// package postgres and over HTTP in package twirpserver.

// errCrash is what a fault injects: the process "dies" at that step, and
// the step's effects so far stay.
var errCrash = errors.New("injected crash")

// faults counts, per step, how many more times the step fails.
type faults struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *faults) hit(step string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[step] > 0 {
		f.n[step]--
		return true
	}
	return false
}

// memStore is an in-memory Store whose locks are mutexes by key.
type memStore struct {
	mu     sync.Mutex
	locks  map[string]*sync.Mutex
	orders map[uuid.UUID]Order
	// events are the events' publications, in the order written.
	events []OutboxEvent
	// inFlight counts the places each scope's holders claimed.
	inFlight map[Scope]int
	f        *faults
	// searched are the searches asked of it, "orders:" or "esims:" and
	// the prefix.
	searched []string
}

func newMemStore(f *faults) *memStore {
	return &memStore{locks: map[string]*sync.Mutex{}, orders: map[uuid.UUID]Order{}, inFlight: map[Scope]int{}, f: f}
}

func (m *memStore) lock(key string) *sync.Mutex {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.locks[key]
	if !ok {
		l = &sync.Mutex{}
		m.locks[key] = l
	}
	return l
}

func (m *memStore) WithLock(ctx context.Context, key string, fn func(context.Context, Locked) error) error {
	l := m.lock(key)
	l.Lock()
	defer l.Unlock()
	h := &memHolder{memStore: m}
	defer h.release()
	return fn(ctx, h)
}

func (m *memStore) WithTryLock(ctx context.Context, key string, fn func(context.Context, Locked) error) (bool, error) {
	l := m.lock(key)
	if !l.TryLock() {
		return false, nil
	}
	defer l.Unlock()
	h := &memHolder{memStore: m}
	defer h.release()
	return true, fn(ctx, h)
}

// memHolder is the store as one lock holder sees it: its places among
// its scopes' orders in flight go with its lock.
type memHolder struct {
	*memStore
	claimed []Scope
}

func (h *memHolder) ClaimInFlight(_ context.Context, scope Scope, max int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inFlight[scope] >= max {
		return ErrTooManyInFlight
	}
	h.inFlight[scope]++
	h.claimed = append(h.claimed, scope)
	return nil
}

func (h *memHolder) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, scope := range h.claimed {
		h.inFlight[scope]--
	}
}

func (m *memStore) get(match func(Order) bool) (Order, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.orders {
		if match(o) {
			o.Esims = slices.Clone(o.Esims)
			return o, nil
		}
	}
	return Order{}, ErrNotFound
}

func (m *memStore) OrderByKey(_ context.Context, scope Scope, key string) (Order, error) {
	return m.get(func(o Order) bool { return o.Scope == scope && o.IdempotencyKey == key })
}

func (m *memStore) OrderByID(_ context.Context, id uuid.UUID) (Order, error) {
	return m.get(func(o Order) bool { return o.ID == id })
}

func (m *memStore) InsertOrder(_ context.Context, o Order) error {
	if m.f.hit("insert") {
		return errCrash
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, other := range m.orders {
		if other.ID == o.ID || o.IdempotencyKey != "" && other.Scope == o.Scope && other.IdempotencyKey == o.IdempotencyKey {
			return ErrConflict
		}
	}
	m.orders[o.ID] = o
	return nil
}

// move changes an order's status from one to another, as the SQL does.
func (m *memStore) move(step string, id uuid.UUID, from, to Status, change func(*Order)) error {
	if m.f.hit(step) {
		return errCrash
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.orders[id]
	if !ok || o.Status != from {
		return fmt.Errorf("%s: order %s is not %s", step, id, from)
	}
	o.Status = to
	if change != nil {
		change(&o)
	}
	m.orders[id] = o
	return nil
}

func (m *memStore) DeletePending(_ context.Context, id uuid.UUID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.orders[id]; !ok || o.Status != StatusPending {
		return fmt.Errorf("order %s is not pending", id)
	}
	delete(m.orders, id)
	return nil
}

func (m *memStore) MarkFailing(_ context.Context, id uuid.UUID, e OrderError) error {
	return m.move("markFailing", id, StatusPending, StatusFailing, func(o *Order) { o.Error = &e })
}

// MarkFailed and Complete write the event with the status, under the
// store's mutex, as the SQL does in one transaction.
func (m *memStore) MarkFailed(_ context.Context, id uuid.UUID, e Event) error {
	return m.move("markFailed", id, StatusFailing, StatusFailed, func(*Order) { m.events = append(m.events, OutboxEvent{Event: e}) })
}

func (m *memStore) Complete(_ context.Context, id uuid.UUID, esims []Esim, e Event) error {
	// The ICCID is unique across eSIMs, as the SQL's index makes it.
	m.mu.Lock()
	for _, o := range m.orders {
		for _, have := range o.Esims {
			if slices.ContainsFunc(esims, func(e Esim) bool { return e.ICCID == have.ICCID }) {
				m.mu.Unlock()
				return ErrICCIDInUse
			}
		}
	}
	m.mu.Unlock()
	return m.move("complete", id, StatusPending, StatusCompleted, func(o *Order) {
		o.Esims = slices.Clone(esims)
		m.events = append(m.events, OutboxEvent{Event: e})
	})
}

func (m *memStore) Order(_ context.Context, scope *Scope, id uuid.UUID) (Order, error) {
	return m.get(func(o Order) bool { return o.ID == id && (scope == nil || o.Scope == *scope) })
}

// Orders returns every order of a looked-up id, whatever its scope: more
// than the real store, so the domain's own matching of scopes is tested.
func (m *memStore) Orders(_ context.Context, lookups []OrderLookup) ([]Order, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Order
	for _, l := range lookups {
		if o, ok := m.orders[l.ID]; ok {
			out = append(out, o)
		}
	}
	return out, nil
}

func (m *memStore) ListOrders(_ context.Context, q OrderQuery) ([]Order, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Order
	for _, o := range m.orders {
		if q.Scope == nil || o.Scope == *q.Scope {
			out = append(out, o)
		}
	}
	return out, int64(len(out)), nil
}

func (m *memStore) Esim(context.Context, *Scope, uuid.UUID) (Esim, error) { return Esim{}, ErrNotFound }

func (m *memStore) ListEsims(context.Context, EsimQuery) ([]Esim, int64, error) { return nil, 0, nil }

// SearchOrders matches references only, in no particular order: enough
// for the domain's rules around it.
func (m *memStore) SearchOrders(_ context.Context, q SearchQuery) ([]Order, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.searched = append(m.searched, "orders:"+q.Prefix)
	var out []Order
	for _, o := range m.orders {
		if o.Scope == q.Scope && o.Kind == KindEsims && strings.HasPrefix(o.Customer.Reference, q.Prefix) && len(out) < int(q.Limit) {
			out = append(out, o)
		}
	}
	return out, nil
}

func (m *memStore) SearchEsims(_ context.Context, q SearchQuery) ([]Esim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.searched = append(m.searched, "esims:"+q.Prefix)
	return nil, nil
}

func (m *memStore) EsimByQRToken(_ context.Context, token string) (Esim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.orders {
		for _, e := range o.Esims {
			if e.QRToken == token {
				return e, nil
			}
		}
	}
	return Esim{}, ErrNotFound
}

func (m *memStore) UnfinishedOrders(_ context.Context, before time.Time, limit int32) ([]Order, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Order
	for _, o := range m.orders {
		if !o.Status.Finished() && o.CreatedAt.Before(before) && len(out) < int(limit) {
			out = append(out, o)
		}
	}
	return out, nil
}

type fakeCatalogue struct {
	mu    sync.Mutex
	plans map[uuid.UUID]Plan
	calls int
}

func (c *fakeCatalogue) Plan(_ context.Context, id uuid.UUID, currency Currency) (Plan, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	p, ok := c.plans[id]
	if !ok || currency != USD {
		return Plan{}, ErrNotFound
	}
	return p, nil
}

// fakeWallet keeps the wallet's promises: a movement is idempotent by its
// reference, a refused debit moves nothing, a refund happens at most once.
type fakeWallet struct {
	mu       sync.Mutex
	f        *faults
	balance  map[Scope]int64
	debits   map[string]int64 // by reference
	refunds  map[string]int64
	attempts int
}

func newFakeWallet(f *faults) *fakeWallet {
	return &fakeWallet{f: f, balance: map[Scope]int64{}, debits: map[string]int64{}, refunds: map[string]int64{}}
}

func (w *fakeWallet) Debit(_ context.Context, scope Scope, currency Currency, amount int64, ref string) error {
	if w.f.hit("debit.before") {
		return errCrash
	}
	w.mu.Lock()
	w.attempts++
	if _, done := w.debits[ref]; !done {
		if currency != USD {
			w.mu.Unlock()
			return &ValidationError{Field: "currency", Reason: "must be USD, the currency the balance is held in"}
		}
		if w.balance[scope] < amount {
			w.mu.Unlock()
			return ErrInsufficientFunds
		}
		w.balance[scope] -= amount
		w.debits[ref] = amount
	}
	w.mu.Unlock()
	if w.f.hit("debit.after") {
		return errCrash
	}
	return nil
}

func (w *fakeWallet) Refund(_ context.Context, scope Scope, ref string) error {
	if w.f.hit("refund.before") {
		return errCrash
	}
	w.mu.Lock()
	amount, ok := w.debits[ref]
	if !ok {
		w.mu.Unlock()
		return errors.New("refund: no such debit")
	}
	if _, done := w.refunds[ref]; !done {
		w.balance[scope] += amount
		w.refunds[ref] = amount
	}
	w.mu.Unlock()
	if w.f.hit("refund.after") {
		return errCrash
	}
	return nil
}

// fakeProvider issues by order id, once: an order issued again gets the
// same profiles.
type fakeProvider struct {
	mu     sync.Mutex
	f      *faults
	issued map[uuid.UUID][]Profile
	next   int64
	calls  int
}

func newFakeProvider(f *faults) *fakeProvider {
	return &fakeProvider{f: f, issued: map[uuid.UUID][]Profile{}}
}

func (p *fakeProvider) Issue(_ context.Context, _ Locked, req IssueRequest) ([]Profile, error) {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	if p.f.hit("issue.before") {
		return nil, errCrash
	}
	if req.CustomerReference == "fail" || p.f.hit("issue.refuse") {
		return nil, fmt.Errorf("%w: test provider refused", ErrProviderFailed)
	}
	p.mu.Lock()
	profiles, ok := p.issued[req.OrderID]
	if !ok {
		for range req.Quantity {
			if req.CustomerReference != "reissue" {
				p.next++ // "reissue" gets the last ICCID again
			}
			profiles = append(profiles, Profile{ICCID: testICCID(p.next), MatchingID: fmt.Sprintf("M-%d", p.next), SMDPAddress: "smdp.test.invalid"})
		}
		p.issued[req.OrderID] = profiles
	}
	p.mu.Unlock()
	if p.f.hit("issue.after") {
		return nil, errCrash
	}
	return slices.Clone(profiles), nil
}

// testICCID is a valid ICCID for n.
func testICCID(n int64) string {
	body := fmt.Sprintf("8944%014d", n)
	for d := '0'; d <= '9'; d++ {
		if LuhnValid(body + string(d)) {
			return body + string(d)
		}
	}
	panic("no check digit")
}

var (
	fixedPlan  = Plan{ID: uuid.MustParse("0195f0c4-1c2d-7abc-8def-000000000001"), Name: "Japan 5 GB, 30 days", Type: PlanFixed, TotalBytes: 5 << 30, ValidityDays: 30, Price: 1650}
	perDayPlan = Plan{ID: uuid.MustParse("0195f0c4-1c2d-7abc-8def-000000000002"), Name: "Japan Unlimited, per day", Type: PlanPerDay, Unlimited: true, Price: 650}
	scope      = Scope{AccountID: uuid.MustParse("0195f0c4-1c2d-7abc-8def-0000000000aa"), Environment: Sandbox}
)

type fixture struct {
	svc      *Service
	store    *memStore
	wallet   *fakeWallet
	provider *fakeProvider
	cat      *fakeCatalogue
	f        *faults
	clock    *time.Time
}

func newFixture(t *testing.T, balance int64) *fixture {
	t.Helper()
	f := &faults{n: map[string]int{}}
	fx := &fixture{store: newMemStore(f), wallet: newFakeWallet(f), provider: newFakeProvider(f), f: f,
		cat: &fakeCatalogue{plans: map[uuid.UUID]Plan{fixedPlan.ID: fixedPlan, perDayPlan.ID: perDayPlan}}}
	fx.wallet.balance[scope] = balance
	fx.svc = NewService(Deps{Store: fx.store, Catalogue: fx.cat, Wallet: fx.wallet,
		Providers: map[Environment]Provider{Sandbox: fx.provider}, QRBaseURL: "https://api.example.com/qr/", OrderTimeout: time.Minute})
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	fx.clock = &now
	fx.svc.now = func() time.Time { return *fx.clock }
	return fx
}

func ptr[T any](v T) *T { return &v }

func order(plan Plan, key string) NewOrder {
	return NewOrder{Scope: scope, Currency: USD, IdempotencyKey: key, PlanID: plan.ID.String(), Quantity: ptr[int32](2),
		Customer: Customer{Name: "Ada Lovelace", Email: "ada@example.com", Reference: "BK-1"}}
}

// checkMoney fails unless the order ended completed xor failed-and-refunded,
// with exactly one debit of its total and at most one refund, and the
// balance moved by what the order kept.
func (fx *fixture) checkMoney(t *testing.T, o Order, startBalance int64) {
	t.Helper()
	ref := o.ID.String()
	debit, debited := fx.wallet.debits[ref]
	refund, refunded := fx.wallet.refunds[ref]
	stored, err := fx.store.OrderByID(context.Background(), o.ID)
	if err != nil {
		t.Fatalf("order %s is gone: %v", o.ID, err)
	}
	switch stored.Status {
	case StatusCompleted:
		if !debited || debit != o.TotalMinor || refunded || len(stored.Esims) != int(o.Quantity) {
			t.Errorf("completed order: debit %d (%t), refund %t, %d eSIMs; want one debit of %d, no refund, %d eSIMs",
				debit, debited, refunded, len(stored.Esims), o.TotalMinor, o.Quantity)
		}
		if got := fx.wallet.balance[scope]; got != startBalance-o.TotalMinor {
			t.Errorf("balance %d, want %d", got, startBalance-o.TotalMinor)
		}
	case StatusFailed:
		if !debited || !refunded || refund != debit || len(stored.Esims) != 0 || stored.Error == nil {
			t.Errorf("failed order: debit %d (%t), refund %d (%t), %d eSIMs, error %v; want refunded in full, no eSIMs, an error",
				debit, debited, refund, refunded, len(stored.Esims), stored.Error)
		}
		if got := fx.wallet.balance[scope]; got != startBalance {
			t.Errorf("balance %d, want %d back", got, startBalance)
		}
	default:
		t.Errorf("order ended %s, want completed or failed", stored.Status)
	}
	if n := len(fx.provider.issued[o.ID]); n != 0 && n != int(o.Quantity) {
		t.Errorf("provider issued %d profiles for %d eSIMs", n, o.Quantity)
	}
	fx.checkEvent(t, stored)
}

// checkEvent fails unless the finished order o wrote exactly one event,
// of its final status.
func (fx *fixture) checkEvent(t *testing.T, o Order) {
	t.Helper()
	want := map[Status]EventType{StatusCompleted: EventOrderCompleted, StatusFailed: EventOrderFailed}[o.Status]
	var got []Event
	fx.store.mu.Lock()
	for _, e := range fx.store.events {
		if e.OrderID == o.ID {
			got = append(got, e.Event)
		}
	}
	fx.store.mu.Unlock()
	if len(got) != 1 || got[0].Type != want {
		t.Errorf("order %s (%s) wrote events %+v; want one %s", o.ID, o.Status, got, want)
	}
}

func TestCreateOrderCompletesAndReplays(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, 10_000)
	in := order(fixedPlan, "key-1")
	got, err := fx.svc.CreateOrder(ctx, in)
	if err != nil {
		t.Fatalf("CreateOrder: %v", err)
	}
	o := got.Order
	if got.Replayed || o.Status != StatusCompleted || o.UnitMinor != 1650 || o.TotalMinor != 3300 || o.Days != 0 || o.PerDay ||
		o.Quantity != 2 || o.ValidityDays != 30 || len(o.Esims) != 2 || o.Error != nil {
		t.Fatalf("order = %+v", o)
	}
	if o.ID.Version() != 7 {
		t.Errorf("order id %s is not a UUID v7", o.ID)
	}
	fx.checkMoney(t, o, 10_000)

	e := o.Esims[0]
	if e.ID.Version() != 7 || e.Status != "ALLOCATED" || e.PlanName != fixedPlan.Name || e.ValidityDays != 30 ||
		e.Data != (EsimData{TotalBytes: 5 << 30, UpdatedAt: e.CreatedAt}) || !ValidICCID(e.ICCID) {
		t.Errorf("eSIM = %+v", e)
	}
	wantCode := "LPA:1$smdp.test.invalid$" + e.MatchingID
	if e.ActivationCode != wantCode || e.QRCodeURL != "https://api.example.com/qr/"+e.QRToken+".png" || len(e.QRToken) != 43 {
		t.Errorf("activation code %q, QR URL %q", e.ActivationCode, e.QRCodeURL)
	}
	if e.Install.IOSUniversalLink != "https://esimsetup.apple.com/esim_qrcode_provisioning?carddata="+url.QueryEscape(wantCode) ||
		e.Install.AndroidUniversalLink != "https://esimsetup.android.com/esim_qrcode_provisioning?carddata="+url.QueryEscape(wantCode) {
		t.Errorf("universal links %+v", e.Install)
	}
	for _, want := range []string{"SM-DP+ Address: smdp.test.invalid", "Activation Code: " + e.MatchingID, wantCode, "Settings > Mobile Service", "Settings > Network & internet > SIMs"} {
		if !strings.Contains(e.Install.Instructions, want) {
			t.Errorf("instructions lack %q:\n%s", want, e.Install.Instructions)
		}
	}
	if o.Esims[0].QRToken == o.Esims[1].QRToken || o.Esims[0].ICCID == o.Esims[1].ICCID {
		t.Error("two eSIMs share a QR token or an ICCID")
	}
	code, err := fx.svc.ActivationCode(ctx, e.QRToken)
	if err != nil || code != wantCode {
		t.Errorf("ActivationCode = %q, %v; want %q", code, err, wantCode)
	}

	again, err := fx.svc.CreateOrder(ctx, in)
	if err != nil || !again.Replayed || again.Order.ID != o.ID || len(again.Order.Esims) != 2 || again.Order.Esims[0].ActivationCode != wantCode {
		t.Fatalf("replay = %+v, %v; want the same order, replayed", again, err)
	}
	if fx.wallet.attempts != 1 || fx.provider.calls != 1 || fx.cat.calls != 1 {
		t.Errorf("replay reached the wallet, provider or catalogue: %d debits, %d issues, %d plan lookups", fx.wallet.attempts, fx.provider.calls, fx.cat.calls)
	}

	// Without a key there is no replay protection: a second order.
	in.IdempotencyKey = ""
	first, err1 := fx.svc.CreateOrder(ctx, in)
	second, err2 := fx.svc.CreateOrder(ctx, in)
	if err1 != nil || err2 != nil || first.Order.ID == second.Order.ID || first.Replayed || second.Replayed {
		t.Errorf("two calls without a key: %v, %v, %v, %v; want two orders", first.Order.ID, second.Order.ID, err1, err2)
	}
}

func TestPricing(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name                 string
		plan                 Plan
		quantity, days       *int32
		unit, total          int64
		wantDays, wantValid  int32
		wantPerDay, wantFail bool
	}{
		{"fixed, defaults", fixedPlan, nil, nil, 1650, 1650, 0, 30, false, false},
		{"fixed, days 1", fixedPlan, ptr[int32](3), ptr[int32](1), 1650, 4950, 0, 30, false, false},
		{"fixed, days 2", fixedPlan, nil, ptr[int32](2), 0, 0, 0, 0, false, true},
		{"per day, default 1 day", perDayPlan, nil, nil, 650, 650, 1, 1, true, false},
		{"per day, 7 days x 3", perDayPlan, ptr[int32](3), ptr[int32](7), 4550, 13650, 7, 7, true, false},
		{"per day, 365 days x 50", perDayPlan, ptr[int32](50), ptr[int32](365), 237250, 11862500, 365, 365, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, 100_000_000)
			in := order(tc.plan, "k")
			in.Quantity, in.Days = tc.quantity, tc.days
			got, err := fx.svc.CreateOrder(ctx, in)
			if tc.wantFail {
				var ve *ValidationError
				if !errors.As(err, &ve) || ve.Field != "days" {
					t.Fatalf("CreateOrder = %v, want invalid days", err)
				}
				if len(fx.store.orders) != 0 || fx.wallet.attempts != 0 {
					t.Error("a refused order was stored or debited")
				}
				return
			}
			o := got.Order
			if err != nil || o.UnitMinor != tc.unit || o.TotalMinor != tc.total || o.Days != tc.wantDays || o.ValidityDays != tc.wantValid ||
				o.PerDay != tc.wantPerDay || o.Esims[0].ValidityDays != tc.wantValid || o.Esims[0].Data.Unlimited != tc.plan.Unlimited {
				t.Errorf("order = %+v, %v; want unit %d, total %d, days %d, validity %d", o, err, tc.unit, tc.total, tc.wantDays, tc.wantValid)
			}
		})
	}
}

func TestMultiplyRefusesOverflow(t *testing.T) {
	if _, ok := multiply(1<<62, 2); ok {
		t.Error("2^62 x 2 did not overflow")
	}
	if v, ok := multiply(1<<31, 1<<31); !ok || v != 1<<62 {
		t.Errorf("2^31 x 2^31 = %d, %t", v, ok)
	}
	fx := newFixture(t, 1<<62)
	huge := fixedPlan
	huge.Price = 1 << 60
	fx.cat.plans[huge.ID] = huge
	in := order(huge, "k")
	in.Quantity = ptr[int32](50)
	if _, err := fx.svc.CreateOrder(context.Background(), in); err == nil || len(fx.store.orders) != 0 {
		t.Errorf("an overflowing total: %v, %d orders", err, len(fx.store.orders))
	}
}

func TestValidation(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	for _, tc := range []struct {
		name  string
		edit  func(*NewOrder)
		field string
	}{
		{"no account", func(n *NewOrder) { n.Scope.AccountID = uuid.Nil }, "scope.account_id"},
		{"no environment", func(n *NewOrder) { n.Scope.Environment = "" }, "scope.environment"},
		{"staging", func(n *NewOrder) { n.Scope.Environment = "staging" }, "scope.environment"},
		{"currency", func(n *NewOrder) { n.Currency = "JPY" }, "currency"},
		{"lower-case currency", func(n *NewOrder) { n.Currency = "usd" }, "currency"},
		{"no plan", func(n *NewOrder) { n.PlanID = "" }, "plan_id"},
		{"plan not a UUID", func(n *NewOrder) { n.PlanID = "jp-5gb" }, "plan_id"},
		{"plan without hyphens", func(n *NewOrder) { n.PlanID = strings.ReplaceAll(fixedPlan.ID.String(), "-", "") }, "plan_id"},
		{"plan in braces", func(n *NewOrder) { n.PlanID = "{" + fixedPlan.ID.String() + "}" }, "plan_id"},
		{"plan as URN", func(n *NewOrder) { n.PlanID = "urn:uuid:" + fixedPlan.ID.String() }, "plan_id"},
		{"quantity 0", func(n *NewOrder) { n.Quantity = ptr[int32](0) }, "quantity"},
		{"quantity 51", func(n *NewOrder) { n.Quantity = ptr[int32](51) }, "quantity"},
		{"quantity -1", func(n *NewOrder) { n.Quantity = ptr[int32](-1) }, "quantity"},
		{"days 0", func(n *NewOrder) { n.Days = ptr[int32](0) }, "days"},
		{"days 366", func(n *NewOrder) { n.Days = ptr[int32](366) }, "days"},
		{"name 121", func(n *NewOrder) { n.Customer.Name = strings.Repeat("é", 121) }, "customer.name"},
		{"name control", func(n *NewOrder) { n.Customer.Name = "Ada\x00" }, "customer.name"},
		{"name bidi", func(n *NewOrder) { n.Customer.Name = "Ada\u202e" }, "customer.name"},
		{"reference 121", func(n *NewOrder) { n.Customer.Reference = long(121) }, "customer.reference"},
		{"reference newline", func(n *NewOrder) { n.Customer.Reference = "BK\n1" }, "customer.reference"},
		{"email without @", func(n *NewOrder) { n.Customer.Email = "ada.example.com" }, "customer.email"},
		{"email with name", func(n *NewOrder) { n.Customer.Email = "Ada <ada@example.com>" }, "customer.email"},
		{"email in brackets", func(n *NewOrder) { n.Customer.Email = "<ada@example.com>" }, "customer.email"},
		{"two emails", func(n *NewOrder) { n.Customer.Email = "ada@example.com, bob@example.com" }, "customer.email"},
		{"email padded", func(n *NewOrder) { n.Customer.Email = " ada@example.com" }, "customer.email"},
		{"email 256", func(n *NewOrder) { n.Customer.Email = long(244) + "@example.com" }, "customer.email"},
		{"key 256", func(n *NewOrder) { n.IdempotencyKey = long(256) }, "Idempotency-Key"},
		{"key with newline", func(n *NewOrder) { n.IdempotencyKey = "a\nb" }, "Idempotency-Key"},
		{"key not ASCII", func(n *NewOrder) { n.IdempotencyKey = "clé" }, "Idempotency-Key"},
		{"key with DEL", func(n *NewOrder) { n.IdempotencyKey = "a\x7f" }, "Idempotency-Key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, 100_000)
			in := order(fixedPlan, "k")
			tc.edit(&in)
			_, err := fx.svc.CreateOrder(context.Background(), in)
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field || ve.Reason == "" {
				t.Fatalf("CreateOrder = %v, want a validation error on %s", err, tc.field)
			}
			if fx.cat.calls != 0 || fx.wallet.attempts != 0 || len(fx.store.orders) != 0 {
				t.Errorf("a statically invalid order reached the catalogue (%d), the wallet (%d) or the store (%d)", fx.cat.calls, fx.wallet.attempts, len(fx.store.orders))
			}
		})
	}

	// What is valid at the edges.
	fx := newFixture(t, 100_000_000)
	in := order(perDayPlan, long(255))
	in.PlanID = strings.ToUpper(perDayPlan.ID.String())
	in.Quantity, in.Days = ptr[int32](50), ptr[int32](365)
	in.Customer = Customer{Name: strings.Repeat("é", 120), Email: long(243) + "@example.com", Reference: "~!" + long(118)}
	if _, err := fx.svc.CreateOrder(context.Background(), in); err != nil {
		t.Errorf("an order at every limit: %v", err)
	}
	in = order(fixedPlan, " !~ printable ASCII ")
	in.Customer = Customer{}
	in.Quantity = nil
	if got, err := fx.svc.CreateOrder(context.Background(), in); err != nil || got.Order.Quantity != 1 {
		t.Errorf("an order with no customer and no quantity: %+v, %v", got.Order, err)
	}
}

func TestUnknownPlanStoresNothing(t *testing.T) {
	fx := newFixture(t, 100_000)
	in := order(fixedPlan, "k")
	in.PlanID = uuid.NewString()
	if _, err := fx.svc.CreateOrder(context.Background(), in); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown plan: %v, want ErrNotFound", err)
	}
	in = order(fixedPlan, "k")
	in.Currency = EUR // the fake catalogue prices in USD only
	if _, err := fx.svc.CreateOrder(context.Background(), in); !errors.Is(err, ErrNotFound) {
		t.Errorf("plan not priced in the currency: %v, want ErrNotFound", err)
	}
	if len(fx.store.orders) != 0 || fx.wallet.attempts != 0 {
		t.Error("an order for a plan not found was stored or debited")
	}
}

func TestIdempotencyKeyWithAnotherRequest(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, 100_000)
	if _, err := fx.svc.CreateOrder(ctx, order(fixedPlan, "k")); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*NewOrder){
		"plan":               func(n *NewOrder) { n.PlanID = perDayPlan.ID.String() },
		"quantity":           func(n *NewOrder) { n.Quantity = ptr[int32](3) },
		"days given":         func(n *NewOrder) { n.Days = ptr[int32](1) },
		"customer.name":      func(n *NewOrder) { n.Customer.Name = "Grace" },
		"customer.email":     func(n *NewOrder) { n.Customer.Email = "grace@example.com" },
		"customer.reference": func(n *NewOrder) { n.Customer.Reference = "BK-2" },
		"shifted fields":     func(n *NewOrder) { n.Customer.Name, n.Customer.Email = "Ada Lovelaceada@example.com", "" },
	} {
		in := order(fixedPlan, "k")
		edit(&in)
		_, err := fx.svc.CreateOrder(ctx, in)
		var ve *ValidationError
		if !errors.Is(err, ErrIdempotencyMismatch) || !errors.As(err, &ve) || ve.Field != "Idempotency-Key" {
			t.Errorf("same key, other %s: %v, want ErrIdempotencyMismatch on Idempotency-Key", name, err)
		}
	}
	if fx.wallet.attempts != 1 || len(fx.store.orders) != 1 {
		t.Errorf("mismatched requests debited (%d attempts) or stored (%d orders)", fx.wallet.attempts, len(fx.store.orders))
	}
	// The quantity's default is part of the request: 1 sent is 1 left out.
	in := order(fixedPlan, "q")
	in.Quantity = nil
	if _, err := fx.svc.CreateOrder(ctx, in); err != nil {
		t.Fatal(err)
	}
	in.Quantity = ptr[int32](1)
	if got, err := fx.svc.CreateOrder(ctx, in); err != nil || !got.Replayed {
		t.Errorf("quantity 1 after quantity left out: %+v, %v; want a replay", got, err)
	}
	// Keys are per account and environment.
	other := order(fixedPlan, "k")
	other.Scope.Environment = Live
	if _, err := fx.svc.CreateOrder(ctx, other); errors.Is(err, ErrIdempotencyMismatch) {
		t.Error("a sandbox key blocked the same key in live")
	}
}

func TestInsufficientFundsDeletesTheOrderAndFreesTheKey(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, 3299)
	in := order(fixedPlan, "k")
	if _, err := fx.svc.CreateOrder(ctx, in); !errors.Is(err, ErrInsufficientFunds) {
		t.Fatalf("CreateOrder = %v, want ErrInsufficientFunds", err)
	}
	if len(fx.store.orders) != 0 || len(fx.wallet.debits) != 0 || fx.wallet.balance[scope] != 3299 {
		t.Fatalf("after insufficient funds: %d orders, %d debits, balance %d", len(fx.store.orders), len(fx.wallet.debits), fx.wallet.balance[scope])
	}
	fx.wallet.balance[scope] += 1
	got, err := fx.svc.CreateOrder(ctx, in)
	if err != nil || got.Replayed || got.Order.Status != StatusCompleted {
		t.Fatalf("after a top-up: %+v, %v; want a new completed order", got, err)
	}
	fx.checkMoney(t, got.Order, 3300)
	if fx.wallet.balance[scope] != 0 {
		t.Errorf("balance %d, want 0", fx.wallet.balance[scope])
	}
}

func TestProviderFailureRefunds(t *testing.T) {
	ctx := context.Background()
	for name, edit := range map[string]func(*NewOrder){
		"provider refuses":     func(n *NewOrder) { n.Customer.Reference = "fail" },
		"no live provider":     func(n *NewOrder) { n.Scope.Environment = Live },
		"provider refuses too": func(n *NewOrder) { n.Customer.Reference = "fail"; n.IdempotencyKey = "" },
	} {
		t.Run(name, func(t *testing.T) {
			fx := newFixture(t, 10_000)
			in := order(fixedPlan, "k")
			edit(&in)
			fx.wallet.balance[in.Scope] = 10_000
			got, err := fx.svc.CreateOrder(ctx, in)
			o := got.Order
			if err != nil || got.Replayed || o.Status != StatusFailed || o.Error == nil || o.Error.Code != "provider_error" || len(o.Esims) != 0 {
				t.Fatalf("CreateOrder = %+v, %v; want a failed order with a provider_error", o, err)
			}
			if o.Scope.Environment == Live && !strings.Contains(o.Error.Message, "no live provider is configured") {
				t.Errorf("message %q does not say no live provider is configured", o.Error.Message)
			}
			if fx.wallet.debits[o.ID.String()] != o.TotalMinor || fx.wallet.refunds[o.ID.String()] != o.TotalMinor || fx.wallet.balance[in.Scope] != 10_000 {
				t.Errorf("money: debit %d, refund %d, balance %d", fx.wallet.debits[o.ID.String()], fx.wallet.refunds[o.ID.String()], fx.wallet.balance[in.Scope])
			}
			if in.IdempotencyKey == "" {
				return
			}
			again, err := fx.svc.CreateOrder(ctx, in)
			if err != nil || !again.Replayed || again.Order.ID != o.ID || again.Order.Status != StatusFailed || *again.Order.Error != *o.Error {
				t.Errorf("replay = %+v, %v; want the same failed order", again, err)
			}
		})
	}
}

// A provider that issues an ICCID another eSIM has (an SM-DP+ that lost
// its state) fails the order for good, refunded, rather than leave it
// pending for retries that would get the same profile.
func TestProviderReissuingAnICCIDFailsTheOrder(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, 10_000)
	first, err := fx.svc.CreateOrder(ctx, order(fixedPlan, "first"))
	if err != nil || first.Order.Status != StatusCompleted {
		t.Fatalf("first order = %+v, %v", first.Order, err)
	}
	in := order(fixedPlan, "again")
	in.Customer.Reference = "reissue"
	got, err := fx.svc.CreateOrder(ctx, in)
	o := got.Order
	if err != nil || o.Status != StatusFailed || o.Error == nil || o.Error.Code != ErrorCodeProvider || len(o.Esims) != 0 {
		t.Fatalf("CreateOrder = %+v, %v; want it failed with a provider_error", o, err)
	}
	if fx.wallet.refunds[o.ID.String()] != o.TotalMinor {
		t.Errorf("refund %d, want %d", fx.wallet.refunds[o.ID.String()], o.TotalMinor)
	}
}

// Every step can be cut short (a crash, a timeout, an outage) with its
// effects so far kept. Whatever step it was, a retry with the same key, or
// the recovery loop, ends the order completed xor failed and refunded,
// with one debit, at most one refund and one set of profiles.
func TestResumeFromEveryInterruptedStep(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults map[string]int
		fail   bool // the provider refuses for good
		want   Status
	}{
		{"debit failed, not applied", map[string]int{"debit.before": 1}, false, StatusCompleted},
		{"debit applied, answer lost", map[string]int{"debit.after": 1}, false, StatusCompleted},
		{"crash after the debit", map[string]int{"issue.before": 1}, false, StatusCompleted},
		{"provider failed for a while", map[string]int{"issue.before": 3}, false, StatusCompleted},
		{"issued, answer lost", map[string]int{"issue.after": 1}, false, StatusCompleted},
		{"crash before completing", map[string]int{"complete": 1}, false, StatusCompleted},
		{"crash when marking failing", map[string]int{"markFailing": 1}, true, StatusFailed},
		{"crash after the provider failed, before the refund", map[string]int{"refund.before": 1}, true, StatusFailed},
		{"refund failed twice", map[string]int{"refund.before": 2}, true, StatusFailed},
		{"refund applied, answer lost", map[string]int{"refund.after": 1}, true, StatusFailed},
		{"crash after the refund", map[string]int{"markFailed": 1}, true, StatusFailed},
		{"one fault after another", map[string]int{"debit.after": 1, "issue.after": 1, "complete": 1}, false, StatusCompleted},
	} {
		for _, how := range []string{"retry", "recovery"} {
			t.Run(tc.name+" then "+how, func(t *testing.T) {
				ctx := context.Background()
				fx := newFixture(t, 10_000)
				maps.Copy(fx.f.n, tc.faults)
				in := order(fixedPlan, "k")
				if tc.fail {
					in.Customer.Reference = "fail"
				}
				if _, err := fx.svc.CreateOrder(ctx, in); !errors.Is(err, errCrash) {
					t.Fatalf("first call = %v, want the injected crash", err)
				}
				stored, err := fx.store.OrderByKey(ctx, scope, "k")
				if err != nil || stored.Status.Finished() {
					t.Fatalf("after the crash: %+v, %v; want the order kept unfinished", stored, err)
				}
				var final Order
				for attempt := 0; attempt < 5; attempt++ {
					if how == "retry" {
						got, err := fx.svc.CreateOrder(ctx, in)
						if err == nil {
							if got.Replayed {
								t.Errorf("the call that finished the order answered replayed")
							}
							final = got.Order
							break
						}
						if !errors.Is(err, errCrash) {
							t.Fatalf("retry %d: %v", attempt, err)
						}
						continue
					}
					*fx.clock = fx.clock.Add(time.Minute)
					rec, err := fx.svc.Recover(ctx, 30*time.Second)
					if err != nil || len(rec) != 1 || rec[0].OrderID != stored.ID || rec[0].Skipped {
						t.Fatalf("Recover = %+v, %v", rec, err)
					}
					if rec[0].Err == nil {
						if rec[0].Status != tc.want {
							t.Errorf("Recover says %s, want %s", rec[0].Status, tc.want)
						}
						final, _ = fx.store.OrderByID(ctx, stored.ID)
						break
					}
				}
				if final.Status != tc.want || final.ID != stored.ID {
					t.Fatalf("final order %s is %s, want %s %s", final.ID, final.Status, stored.ID, tc.want)
				}
				fx.checkMoney(t, final, 10_000)
				if tc.want == StatusCompleted {
					issued := fx.provider.issued[final.ID]
					for i, e := range final.Esims {
						if e.ICCID != issued[i].ICCID {
							t.Errorf("eSIM %d has ICCID %s, not the one first issued, %s", i, e.ICCID, issued[i].ICCID)
						}
					}
				}
				if rec, _ := fx.svc.Recover(ctx, 0); len(rec) != 0 {
					t.Errorf("Recover found %+v left", rec)
				}
				again, err := fx.svc.CreateOrder(ctx, in)
				if err != nil || !again.Replayed || again.Order.ID != final.ID || again.Order.Status != tc.want {
					t.Errorf("replay after the end: %+v, %v", again, err)
				}
				fx.checkMoney(t, final, 10_000)
			})
		}
	}
}

// A caller that hangs up after the processing started does not stop it.
func TestCallerHangingUpDoesNotStopTheOrder(t *testing.T) {
	fx := newFixture(t, 10_000)
	ctx, cancel := context.WithCancel(context.Background())
	fx.svc.wallet = walletFunc{fx.wallet, cancel}
	got, err := fx.svc.CreateOrder(ctx, order(fixedPlan, "k"))
	if err != nil || got.Order.Status != StatusCompleted {
		t.Fatalf("CreateOrder with the caller gone after the debit = %+v, %v; want completed", got.Order, err)
	}
}

// walletFunc cancels the caller's context as soon as a debit is made.
type walletFunc struct {
	*fakeWallet
	cancel func()
}

func (w walletFunc) Debit(ctx context.Context, s Scope, c Currency, amount int64, ref string) error {
	w.cancel()
	if err := ctx.Err(); err != nil {
		return err
	}
	return w.fakeWallet.Debit(ctx, s, c, amount, ref)
}

func TestCurrencyRefusedByTheWalletStoresNothing(t *testing.T) {
	fx := newFixture(t, 100_000)
	fx.cat.plans[fixedPlan.ID] = fixedPlan
	cat := &fakeCatalogueAnyCurrency{fx.cat}
	fx.svc.catalogue = cat
	in := order(fixedPlan, "k")
	in.Currency = GBP
	_, err := fx.svc.CreateOrder(context.Background(), in)
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "currency" {
		t.Fatalf("CreateOrder in a currency the balance is not held in = %v, want invalid currency", err)
	}
	if len(fx.store.orders) != 0 {
		t.Error("the refused order was kept")
	}
}

type fakeCatalogueAnyCurrency struct{ *fakeCatalogue }

func (c *fakeCatalogueAnyCurrency) Plan(ctx context.Context, id uuid.UUID, _ Currency) (Plan, error) {
	return c.fakeCatalogue.Plan(ctx, id, USD)
}

func TestConcurrentCallsWithOneKeyMakeOneOrder(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, 100_000)
	const n = 50
	results := make([]Created, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i], errs[i] = fx.svc.CreateOrder(ctx, order(fixedPlan, "same")) })
	}
	wg.Wait()
	replays := 0
	for i := range n {
		if errs[i] != nil || results[i].Order.ID != results[0].Order.ID {
			t.Fatalf("call %d: %+v, %v", i, results[i].Order.ID, errs[i])
		}
		if results[i].Replayed {
			replays++
		}
	}
	if replays != n-1 || len(fx.wallet.debits) != 1 || fx.wallet.attempts != 1 || len(fx.store.orders) != 1 {
		t.Errorf("%d replays, %d debits (%d attempts), %d orders; want %d, 1, 1, 1", replays, len(fx.wallet.debits), fx.wallet.attempts, len(fx.store.orders), n-1)
	}
}

func TestRecoverSkipsOrdersSomeoneHolds(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, 10_000)
	fx.f.n["issue.before"] = 1
	in := order(fixedPlan, "k")
	if _, err := fx.svc.CreateOrder(ctx, in); !errors.Is(err, errCrash) {
		t.Fatal(err)
	}
	stored, _ := fx.store.OrderByKey(ctx, scope, "k")
	held := fx.store.lock(lockKey(scope, "k", stored.ID))
	held.Lock()
	*fx.clock = fx.clock.Add(time.Hour)
	rec, err := fx.svc.Recover(ctx, time.Minute)
	held.Unlock()
	if err != nil || len(rec) != 1 || !rec[0].Skipped || fx.provider.calls != 1 {
		t.Fatalf("Recover with the order held = %+v, %v (%d issues); want it skipped", rec, err, fx.provider.calls)
	}
	// Young orders are left to their callers.
	if rec, _ := fx.svc.Recover(ctx, 2*time.Hour); len(rec) != 0 {
		t.Errorf("Recover took an order younger than its threshold: %+v", rec)
	}
	rec, err = fx.svc.Recover(ctx, time.Minute)
	if err != nil || len(rec) != 1 || rec[0].Status != StatusCompleted || rec[0].Err != nil {
		t.Fatalf("Recover = %+v, %v", rec, err)
	}
}

func TestRecoverDeletesAnOrderTheWalletRefuses(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, 10_000)
	fx.f.n["debit.before"] = 1
	if _, err := fx.svc.CreateOrder(ctx, order(fixedPlan, "k")); !errors.Is(err, errCrash) {
		t.Fatal(err)
	}
	fx.wallet.balance[scope] = 0 // spent elsewhere meanwhile
	*fx.clock = fx.clock.Add(time.Hour)
	rec, err := fx.svc.Recover(ctx, time.Minute)
	if err != nil || len(rec) != 1 || !rec[0].Deleted || rec[0].Status != "" || !errors.Is(rec[0].Err, ErrInsufficientFunds) {
		t.Fatalf("Recover = %+v, %v; want the order deleted for insufficient funds", rec, err)
	}
	if len(fx.store.orders) != 0 || len(fx.wallet.debits) != 0 {
		t.Errorf("%d orders, %d debits left", len(fx.store.orders), len(fx.wallet.debits))
	}
}

func TestProfilesAreChecked(t *testing.T) {
	for name, p := range map[string]Profile{
		"short ICCID":    {ICCID: "894400000000000001", MatchingID: "M", SMDPAddress: "s"},
		"bad Luhn":       {ICCID: testICCID(1)[:18] + "0", MatchingID: "M", SMDPAddress: "s"},
		"not 89":         {ICCID: "1" + testICCID(1)[1:], MatchingID: "M", SMDPAddress: "s"},
		"$ in matching":  {ICCID: testICCID(1), MatchingID: "A$B", SMDPAddress: "s"},
		"empty SM-DP+":   {ICCID: testICCID(1), MatchingID: "M"},
		"space in SM-DP": {ICCID: testICCID(1), MatchingID: "M", SMDPAddress: "a b"},
	} {
		if err := checkProfile(p); err == nil {
			t.Errorf("%s: accepted %+v", name, p)
		}
	}
	if err := checkProfile(Profile{ICCID: testICCID(7), MatchingID: "ABCDE-12345", SMDPAddress: "smdp.example.com"}); err != nil {
		t.Errorf("a good profile: %v", err)
	}
	if !LuhnValid("79927398713") || LuhnValid("79927398710") || LuhnValid("") || LuhnValid("7992739871a") {
		t.Error("LuhnValid is wrong on the textbook cases")
	}
}

func TestFingerprintSeparatesFields(t *testing.T) {
	id := uuid.New()
	a := fingerprint(id, 1, nil, Customer{Name: "ab", Email: "c"})
	b := fingerprint(id, 1, nil, Customer{Name: "a", Email: "bc"})
	c := fingerprint(id, 1, ptr[int32](1), Customer{Name: "ab", Email: "c"})
	if bytes.Equal(a, b) || bytes.Equal(a, c) || len(a) != 32 {
		t.Error("different requests share a fingerprint")
	}
	if !bytes.Equal(a, fingerprint(id, 1, nil, Customer{Name: "ab", Email: "c"})) {
		t.Error("the same request has two fingerprints")
	}
}

func TestReadsCheckScopeAndPaging(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, 10_000)
	bad := Scope{AccountID: scope.AccountID, Environment: "prod"}
	if _, err := fx.svc.GetOrder(ctx, &bad, uuid.New()); !isInvalid(err, "scope.environment") {
		t.Errorf("GetOrder with a bad scope: %v", err)
	}
	for _, tc := range []struct {
		f     OrderFilter
		field string
	}{
		{OrderFilter{Scope: &scope, Page: -1}, "page"},
		{OrderFilter{Scope: &scope, Page: MaxPage + 1}, "page"},
		{OrderFilter{Scope: &scope, Limit: MaxPageLimit + 1}, "limit"},
		{OrderFilter{Scope: &scope, Status: StatusFailing}, "status"},
		{OrderFilter{Scope: &scope, Reference: "a\x00"}, "reference"},
	} {
		if _, err := fx.svc.ListOrders(ctx, tc.f); !isInvalid(err, tc.field) {
			t.Errorf("ListOrders(%+v) = %v, want invalid %s", tc.f, err, tc.field)
		}
	}
	for _, iccid := range []string{"89a", strings.Repeat("8", 23)} {
		if _, err := fx.svc.ListEsims(ctx, EsimFilter{Scope: &scope, ICCID: iccid}); !isInvalid(err, "iccid") {
			t.Errorf("ListEsims(iccid %q) = %v", iccid, err)
		}
	}
	for _, token := range []string{"", "short", strings.Repeat("a", 42) + "=", strings.Repeat("a", 44)} {
		if _, err := fx.svc.ActivationCode(ctx, token); !errors.Is(err, ErrNotFound) {
			t.Errorf("ActivationCode(%q) = %v, want ErrNotFound", token, err)
		}
	}
}

// GetOrders finds each order only in its lookup's scope, leaves top-ups
// out as GetOrder does, and refuses a batch out of bounds or a bad scope.
func TestGetOrdersMatchesEachLookupsScope(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, 10_000)
	other := Scope{AccountID: uuid.New(), Environment: Sandbox}
	mine, topUp := Order{ID: uuid.New(), Scope: scope, Status: StatusCompleted}, Order{ID: uuid.New(), Scope: scope, Kind: KindTopUp}
	fx.store.orders[mine.ID], fx.store.orders[topUp.ID] = mine, topUp
	got, err := fx.svc.GetOrders(ctx, []OrderLookup{{scope, mine.ID}, {other, mine.ID}, {scope, topUp.ID}, {scope, uuid.New()}, {scope, mine.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || got[0] == nil || got[0].ID != mine.ID || got[1] != nil || got[2] != nil || got[3] != nil || got[4] == nil {
		t.Errorf("GetOrders = %v", got)
	}
	for _, tc := range []struct {
		lookups []OrderLookup
		field   string
	}{
		{nil, "lookups"},
		{make([]OrderLookup, MaxOrderLookups+1), "lookups"},
		{[]OrderLookup{{Scope{AccountID: scope.AccountID, Environment: "prod"}, mine.ID}}, "scope.environment"},
		{[]OrderLookup{{Scope{Environment: Sandbox}, mine.ID}}, "scope.account_id"},
	} {
		if _, err := fx.svc.GetOrders(ctx, tc.lookups); !isInvalid(err, tc.field) {
			t.Errorf("GetOrders(%d lookups) = %v, want invalid %s", len(tc.lookups), err, tc.field)
		}
	}
}

func isInvalid(err error, field string) bool {
	var ve *ValidationError
	return errors.As(err, &ve) && ve.Field == field
}

// The event of a finished order says what happened and when, under an id
// of its own.
func TestFinishedOrdersWriteTheirEvent(t *testing.T) {
	ctx := context.Background()
	eventID := regexp.MustCompile(`^evt_[0-9a-f]{32}$`)
	for _, tc := range []struct {
		reference string
		want      EventType
	}{{"BK-1", EventOrderCompleted}, {"fail", EventOrderFailed}} {
		t.Run(string(tc.want), func(t *testing.T) {
			fx := newFixture(t, 10_000)
			in := order(fixedPlan, "k")
			in.Customer.Reference = tc.reference
			got, err := fx.svc.CreateOrder(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if len(fx.store.events) != 1 {
				t.Fatalf("events %+v, want one", fx.store.events)
			}
			e := fx.store.events[0]
			if e.Type != tc.want || e.OrderID != got.Order.ID || !e.CreatedAt.Equal(*fx.clock) || !eventID.MatchString(e.ID) {
				t.Errorf("event = %+v; want %s of order %s at %s, id evt_ and 32 hex digits", e, tc.want, got.Order.ID, *fx.clock)
			}
			if id, err := uuid.Parse(e.ID[len("evt_"):]); err != nil || id.Version() != 7 {
				t.Errorf("event id %s is not a UUID v7's hex: %v", e.ID, err)
			}
			// A replay finishes nothing, so writes nothing.
			if _, err := fx.svc.CreateOrder(ctx, in); err != nil || len(fx.store.events) != 1 {
				t.Errorf("after a replay: %v, %d events", err, len(fx.store.events))
			}
		})
	}
}

// fakePublisher records what it publishes, failing while fail is set.
type fakePublisher struct {
	fail      error
	published []Publication
	calls     int
}

func (p *fakePublisher) Publish(_ context.Context, ps []Publication) error {
	p.calls++
	if p.fail != nil {
		return p.fail
	}
	p.published = append(p.published, ps...)
	return nil
}

// PublishEvent hands each event over with its order as GetOrder shows
// it, and says when the publisher refused it, for it to be tried again.
func TestPublishEventRetriesWhatFailed(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, 10_000)
	pub := &fakePublisher{fail: errors.New("broker down")}
	fx.svc.publisher = pub
	completed, err := fx.svc.CreateOrder(ctx, order(fixedPlan, "a"))
	if err != nil {
		t.Fatal(err)
	}
	failing := order(fixedPlan, "b")
	failing.Customer.Reference = "fail"
	failed, err := fx.svc.CreateOrder(ctx, failing)
	if err != nil {
		t.Fatal(err)
	}
	if len(fx.store.events) != 2 {
		t.Fatalf("events %+v, want two", fx.store.events)
	}

	for _, e := range fx.store.events {
		if err := fx.svc.PublishEvent(ctx, e); err == nil || !errors.Is(err, pub.fail) {
			t.Fatalf("PublishEvent with the publisher down = %v; want its error", err)
		}
	}
	pub.fail = nil
	for _, e := range fx.store.events {
		if err := fx.svc.PublishEvent(ctx, e); err != nil {
			t.Fatalf("PublishEvent = %v", err)
		}
	}
	if len(pub.published) != 2 {
		t.Fatalf("published %+v", pub.published)
	}
	for i, want := range []Order{completed.Order, failed.Order} {
		p := pub.published[i]
		if p.Order.ID != want.ID || p.Event.OrderID != want.ID || p.Order.Status != want.Status || len(p.Order.Esims) != len(want.Esims) {
			t.Errorf("publication %d = %+v; want order %s %s", i, p, want.ID, want.Status)
		}
		for j, e := range p.Order.Esims {
			if e.ActivationCode != want.Esims[j].ActivationCode || e.QRCodeURL != want.Esims[j].QRCodeURL || e.Install != want.Esims[j].Install {
				t.Errorf("publication %d eSIM %d = %+v; want it as GetOrder shows it", i, j, e)
			}
		}
	}
}

// An account with MaxInFlight orders in flight gets ErrTooManyInFlight for
// the next, which stores and charges nothing and frees its key; a replay
// of a finished order needs no place; another scope is not held back.
func TestOrdersInFlightPerScopeAreCapped(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, 100_000)
	done, err := fx.svc.CreateOrder(ctx, order(fixedPlan, "done"))
	if err != nil {
		t.Fatal(err)
	}
	fx.store.mu.Lock()
	fx.store.inFlight[scope] = DefaultMaxInFlight // every place taken
	fx.store.mu.Unlock()

	calls := fx.provider.calls
	if _, err := fx.svc.CreateOrder(ctx, order(fixedPlan, "over")); !errors.Is(err, ErrTooManyInFlight) {
		t.Fatalf("an order over the cap: %v, want ErrTooManyInFlight", err)
	}
	if _, err := fx.store.OrderByKey(ctx, scope, "over"); !errors.Is(err, ErrNotFound) {
		t.Errorf("an order over the cap was stored: %v", err)
	}
	if fx.provider.calls != calls || fx.wallet.balance[scope] != 100_000-done.Order.TotalMinor {
		t.Errorf("an order over the cap reached the provider or the wallet")
	}
	replay, err := fx.svc.CreateOrder(ctx, order(fixedPlan, "done"))
	if err != nil || !replay.Replayed {
		t.Errorf("a replay at the cap: %+v, %v", replay, err)
	}
	other := Scope{AccountID: uuid.New(), Environment: Sandbox}
	fx.wallet.balance[other] = 10_000
	in := order(fixedPlan, "over")
	in.Scope = other
	if _, err := fx.svc.CreateOrder(ctx, in); err != nil {
		t.Errorf("another account at the first's cap: %v", err)
	}

	fx.store.mu.Lock()
	fx.store.inFlight[scope] = DefaultMaxInFlight - 1
	fx.store.mu.Unlock()
	if _, err := fx.svc.CreateOrder(ctx, order(fixedPlan, "over")); err != nil {
		t.Errorf("the same key once a place is free: %v", err)
	}
	if n := fx.store.inFlight[scope]; n != DefaultMaxInFlight-1 {
		t.Errorf("%d places held after the order ended, want %d", n, DefaultMaxInFlight-1)
	}
}

// heldProvider issues nothing until release is closed, saying on started
// when an order reached it.
type heldProvider struct {
	started, release chan struct{}
	inner            Provider
}

func (p heldProvider) Issue(ctx context.Context, l Locked, req IssueRequest) ([]Profile, error) {
	if req.Quantity == 1 {
		return p.inner.Issue(ctx, l, req) // another partner's, in these tests
	}
	p.started <- struct{}{}
	<-p.release
	return p.inner.Issue(ctx, l, req)
}

// An order of a scope whose orders fill this replica's MaxInFlight waits
// for one of them to end instead of being refused, then completes; another
// partner's order meanwhile goes past the queue at once.
func TestAnOrderPastTheCapWaitsForASlot(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, 100_000)
	held := heldProvider{started: make(chan struct{}, 3), release: make(chan struct{}), inner: fx.provider}
	fx.svc = NewService(Deps{Store: fx.store, Catalogue: fx.cat, Wallet: fx.wallet, Providers: map[Environment]Provider{Sandbox: held}, MaxInFlight: 2})
	results := make(chan error, 3)
	for _, key := range []string{"a", "b"} {
		go func() { _, err := fx.svc.CreateOrder(ctx, order(fixedPlan, key)); results <- err }()
	}
	<-held.started
	<-held.started
	go func() { _, err := fx.svc.CreateOrder(ctx, order(fixedPlan, "c")); results <- err }()
	for fx.svc.inFlight.Waiting(scope.AccountID.String()+"/"+string(scope.Environment)) != 1 {
		select {
		case err := <-results:
			t.Fatalf("an order past the cap did not wait: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	other := order(fixedPlan, "c")
	other.Scope, other.Quantity = Scope{AccountID: uuid.New(), Environment: Sandbox}, ptr[int32](1)
	fx.wallet.mu.Lock()
	fx.wallet.balance[other.Scope] = 10_000
	fx.wallet.mu.Unlock()
	if got, err := fx.svc.CreateOrder(ctx, other); err != nil || got.Order.Status != StatusCompleted {
		t.Fatalf("another partner's order while the first's wait: %+v, %v", got.Order.Status, err)
	}
	if len(results) != 0 {
		t.Fatal("the waiting order went on before a slot of its own partner freed")
	}
	close(held.release)
	for range 3 {
		if err := <-results; err != nil {
			t.Errorf("an order: %v", err)
		}
	}
	if o, err := fx.store.OrderByKey(ctx, scope, "c"); err != nil || o.Status != StatusCompleted {
		t.Errorf("the order that waited: %+v, %v", o.Status, err)
	}
}

// blockingProvider answers nothing until its context ends, and notes the
// deadline it was given.
type blockingProvider struct{ deadline chan time.Duration }

func (p blockingProvider) Issue(ctx context.Context, _ Locked, req IssueRequest) ([]Profile, error) {
	d, _ := ctx.Deadline()
	p.deadline <- time.Until(d)
	<-ctx.Done()
	return nil, fmt.Errorf("%w: gave up: %w", ErrProviderFailed, ctx.Err())
}

// The provider's work has a budget of its own inside the order's, so an
// order it fails by running out of time is still refunded within the
// order's time.
func TestProviderWorkHasItsOwnBudget(t *testing.T) {
	fx := newFixture(t, 10_000)
	p := blockingProvider{deadline: make(chan time.Duration, 1)}
	fx.svc = NewService(Deps{Store: fx.store, Catalogue: fx.cat, Wallet: fx.wallet,
		Providers: map[Environment]Provider{Sandbox: p}, OrderTimeout: time.Minute, ProviderTimeout: 50 * time.Millisecond})
	got, err := fx.svc.CreateOrder(context.Background(), order(fixedPlan, "slow"))
	if err != nil {
		t.Fatal(err)
	}
	if d := <-p.deadline; d > 50*time.Millisecond {
		t.Errorf("the provider had %s, want at most the provider budget", d)
	}
	if got.Order.Status != StatusFailed {
		t.Errorf("status %s, want failed", got.Order.Status)
	}
	fx.checkMoney(t, got.Order, 10_000)
}

// A call waiting for the order of its key gives up after LockWait with
// ErrBusy, changing nothing; the first call's order is untouched.
func TestWaitForABusyKeyIsBounded(t *testing.T) {
	fx := newFixture(t, 10_000)
	fx.svc.lockWait = 20 * time.Millisecond
	held, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = fx.store.WithLock(context.Background(), lockKey(scope, "busy", uuid.Nil), func(context.Context, Locked) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	defer close(release)
	// memStore's locks ignore contexts: the domain's bound is what is
	// tested, through a store that honours it.
	fx.svc.store = ctxStore{fx.store}
	if _, err := fx.svc.CreateOrder(context.Background(), order(fixedPlan, "busy")); !errors.Is(err, ErrBusy) {
		t.Errorf("CreateOrder while the key is held: %v, want ErrBusy", err)
	}
	if _, err := fx.store.OrderByKey(context.Background(), scope, "busy"); !errors.Is(err, ErrNotFound) || fx.wallet.balance[scope] != 10_000 {
		t.Errorf("a call that gave up stored or charged something")
	}
}

// ctxStore waits for a lock only as long as ctx allows, as the real store
// does.
type ctxStore struct{ *memStore }

func (s ctxStore) WithLock(ctx context.Context, key string, fn func(context.Context, Locked) error) error {
	for {
		ran, err := s.WithTryLock(ctx, key, fn)
		if ran || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrBusy, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// The in-memory store keeps orders only: eSIMs after their order and
// top-ups are tested against Postgres (postgres, server).
var errNotInMemory = errors.New("not kept by the in-memory store")

func (m *memStore) CompleteTopUp(context.Context, uuid.UUID, uuid.UUID, func(*Esim) error, Event) error {
	return errNotInMemory
}

func (m *memStore) ChangeEsims(context.Context, EsimSelection, func(*Esim) (bool, []Event, error)) ([]Esim, error) {
	return nil, errNotInMemory
}

func (m *memStore) EsimsInUse(context.Context, Environment, uuid.UUID, int32) ([]EsimRef, error) {
	return nil, errNotInMemory
}

func (m *memStore) DueEsims(context.Context, time.Time, time.Duration, int32) ([]uuid.UUID, error) {
	return nil, errNotInMemory
}

// Deps.Finished hears of each order as it reaches its final status, once:
// a replay finishes nothing.
func TestFinishedHearsEachFinalStatusOnce(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, 10_000)
	var heard []string
	fx.svc.finished = func(_ context.Context, o Order) {
		heard = append(heard, string(o.Status)+" "+string(o.Scope.Environment)+" "+string(o.Kind))
	}
	for _, in := range []NewOrder{order(fixedPlan, "ok"), order(fixedPlan, "ok")} {
		if _, err := fx.svc.CreateOrder(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	failing := order(fixedPlan, "fails")
	failing.Customer.Reference = "fail"
	if got, err := fx.svc.CreateOrder(ctx, failing); err != nil || got.Order.Status != StatusFailed {
		t.Fatalf("CreateOrder = %+v, %v; want a failed order", got.Order, err)
	}
	if want := []string{"completed sandbox esims", "failed sandbox esims"}; !slices.Equal(heard, want) {
		t.Errorf("heard %q, want %q", heard, want)
	}
}

// A search checks its query, scope and limit; looks ICCIDs up only for
// digits (the spaces of a printed ICCID left out); and says when there
// were more matches than it returns.
func TestSearchRules(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, 10_000)
	for _, tc := range []struct {
		s     Search
		field string
	}{
		{Search{Scope: scope, Query: " "}, "query"},
		{Search{Scope: scope, Query: strings.Repeat("a", MaxEmailLength+1)}, "query"},
		{Search{Scope: scope, Query: "a\x00"}, "query"},
		{Search{Scope: scope, Query: "a", Limit: MaxPageLimit + 1}, "limit"},
		{Search{Scope: Scope{AccountID: scope.AccountID, Environment: "prod"}, Query: "a"}, "scope.environment"},
	} {
		if _, err := fx.svc.Search(ctx, tc.s); !isInvalid(err, tc.field) {
			t.Errorf("Search(%+v) = %v, want invalid %s", tc.s, err, tc.field)
		}
	}
	for i := range 3 {
		_, err := fx.svc.CreateOrder(ctx, NewOrder{Scope: scope, Currency: USD, PlanID: fixedPlan.ID.String(),
			IdempotencyKey: fmt.Sprintf("search-%d", i), Customer: Customer{Reference: fmt.Sprintf("BK-%d", i)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	fx.store.searched = nil
	res, err := fx.svc.Search(ctx, Search{Scope: scope, Query: " BK-", Limit: 2})
	if err != nil || len(res.Orders) != 2 || !res.More || len(res.Esims) != 0 {
		t.Errorf("Search BK- (limit 2) = %d orders, more %v, %d eSIMs, %v; want 2, true, 0", len(res.Orders), res.More, len(res.Esims), err)
	}
	if _, err := fx.svc.Search(ctx, Search{Scope: scope, Query: "8999 0000 12"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(fx.store.searched, " "); got != "orders:BK- orders:8999 0000 12 esims:8999000012" {
		t.Errorf("searched %s", got)
	}
}
