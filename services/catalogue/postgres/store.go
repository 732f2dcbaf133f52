// Package postgres is the catalogue's Store on Postgres, through pgx/v5 and
// the sqlc-generated queries in db.
package postgres

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/services/catalogue"
	"github.com/esimplatform/esim/services/catalogue/postgres/db"
)

// Store keeps plans in the catalogue's own database.
type Store struct {
	pool *pgxpool.Pool
}

var _ catalogue.Store = (*Store)(nil)

// NewStore returns a Store over a pool whose database is migrated with
// Migrations.
func NewStore(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool}
}

// ListActivePlans implements catalogue.Store.
func (s *Store) ListActivePlans(ctx context.Context, q catalogue.ListQuery) ([]catalogue.Plan, int, error) {
	// The domain validates paging; the store still refuses to read an
	// unbounded page for a caller that skips it, and fails rather than
	// clamp, since a clamped page would disagree with the caller's paging.
	if q.Limit < 1 || q.Limit > catalogue.MaxPageLimit || q.Offset < 0 || q.Offset > math.MaxInt32 {
		return nil, 0, fmt.Errorf("list plans: page of %d plans at offset %d is out of range (limit 1..%d)", q.Limit, q.Offset, catalogue.MaxPageLimit)
	}
	// An empty array is contained in every plan's countries: no filter.
	countries := q.Countries
	if countries == nil {
		countries = []string{}
	}
	params := db.ListActivePlansParams{
		Countries: countries, PlanType: string(q.Type), Currency: string(q.Currency),
		Lim: int32(q.Limit), Off: int32(q.Offset),
	}
	rows, err := db.New(s.pool).ListActivePlans(ctx, params)
	if err != nil {
		return nil, 0, fmt.Errorf("list plans: %w", err)
	}
	var total int64
	if len(rows) > 0 {
		total = rows[0].Total
	} else {
		// A page past the end has no row to carry the total. Counting in
		// a statement of its own would see plans committed since the
		// page was read (an empty page with a total that says it is not
		// past the end), so the page is read again with its count in one
		// snapshot. Only empty pages pay for it.
		err = libpostgres.InSnapshot(ctx, s.pool, func(tx pgx.Tx) error {
			qs := db.New(tx)
			var err error
			if rows, err = qs.ListActivePlans(ctx, params); err != nil {
				return err
			}
			if len(rows) > 0 {
				total = rows[0].Total
				return nil
			}
			total, err = qs.CountActivePlans(ctx, db.CountActivePlansParams{
				Countries: countries, PlanType: string(q.Type), Currency: string(q.Currency),
			})
			return err
		})
		if err != nil {
			return nil, 0, fmt.Errorf("list plans: %w", err)
		}
	}
	plans := make([]catalogue.Plan, len(rows))
	for i, r := range rows {
		plans[i] = toPlan(r.Plan, r.PriceCurrencies, r.PriceAmounts)
	}
	return plans, int(total), nil
}

// GetPlan implements catalogue.Store.
func (s *Store) GetPlan(ctx context.Context, id uuid.UUID) (catalogue.Plan, error) {
	return getPlan(ctx, db.New(s.pool), id)
}

func getPlan(ctx context.Context, qs *db.Queries, id uuid.UUID) (catalogue.Plan, error) {
	plans, err := getPlans(ctx, qs, []uuid.UUID{id})
	if err != nil {
		return catalogue.Plan{}, err
	}
	if len(plans) == 0 {
		return catalogue.Plan{}, catalogue.ErrNotFound
	}
	return plans[0], nil
}

// GetPlans implements catalogue.Store.
func (s *Store) GetPlans(ctx context.Context, ids []uuid.UUID) ([]catalogue.Plan, error) {
	return getPlans(ctx, db.New(s.pool), ids)
}

func getPlans(ctx context.Context, qs *db.Queries, ids []uuid.UUID) ([]catalogue.Plan, error) {
	rows, err := qs.GetPlans(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("get %d plans: %w", len(ids), err)
	}
	// A plan's rows arrive one per price, in no particular order.
	plans := make([]catalogue.Plan, 0, len(ids))
	index := make(map[uuid.UUID]int, len(ids))
	for _, r := range rows {
		i, seen := index[r.Plan.ID]
		if !seen {
			i = len(plans)
			index[r.Plan.ID] = i
			plans = append(plans, toPlan(r.Plan, nil, nil))
		}
		if r.Currency.Valid {
			plans[i].Prices = append(plans[i].Prices, catalogue.Price{Currency: catalogue.Currency(r.Currency.String), Amount: r.AmountMinor.Int64})
		}
	}
	for _, p := range plans {
		slices.SortFunc(p.Prices, func(a, b catalogue.Price) int { return cmp.Compare(a.Currency, b.Currency) })
	}
	return plans, nil
}

// Analyze refreshes the planner's statistics of the catalogue's tables
// (the server does at every start): without statistics Postgres reads
// every plan to find one by id (five times the cost of the index on the
// seed catalogue), and autovacuum may analyse late or, where it is off,
// never.
func (s *Store) Analyze(ctx context.Context) error {
	if err := db.New(s.pool).AnalyzeCatalogue(ctx); err != nil {
		return fmt.Errorf("analyze catalogue tables: %w", err)
	}
	return nil
}

// UpsertPlans implements catalogue.Store.
func (s *Store) UpsertPlans(ctx context.Context, plans []catalogue.Plan, merge catalogue.MergeFunc) (catalogue.UpsertResult, error) {
	var res catalogue.UpsertResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		qs := db.New(tx)
		if err := qs.LockCatalogueWrites(ctx); err != nil {
			return fmt.Errorf("lock catalogue writes: %w", err)
		}
		ids := make([]uuid.UUID, len(plans))
		for i, p := range plans {
			ids[i] = p.ID
		}
		locked, err := qs.LockPlans(ctx, ids)
		if err != nil {
			return fmt.Errorf("lock plans: %w", err)
		}
		storedPlans, err := withPrices(ctx, qs, locked)
		if err != nil {
			return err
		}
		stored := make(map[uuid.UUID]*catalogue.Plan, len(storedPlans))
		for i := range storedPlans {
			stored[storedPlans[i].ID] = &storedPlans[i]
		}

		var writes []catalogue.Plan
		for _, in := range plans {
			old := stored[in.ID]
			w, changed, err := merge(old, in)
			if err != nil {
				// Returned as it is (a domain error keeps its type), and
				// the transaction rolls back: nothing of the batch is
				// written.
				return err
			}
			switch {
			case !changed:
				res.Unchanged++
				continue
			case old == nil:
				res.Created++
			default:
				res.Updated++
			}
			writes = append(writes, w)
		}
		return writePlans(ctx, qs, writes)
	})
	if err != nil {
		return catalogue.UpsertResult{}, err
	}
	return res, nil
}

// writePlans writes plans and replaces their prices, in three round trips
// however many plans there are: seeding hundreds of plans at start must not
// cost hundreds of round trips.
func writePlans(ctx context.Context, qs *db.Queries, plans []catalogue.Plan) error {
	if len(plans) == 0 {
		return nil
	}
	// Upserts run one at a time (LockCatalogueWrites). Writing in id
	// order, as LockPlans locks, would still keep two batches that create
	// the same new plans from deadlocking without that lock.
	plans = slices.SortedFunc(slices.Values(plans), func(a, b catalogue.Plan) int {
		return bytes.Compare(a.ID[:], b.ID[:])
	})
	params := make([]db.UpsertPlanParams, len(plans))
	ids := make([]uuid.UUID, len(plans))
	var priceIDs []uuid.UUID
	var currencies []string
	var amounts []int64
	for i, p := range plans {
		ids[i] = p.ID
		params[i] = db.UpsertPlanParams{
			ID: p.ID, Name: p.Name, Type: string(p.Type), Scope: string(p.Scope),
			Countries: p.Countries, Region: p.Region, Unlimited: p.Unlimited,
			TotalBytes: p.TotalBytes, ValidityDays: int32(p.ValidityDays), Status: string(p.Status),
			CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
		}
		for _, pr := range p.Prices {
			priceIDs = append(priceIDs, p.ID)
			currencies = append(currencies, string(pr.Currency))
			amounts = append(amounts, pr.Amount)
		}
	}
	var batchErr error
	qs.UpsertPlan(ctx, params).Exec(func(i int, err error) {
		if err != nil && batchErr == nil {
			batchErr = fmt.Errorf("upsert plan %s: %w", params[i].ID, err)
		}
	})
	if batchErr != nil {
		return batchErr
	}
	// Prices are replaced wholesale, all of a plan's currencies at once;
	// the schema checks at commit that each plan has every one.
	if err := qs.DeletePrices(ctx, ids); err != nil {
		return fmt.Errorf("delete prices: %w", err)
	}
	if err := qs.InsertPrices(ctx, db.InsertPricesParams{PlanIds: priceIDs, Currencies: currencies, Amounts: amounts}); err != nil {
		return fmt.Errorf("insert prices: %w", err)
	}
	return nil
}

// RetirePlan implements catalogue.Store.
func (s *Store) RetirePlan(ctx context.Context, id uuid.UUID, at time.Time) (catalogue.Plan, error) {
	var p catalogue.Plan
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		qs := db.New(tx)
		_, err := qs.RetirePlan(ctx, db.RetirePlanParams{ID: id, UpdatedAt: at})
		// No row means unknown or already retired; getPlan tells which.
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("retire plan %s: %w", id, err)
		}
		p, err = getPlan(ctx, qs, id)
		return err
	})
	if err != nil {
		return catalogue.Plan{}, err
	}
	return p, nil
}

// withPrices converts rows to domain plans with their prices, fetched in
// one query for all of them.
func withPrices(ctx context.Context, qs *db.Queries, rows []db.Plan) ([]catalogue.Plan, error) {
	plans := make([]catalogue.Plan, len(rows))
	if len(rows) == 0 {
		return plans, nil
	}
	ids := make([]uuid.UUID, len(rows))
	index := make(map[uuid.UUID]int, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
		index[r.ID] = i
		plans[i] = toPlan(r, nil, nil)
	}
	prices, err := qs.PricesOf(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("plan prices: %w", err)
	}
	// Rows come sorted by currency, which is the order Plan.Prices promises.
	for _, pr := range prices {
		p := &plans[index[pr.PlanID]]
		p.Prices = append(p.Prices, catalogue.Price{Currency: catalogue.Currency(pr.Currency), Amount: pr.AmountMinor})
	}
	return plans, nil
}

// toPlan converts a row and its prices, given as parallel arrays sorted by
// currency (the order Plan.Prices promises).
func toPlan(r db.Plan, currencies []string, amounts []int64) catalogue.Plan {
	p := catalogue.Plan{
		ID: r.ID, Name: r.Name, Type: catalogue.PlanType(r.Type), Scope: catalogue.Scope(r.Scope),
		Countries: r.Countries, Region: r.Region, Unlimited: r.Unlimited,
		TotalBytes: r.TotalBytes, ValidityDays: int(r.ValidityDays), Status: catalogue.Status(r.Status),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
	for i, c := range currencies {
		p.Prices = append(p.Prices, catalogue.Price{Currency: catalogue.Currency(c), Amount: amounts[i]})
	}
	return p
}
