// Package postgres is the ordering Store over Postgres (pgx/v5), with its
// queries written in SQL and compiled by sqlc into package db. It also
// keeps the sandbox provider's allocations (sandbox.Store).
package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/es2plus"
	"github.com/esimplatform/esim/services/ordering/jobs"
	"github.com/esimplatform/esim/services/ordering/postgres/db"
	"github.com/esimplatform/esim/services/ordering/sandbox"
)

// Store implements ordering.Store; Records keeps the providers'.
type Store struct {
	pool *pgxpool.Pool
	q    *db.Queries
	// jobs writes the jobs an order's change makes due (its event's
	// publication) in the change's transaction.
	jobs *jobs.Inserter
	// holders bounds the lock holders of this replica, each on a
	// connection of its own for its whole order: the rest of the pool
	// stays for reads and the background loops, whatever the orders in
	// flight wait for.
	holders chan struct{}
	// released wakes the callers of this replica waiting for a lock when
	// it is released here; those of other replicas poll.
	released waitList
}

var _ ordering.Store = (*Store)(nil)

// NewStore returns a Store over pool whose lock holders use at most
// maxHolders of its connections at once (0: DefaultMaxHolders); the pool
// stays the caller's to close.
func NewStore(pool *pgxpool.Pool, maxHolders int) *Store {
	if maxHolders <= 0 {
		maxHolders = DefaultMaxHolders
	}
	inserter, err := jobs.NewInserter(pool)
	if err != nil {
		// River refuses only a bad configuration, and an inserter's is
		// empty.
		panic(err)
	}
	return &Store{pool: pool, q: db.New(pool), jobs: inserter, holders: make(chan struct{}, maxHolders), released: waitList{m: map[string]*waiters{}}}
}

// DefaultMaxConns is the pool size WithPoolDefaults sets where the
// database URL sets none (pool_max_conns): DefaultMaxHolders orders in
// flight, each holding the connection its lock lives on, and
// ReservedConns for everything else.
const DefaultMaxConns = DefaultMaxHolders + ReservedConns

// DefaultMaxHolders is how many orders a replica processes at once unless
// configured otherwise.
const DefaultMaxHolders = 16

// ReservedConns is the least a pool keeps beside its lock holders: reads
// and River's jobs (publications, the recovery pass, the canceller; its
// listener holds one for good) never wait behind orders.
const ReservedConns = 8

// keepalive settings a session starts with unless the URL names them.
// An advisory lock lives as long as the session holding it. A replica
// killed outright closes its sockets and Postgres ends its sessions at
// once; a node that vanishes from the network does not, and with Linux's
// defaults its sessions, and the locks of the orders it was processing,
// would linger for over two hours before recovery could take them.
// These end them within about a minute.
var keepalive = map[string]string{
	"tcp_keepalives_idle":     "30",
	"tcp_keepalives_interval": "10",
	"tcp_keepalives_count":    "3",
}

// WithPoolDefaults sizes the pool for locks (DefaultMaxConns) and makes
// the server notice a vanished replica, each unless the database URL says
// otherwise.
func WithPoolDefaults() libpostgres.Option {
	return func(cfg *pgxpool.Config) {
		if !strings.Contains(cfg.ConnString(), "pool_max_conns") {
			cfg.MaxConns = DefaultMaxConns
		}
		for name, value := range keepalive {
			if _, set := cfg.ConnConfig.RuntimeParams[name]; !set {
				cfg.ConnConfig.RuntimeParams[name] = value
			}
		}
	}
}

// unlockBudget bounds the release of a lock, which runs whatever happened
// to the caller's context.
const unlockBudget = 5 * time.Second

// Polling for a lock held on another replica starts at minPoll and
// doubles up to maxPoll: a retry of a quick order is answered at once,
// and one of a slow order costs a statement every quarter second.
const (
	minPoll = 10 * time.Millisecond
	maxPoll = 250 * time.Millisecond
)

// WithLock implements ordering.Store with a Postgres session advisory lock
// (on a 64-bit hash of key) on a connection of its own, which every
// statement of fn runs on: fn's Locked and, through Records of it, the
// sandbox and ES2+ providers' records. A caller finding the lock taken
// waits holding no connection and no holder's place: woken when a holder
// of this replica releases it, polling for one of another replica's.
func (s *Store) WithLock(ctx context.Context, key string, fn func(context.Context, ordering.Locked) error) error {
	poll := minPoll
	for {
		// Registered before trying, so that a release between the try
		// and the wait still wakes this caller; unregistered once it
		// holds the lock.
		w := s.released.add(key)
		registered := true
		unregister := func() {
			if registered {
				s.released.remove(key, w)
				registered = false
			}
		}
		locked, err := s.tryLock(ctx, key, true, func(ctx context.Context, l ordering.Locked) error {
			unregister()
			return fn(ctx, l)
		})
		if locked || err != nil {
			unregister()
			return err
		}
		timer := time.NewTimer(poll)
		select {
		case <-w.wake:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		unregister()
		if ctx.Err() != nil {
			return fmt.Errorf("wait for lock %q: %w: %w", key, ordering.ErrBusy, ctx.Err())
		}
		poll = min(2*poll, maxPoll)
	}
}

// WithTryLock implements ordering.Store: false when the lock is taken or
// every holder's place is.
func (s *Store) WithTryLock(ctx context.Context, key string, fn func(context.Context, ordering.Locked) error) (bool, error) {
	return s.tryLock(ctx, key, false, fn)
}

// tryLock takes a holder's place (waiting for one as long as ctx allows
// when wait is set), a connection and the lock, and runs fn; false when
// the lock is taken, or, without wait, no place is free.
func (s *Store) tryLock(ctx context.Context, key string, wait bool, fn func(context.Context, ordering.Locked) error) (bool, error) {
	select {
	case s.holders <- struct{}{}:
	default:
		if !wait {
			return false, nil
		}
		select {
		case s.holders <- struct{}{}:
		case <-ctx.Done():
			return false, fmt.Errorf("wait for a place to process orders: %w: %w", ordering.ErrBusy, ctx.Err())
		}
	}
	defer func() { <-s.holders }()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("acquire a connection to lock: %w", err)
	}
	q := db.New(conn)
	locked, err := q.AdvisoryTryLock(ctx, key)
	if err != nil {
		// The statement may have been cut short just as the server granted
		// the lock: ending the session releases whatever it holds.
		discard(conn)
		return false, fmt.Errorf("lock: %w", err)
	}
	if !locked {
		conn.Release()
		return false, nil
	}
	defer func() {
		unlock(conn)
		s.released.wake(key)
	}()
	return true, fn(ctx, &lockHolder{conn: conn, q: q, jobs: s.jobs})
}

// unlock releases every advisory lock of the holder's session, the
// order's and its place among its scope's orders in flight, and returns
// the connection to the pool; or, when that fails, closes the connection:
// a pooled connection still holding a lock would hand it to its next
// user, and keep the order from everyone else.
func unlock(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), unlockBudget)
	defer cancel()
	if err := db.New(conn).AdvisoryUnlockAll(ctx); err != nil {
		discard(conn)
		return
	}
	conn.Release()
}

// discard takes conn out of the pool and closes it, which ends its session.
func discard(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), unlockBudget)
	defer cancel()
	_ = conn.Hijack().Close(ctx) // the session ends either way once the socket closes
}

// waitList is the callers of this replica waiting for each lock.
type waitList struct {
	mu sync.Mutex
	m  map[string]*waiters
}

// waiters are the callers waiting for one lock: wake is closed when it is
// released here.
type waiters struct {
	wake chan struct{}
	n    int
}

func (l *waitList) add(key string) *waiters {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.m[key]
	if !ok {
		w = &waiters{wake: make(chan struct{})}
		l.m[key] = w
	}
	w.n++
	return w
}

// remove forgets a caller that stopped waiting, and the lock's entry with
// its last caller, so waits on other replicas' locks leave nothing behind.
func (l *waitList) remove(key string, w *waiters) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.n--; w.n == 0 && l.m[key] == w {
		delete(l.m, key)
	}
}

// wake wakes every caller waiting for key; those that lose the race for
// it wait again on a fresh entry.
func (l *waitList) wake(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w, ok := l.m[key]; ok {
		close(w.wake)
		delete(l.m, key)
	}
}

// Records are the providers' records (sandbox allocations, ES2+
// reservations) on one connection: a lock holder's, or the pool's.
type Records struct {
	q *db.Queries
	// conn begins the transactions that write jobs with the records.
	conn interface {
		Begin(ctx context.Context) (pgx.Tx, error)
	}
	jobs *jobs.Inserter
}

var (
	_ sandbox.Store = (*Records)(nil)
	_ es2plus.Store = (*Records)(nil)
)

// Records returns the providers' records on tx's connection, tx being the
// holder of an order's lock that WithLock handed out, so that they are
// written as the order moves; on the pool for nil (tests, which hold no
// order).
func (s *Store) Records(tx ordering.Locked) *Records {
	if tx == nil {
		return &Records{q: s.q, conn: s.pool, jobs: s.jobs}
	}
	h, ok := tx.(*lockHolder)
	if !ok {
		panic(fmt.Sprintf("postgres: Records of a %T, not a holder of this store's lock", tx))
	}
	return &Records{q: h.q, conn: h.conn, jobs: h.jobs}
}

// lockHolder implements ordering.Locked on the lock's connection.
type lockHolder struct {
	conn *pgxpool.Conn
	q    *db.Queries
	jobs *jobs.Inserter
}

// ClaimInFlight implements ordering.Locked with one of max advisory locks
// of the scope (the two-key space, apart from the orders' locks), taken
// on the holder's session and released with the order's lock; a holder
// that dies releases both with its session.
func (l *lockHolder) ClaimInFlight(ctx context.Context, scope ordering.Scope, max int) error {
	_, err := l.q.ClaimInFlightSlot(ctx, db.ClaimInFlightSlotParams{
		Scope: "ordering/in-flight/" + scope.AccountID.String() + "/" + string(scope.Environment), MaxSlots: int32(max),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return ordering.ErrTooManyInFlight
	}
	if err != nil {
		return fmt.Errorf("claim a place among the scope's orders in flight: %w", err)
	}
	return nil
}

// OrderByKey implements ordering.Locked.
func (l *lockHolder) OrderByKey(ctx context.Context, scope ordering.Scope, key string) (ordering.Order, error) {
	row, err := l.q.OrderByKey(ctx, db.OrderByKeyParams{AccountID: scope.AccountID, Environment: string(scope.Environment), IdempotencyKey: key})
	if err != nil {
		return ordering.Order{}, notFound(err, "select order by key")
	}
	return withEsims(ctx, l.q, row)
}

// OrderByID implements ordering.Locked.
func (l *lockHolder) OrderByID(ctx context.Context, id uuid.UUID) (ordering.Order, error) {
	row, err := l.q.OrderByID(ctx, id)
	if err != nil {
		return ordering.Order{}, notFound(err, "select order")
	}
	return withEsims(ctx, l.q, row)
}

// InsertOrder implements ordering.Locked.
func (l *lockHolder) InsertOrder(ctx context.Context, o ordering.Order) error {
	var key *string
	if o.IdempotencyKey != "" {
		key = &o.IdempotencyKey
	}
	n, err := l.q.InsertOrder(ctx, db.InsertOrderParams{
		ID:                o.ID,
		AccountID:         o.Scope.AccountID,
		Environment:       string(o.Scope.Environment),
		IdempotencyKey:    key,
		Fingerprint:       o.Fingerprint,
		PlanID:            o.PlanID,
		PlanName:          o.PlanName,
		PerDay:            o.PerDay,
		Unlimited:         o.Unlimited,
		TotalBytes:        o.TotalBytes,
		ValidityDays:      o.ValidityDays,
		Quantity:          o.Quantity,
		Days:              o.Days,
		Currency:          string(o.Currency),
		UnitMinor:         o.UnitMinor,
		TotalMinor:        o.TotalMinor,
		CustomerName:      o.Customer.Name,
		CustomerEmail:     o.Customer.Email,
		CustomerReference: o.Customer.Reference,
		CreatedAt:         o.CreatedAt,
		Kind:              string(o.Kind),
		EsimID:            esimID(o),
		Countries:         countries(o.Countries),
	})
	if err != nil {
		return fmt.Errorf("insert order: %w", err)
	}
	if n == 0 {
		return ordering.ErrConflict
	}
	return nil
}

// esimID is a top-up's eSIM, nil (NULL) on orders of eSIMs.
func esimID(o ordering.Order) *uuid.UUID {
	if o.Kind != ordering.KindTopUp {
		return nil
	}
	return &o.EsimID
}

// countries is never NULL: the column is not.
func countries(c []string) []string {
	if c == nil {
		return []string{}
	}
	return c
}

// DeletePending implements ordering.Locked.
func (l *lockHolder) DeletePending(ctx context.Context, id uuid.UUID) error {
	return oneRow(l.q.DeletePendingOrder(ctx, id))("delete pending order")
}

// MarkFailing implements ordering.Locked.
func (l *lockHolder) MarkFailing(ctx context.Context, id uuid.UUID, e ordering.OrderError) error {
	return oneRow(l.q.MarkOrderFailing(ctx, db.MarkOrderFailingParams{ID: id, ErrorCode: e.Code, ErrorMessage: e.Message}))("mark order failing")
}

// MarkFailed implements ordering.Locked: the status and the event's
// publication in one transaction.
func (l *lockHolder) MarkFailed(ctx context.Context, id uuid.UUID, e ordering.Event) error {
	return pgx.BeginFunc(ctx, l.conn, func(tx pgx.Tx) error {
		if err := oneRow(l.q.WithTx(tx).MarkOrderFailed(ctx, id))("mark order failed"); err != nil {
			return err
		}
		return l.jobs.PublishEventTx(ctx, tx, e, traceContext(ctx))
	})
}

// traceContext is ctx's trace context as the propagators write it into
// message headers: the event's publication, long after ctx is gone,
// continues its trace.
func traceContext(ctx context.Context) map[string]string {
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	return carrier
}

// Complete implements ordering.Locked: the eSIMs, the status and the event
// in one transaction, so an order is never completed without its eSIMs
// nor has eSIMs without being completed (the schema checks both at
// commit), and the platform hears of every completed order exactly when
// it completes.
func (l *lockHolder) Complete(ctx context.Context, id uuid.UUID, esims []ordering.Esim, e ordering.Event) error {
	p := db.InsertEsimsParams{OrderID: id}
	for _, e := range esims {
		p.Ids = append(p.Ids, e.ID)
		p.Positions = append(p.Positions, e.Position)
		p.PlanNames = append(p.PlanNames, e.PlanName)
		p.Iccids = append(p.Iccids, e.ICCID)
		p.MatchingIds = append(p.MatchingIds, e.MatchingID)
		p.SmdpAddresses = append(p.SmdpAddresses, e.SMDPAddress)
		p.QrTokens = append(p.QrTokens, e.QRToken)
		p.Statuses = append(p.Statuses, e.Status)
		p.ValidityDays = append(p.ValidityDays, e.ValidityDays)
		p.Unlimited = append(p.Unlimited, e.Data.Unlimited)
		p.TotalBytes = append(p.TotalBytes, e.Data.TotalBytes)
		p.UsedBytes = append(p.UsedBytes, e.Data.UsedBytes)
		p.DataUpdatedAt = append(p.DataUpdatedAt, e.Data.UpdatedAt)
		p.CreatedAt = append(p.CreatedAt, e.CreatedAt)
	}
	return pgx.BeginFunc(ctx, l.conn, func(tx pgx.Tx) error {
		q := l.q.WithTx(tx)
		n, err := q.InsertEsims(ctx, p)
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == "esims_iccid_idx" {
			return fmt.Errorf("insert eSIMs: %w", ordering.ErrICCIDInUse)
		}
		if err != nil {
			return fmt.Errorf("insert eSIMs: %w", err)
		}
		if n != int64(len(esims)) {
			return notFound(pgx.ErrNoRows, "select order to complete")
		}
		if err := oneRow(q.MarkOrderCompleted(ctx, id))("mark order completed"); err != nil {
			return err
		}
		return l.jobs.PublishEventTx(ctx, tx, e, traceContext(ctx))
	})
}

// errStatusMoved is an internal failure, never an answer to a caller: under
// the order's lock nothing else moves it.
var errStatusMoved = errors.New("the order is not in the status this step expects")

// oneRow turns a statement's row count into an error unless it changed
// exactly one row: the order was not in the status the statement expects.
func oneRow(n int64, err error) func(doing string) error {
	return func(doing string) error {
		switch {
		case err != nil:
			return fmt.Errorf("%s: %w", doing, err)
		case n != 1:
			return fmt.Errorf("%s: %w", doing, errStatusMoved)
		}
		return nil
	}
}

// AllocateSandboxProfiles implements sandbox.Store.
func (r *Records) AllocateSandboxProfiles(ctx context.Context, orderID uuid.UUID, matchingIDs []string) ([]sandbox.Allocation, error) {
	rows, err := r.q.AllocateSandboxProfiles(ctx, db.AllocateSandboxProfilesParams{OrderID: orderID, MatchingIds: matchingIDs})
	if err != nil {
		return nil, fmt.Errorf("allocate sandbox profiles: %w", err)
	}
	out := make([]sandbox.Allocation, len(rows))
	for i, r := range rows {
		out[i] = sandbox.Allocation{Position: r.Position, Serial: r.Serial, MatchingID: r.MatchingID}
	}
	// RETURNING follows no order.
	slices.SortFunc(out, func(a, b sandbox.Allocation) int { return cmp.Compare(a.Position, b.Position) })
	return out, nil
}

// Order implements ordering.Store. Only a completed order has eSIMs, and
// they were committed with its status: an order read as completed finds
// them all, with no snapshot needed.
func (s *Store) Order(ctx context.Context, scope *ordering.Scope, id uuid.UUID) (ordering.Order, error) {
	p := db.OrderInScopeParams{ID: id, AnyScope: scope == nil}
	if scope != nil {
		p.AccountID, p.Environment = scope.AccountID, string(scope.Environment)
	}
	completed, err := s.q.CompletedOrderInScope(ctx, db.CompletedOrderInScopeParams(p))
	if err != nil {
		return ordering.Order{}, fmt.Errorf("select completed order: %w", err)
	}
	if len(completed) > 0 {
		o := order(completed[0].Order)
		topUps := false
		for _, r := range completed {
			o.Esims = append(o.Esims, esim(r.Esim))
			topUps = topUps || r.HasTopUps
		}
		if topUps {
			if err := withTopUps(ctx, s.q, o.Esims); err != nil {
				return ordering.Order{}, err
			}
		}
		return o, nil
	}
	row, err := s.q.OrderInScope(ctx, p)
	if err != nil {
		return ordering.Order{}, notFound(err, "select order")
	}
	return withEsims(ctx, s.q, row)
}

// Orders implements ordering.Store. A single lookup takes Order's one
// round trip; more take three: the orders, their eSIMs, the top-ups.
func (s *Store) Orders(ctx context.Context, lookups []ordering.OrderLookup) ([]ordering.Order, error) {
	if len(lookups) == 1 {
		o, err := s.Order(ctx, &lookups[0].Scope, lookups[0].ID)
		if errors.Is(err, ordering.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []ordering.Order{o}, nil
	}
	var p db.OrdersInScopesParams
	for _, l := range lookups {
		p.Ids = append(p.Ids, l.ID)
		p.AccountIds = append(p.AccountIds, l.Scope.AccountID)
		p.Environments = append(p.Environments, string(l.Scope.Environment))
	}
	found, err := s.q.OrdersInScopes(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("select orders: %w", err)
	}
	rows := make([]db.Order, len(found))
	for i, f := range found {
		rows[i] = f.Order
	}
	return ordersWithEsims(ctx, s.q, rows)
}

// withEsims returns the order of row with its eSIMs.
func withEsims(ctx context.Context, q *db.Queries, row db.Order) (ordering.Order, error) {
	o := order(row)
	if o.Status != ordering.StatusCompleted {
		return o, nil
	}
	rows, err := q.EsimsOfOrders(ctx, []uuid.UUID{o.ID})
	if err != nil {
		return ordering.Order{}, fmt.Errorf("select eSIMs of order: %w", err)
	}
	for _, r := range rows {
		o.Esims = append(o.Esims, esim(r))
	}
	if err := withTopUps(ctx, q, o.Esims); err != nil {
		return ordering.Order{}, err
	}
	return o, nil
}

// checkPage refuses a page the domain would never ask for, as accounts'
// store does: failing loudly rather than reading an unbounded page.
func checkPage(limit int32, offset int64) error {
	if limit < 1 || limit > ordering.MaxPageLimit || offset < 0 {
		return fmt.Errorf("page of %d rows at offset %d is out of range (limit 1..%d, offset >= 0)", limit, offset, ordering.MaxPageLimit)
	}
	return nil
}

// ListOrders implements ordering.Store: the page, its total and the
// page's eSIMs in one snapshot.
func (s *Store) ListOrders(ctx context.Context, oq ordering.OrderQuery) ([]ordering.Order, int64, error) {
	if err := checkPage(oq.Limit, oq.Offset); err != nil {
		return nil, 0, err
	}
	statuses := []string{}
	switch oq.Status {
	case "":
	case ordering.StatusPending:
		// Being refunded is still being processed, to a partner.
		statuses = []string{string(ordering.StatusPending), string(ordering.StatusFailing)}
	default:
		statuses = []string{string(oq.Status)}
	}
	var orders []ordering.Order
	var total int64
	err := libpostgres.InSnapshot(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		var rows []db.Order
		var err error
		switch {
		case oq.Scope != nil && len(statuses) == 0 && oq.Reference == "":
			// A partner's whole list, however long: its total kept, its
			// page found by keyset from an index-only scan.
			account, env := oq.Scope.AccountID, string(oq.Scope.Environment)
			if total, err = q.ListTotal(ctx, db.ListTotalParams{AccountID: account, Environment: env, List: "orders"}); err == nil {
				rows, err = wholeListPage(total, oq.Offset, oq.Limit, func(skip int64, n int32) ([]db.Order, error) {
					return q.ListOrdersInScopeFrom(ctx, db.ListOrdersInScopeFromParams{AccountID: account, Environment: env, RowOffset: skip, RowLimit: n})
				}, func(skip int64, n int32) ([]db.Order, error) {
					return q.ListOrdersInScopeFromOldest(ctx, db.ListOrdersInScopeFromOldestParams{AccountID: account, Environment: env, RowOffset: skip, RowLimit: n})
				})
			}
		case oq.Scope != nil:
			scoped := db.ListOrdersInScopeParams{AccountID: oq.Scope.AccountID, Environment: string(oq.Scope.Environment),
				Statuses: statuses, Reference: oq.Reference, RowLimit: oq.Limit, RowOffset: oq.Offset}
			if rows, err = q.ListOrdersInScope(ctx, scoped); err == nil {
				total, err = q.CountOrdersInScope(ctx, db.CountOrdersInScopeParams{AccountID: scoped.AccountID,
					Environment: scoped.Environment, Statuses: statuses, Reference: oq.Reference})
			}
		default:
			if rows, err = q.ListAllOrders(ctx, db.ListAllOrdersParams{Statuses: statuses, Reference: oq.Reference,
				RowLimit: oq.Limit, RowOffset: oq.Offset}); err == nil {
				total, err = q.CountAllOrders(ctx, db.CountAllOrdersParams{Statuses: statuses, Reference: oq.Reference})
			}
		}
		if err != nil {
			return fmt.Errorf("select orders: %w", err)
		}
		orders, err = ordersWithEsims(ctx, q, rows)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list orders: %w", err)
	}
	return orders, total, nil
}

// wholeListPage reads the page at offset of a scope's unfiltered list of
// total rows, newest first: from the newest end while the page is in the
// list's first half, else from the oldest end, turned round, so that the
// index-only scan that finds the page skips at most half the list.
func wholeListPage[T any](total, offset int64, limit int32, fromNewest, fromOldest func(skip int64, n int32) ([]T, error)) ([]T, error) {
	switch {
	case offset >= total:
		return nil, nil
	case offset*2 < total:
		return fromNewest(offset, limit)
	}
	rows, err := fromOldest(max(0, total-offset-int64(limit)), int32(min(int64(limit), total-offset)))
	slices.Reverse(rows)
	return rows, err
}

// ordersWithEsims is the orders of rows, each completed one with its
// eSIMs and their top-ups.
func ordersWithEsims(ctx context.Context, q *db.Queries, rows []db.Order) ([]ordering.Order, error) {
	orders := make([]ordering.Order, len(rows))
	var completed []uuid.UUID
	index := make(map[uuid.UUID]int, len(rows))
	for i, r := range rows {
		orders[i] = order(r)
		index[r.ID] = i
		if orders[i].Status == ordering.StatusCompleted {
			completed = append(completed, r.ID)
		}
	}
	if len(completed) == 0 {
		return orders, nil
	}
	esimRows, err := q.EsimsOfOrders(ctx, completed)
	if err != nil {
		return nil, fmt.Errorf("select eSIMs of orders: %w", err)
	}
	// Every order's top-ups in one query, not one an order.
	esims := make([]ordering.Esim, len(esimRows))
	for i, r := range esimRows {
		esims[i] = esim(r)
	}
	if err := withTopUps(ctx, q, esims); err != nil {
		return nil, err
	}
	for _, e := range esims {
		i := index[e.OrderID]
		orders[i].Esims = append(orders[i].Esims, e)
	}
	return orders, nil
}

// likePrefix is a LIKE pattern of what starts with prefix: its wildcards
// and LIKE's escape character match only themselves.
func likePrefix(prefix string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(prefix) + "%"
}

// checkSearch refuses a search the domain would never ask for: it asks
// for one more than a page, to know whether there are more.
func checkSearch(sq ordering.SearchQuery) error {
	if sq.Limit < 1 || sq.Limit > ordering.MaxPageLimit+1 || sq.Prefix == "" {
		return fmt.Errorf("search of %d rows for %q is out of range (limit 1..%d, a prefix)", sq.Limit, sq.Prefix, ordering.MaxPageLimit+1)
	}
	return nil
}

// SearchOrders implements ordering.Store.
func (s *Store) SearchOrders(ctx context.Context, sq ordering.SearchQuery) ([]ordering.Order, error) {
	if err := checkSearch(sq); err != nil {
		return nil, err
	}
	var orders []ordering.Order
	err := libpostgres.InSnapshot(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		pattern := likePrefix(sq.Prefix)
		rows, err := q.SearchOrdersByReference(ctx, db.SearchOrdersByReferenceParams{AccountID: sq.Scope.AccountID,
			Environment: string(sq.Scope.Environment), Pattern: pattern, RowLimit: sq.Limit})
		if err != nil {
			return fmt.Errorf("select orders by reference: %w", err)
		}
		if len(rows) < int(sq.Limit) {
			byEmail, err := q.SearchOrdersByEmail(ctx, db.SearchOrdersByEmailParams{AccountID: sq.Scope.AccountID,
				Environment: string(sq.Scope.Environment), Pattern: pattern, RowLimit: sq.Limit})
			if err != nil {
				return fmt.Errorf("select orders by email: %w", err)
			}
			seen := make(map[uuid.UUID]bool, len(rows))
			for _, r := range rows {
				seen[r.ID] = true
			}
			for _, r := range byEmail {
				if !seen[r.ID] && len(rows) < int(sq.Limit) {
					rows = append(rows, r)
				}
			}
		}
		orders, err = ordersWithEsims(ctx, q, rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("search orders: %w", err)
	}
	return orders, nil
}

// SearchEsims implements ordering.Store.
func (s *Store) SearchEsims(ctx context.Context, sq ordering.SearchQuery) ([]ordering.Esim, error) {
	if err := checkSearch(sq); err != nil {
		return nil, err
	}
	var esims []ordering.Esim
	err := libpostgres.InSnapshot(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		rows, err := q.SearchEsimsByICCID(ctx, db.SearchEsimsByICCIDParams{AccountID: sq.Scope.AccountID,
			Environment: string(sq.Scope.Environment), Pattern: likePrefix(sq.Prefix), RowLimit: sq.Limit})
		if err != nil {
			return fmt.Errorf("select eSIMs by ICCID: %w", err)
		}
		esims = make([]ordering.Esim, len(rows))
		for i, r := range rows {
			esims[i] = esim(r)
		}
		return withTopUps(ctx, q, esims)
	})
	if err != nil {
		return nil, fmt.Errorf("search eSIMs: %w", err)
	}
	return esims, nil
}

// Esim implements ordering.Store.
func (s *Store) Esim(ctx context.Context, scope *ordering.Scope, id uuid.UUID) (ordering.Esim, error) {
	p := db.EsimInScopeParams{ID: id, AnyScope: scope == nil}
	if scope != nil {
		p.AccountID, p.Environment = scope.AccountID, string(scope.Environment)
	}
	row, err := s.q.EsimInScope(ctx, p)
	if err != nil {
		return ordering.Esim{}, notFound(err, "select eSIM")
	}
	e := []ordering.Esim{esim(row)}
	if err := withTopUps(ctx, s.q, e); err != nil {
		return ordering.Esim{}, err
	}
	return e[0], nil
}

// ListEsims implements ordering.Store.
func (s *Store) ListEsims(ctx context.Context, eq ordering.EsimQuery) ([]ordering.Esim, int64, error) {
	if err := checkPage(eq.Limit, eq.Offset); err != nil {
		return nil, 0, err
	}
	var esims []ordering.Esim
	var total int64
	err := libpostgres.InSnapshot(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		var rows []db.Esim
		var err error
		switch {
		case eq.Scope != nil && eq.OrderID == uuid.Nil && eq.ICCID == "" && eq.Status == "":
			// As ListOrders: the whole list's total kept, its page found
			// by keyset.
			account, env := eq.Scope.AccountID, string(eq.Scope.Environment)
			if total, err = q.ListTotal(ctx, db.ListTotalParams{AccountID: account, Environment: env, List: "esims"}); err == nil {
				rows, err = wholeListPage(total, eq.Offset, eq.Limit, func(skip int64, n int32) ([]db.Esim, error) {
					return q.ListEsimsInScopeFrom(ctx, db.ListEsimsInScopeFromParams{AccountID: account, Environment: env, RowOffset: skip, RowLimit: n})
				}, func(skip int64, n int32) ([]db.Esim, error) {
					return q.ListEsimsInScopeFromOldest(ctx, db.ListEsimsInScopeFromOldestParams{AccountID: account, Environment: env, RowOffset: skip, RowLimit: n})
				})
			}
		case eq.Scope != nil:
			p := db.ListEsimsInScopeParams{AccountID: eq.Scope.AccountID, Environment: string(eq.Scope.Environment),
				OrderID: eq.OrderID, Iccid: eq.ICCID, Status: eq.Status, RowLimit: eq.Limit, RowOffset: eq.Offset}
			if rows, err = q.ListEsimsInScope(ctx, p); err == nil {
				total, err = q.CountEsimsInScope(ctx, db.CountEsimsInScopeParams{AccountID: p.AccountID,
					Environment: p.Environment, OrderID: p.OrderID, Iccid: p.Iccid, Status: p.Status})
			}
		default:
			if rows, err = q.ListAllEsims(ctx, db.ListAllEsimsParams{OrderID: eq.OrderID, Iccid: eq.ICCID, Status: eq.Status,
				RowLimit: eq.Limit, RowOffset: eq.Offset}); err == nil {
				total, err = q.CountAllEsims(ctx, db.CountAllEsimsParams{OrderID: eq.OrderID, Iccid: eq.ICCID, Status: eq.Status})
			}
		}
		if err != nil {
			return err
		}
		esims = make([]ordering.Esim, len(rows))
		for i, r := range rows {
			esims[i] = esim(r)
		}
		return withTopUps(ctx, q, esims)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list eSIMs: %w", err)
	}
	return esims, total, nil
}

// EsimByQRToken implements ordering.Store.
func (s *Store) EsimByQRToken(ctx context.Context, token string) (ordering.Esim, error) {
	row, err := s.q.EsimByQRToken(ctx, token)
	if err != nil {
		return ordering.Esim{}, notFound(err, "select eSIM by QR token")
	}
	return esim(row), nil
}

// UnfinishedOrders implements ordering.Store.
func (s *Store) UnfinishedOrders(ctx context.Context, createdBefore time.Time, limit int32) ([]ordering.Order, error) {
	rows, err := s.q.UnfinishedOrders(ctx, db.UnfinishedOrdersParams{CreatedBefore: createdBefore, RowLimit: limit})
	if err != nil {
		return nil, fmt.Errorf("select unfinished orders: %w", err)
	}
	orders := make([]ordering.Order, len(rows))
	for i, r := range rows {
		orders[i] = order(r)
	}
	return orders, nil
}

// notFound turns "no row" into the domain's ErrNotFound and wraps anything
// else with what was being done.
func notFound(err error, doing string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ordering.ErrNotFound
	}
	return fmt.Errorf("%s: %w", doing, err)
}

func order(r db.Order) ordering.Order {
	o := ordering.Order{
		ID:           r.ID,
		Kind:         ordering.OrderKind(r.Kind),
		Countries:    r.Countries,
		Scope:        ordering.Scope{AccountID: r.AccountID, Environment: ordering.Environment(r.Environment)},
		Fingerprint:  r.Fingerprint,
		PlanID:       r.PlanID,
		PlanName:     r.PlanName,
		PerDay:       r.PerDay,
		Unlimited:    r.Unlimited,
		TotalBytes:   r.TotalBytes,
		ValidityDays: r.ValidityDays,
		Quantity:     r.Quantity,
		Days:         r.Days,
		Currency:     ordering.Currency(r.Currency),
		UnitMinor:    r.UnitMinor,
		TotalMinor:   r.TotalMinor,
		Customer:     ordering.Customer{Name: r.CustomerName, Email: r.CustomerEmail, Reference: r.CustomerReference},
		Status:       ordering.Status(r.Status),
		// Postgres hands timestamps back in the session's zone; the
		// domain speaks UTC.
		CreatedAt: r.CreatedAt.UTC(),
	}
	if r.IdempotencyKey != nil {
		o.IdempotencyKey = *r.IdempotencyKey
	}
	if r.EsimID != nil {
		o.EsimID = *r.EsimID
	}
	if r.ErrorCode != nil && r.ErrorMessage != nil {
		o.Error = &ordering.OrderError{Code: *r.ErrorCode, Message: *r.ErrorMessage}
	}
	return o
}

func esim(r db.Esim) ordering.Esim {
	return ordering.Esim{
		ID:               r.ID,
		OrderID:          r.OrderID,
		Scope:            ordering.Scope{AccountID: r.AccountID, Environment: ordering.Environment(r.Environment)},
		PlanID:           r.PlanID,
		PerDay:           r.PerDay,
		Countries:        r.Countries,
		InstalledAt:      utcOrZero(r.InstalledAt),
		ActivatedAt:      utcOrZero(r.ActivatedAt),
		ExpiresAt:        utcOrZero(r.ExpiresAt),
		UsageNotified:    r.UsageNotified,
		ExpiringNotified: r.ExpiringNotified,
		Position:         r.Position,
		PlanName:         r.PlanName,
		ICCID:            r.Iccid,
		MatchingID:       r.MatchingID,
		SMDPAddress:      r.SmdpAddress,
		QRToken:          r.QrToken,
		Status:           r.Status,
		ValidityDays:     r.ValidityDays,
		Data: ordering.EsimData{
			Unlimited:  r.Unlimited,
			TotalBytes: r.TotalBytes,
			UsedBytes:  r.UsedBytes,
			UpdatedAt:  r.DataUpdatedAt.UTC(),
		},
		CreatedAt: r.CreatedAt.UTC(),
	}
}

// utcOrZero is a nullable time in UTC, zero for NULL.
func utcOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
