-- Filters are written so the empty value means "any": an empty array is
-- contained in every array, so countries @> '{}' keeps every plan and the
-- GIN index still serves countries @> '{JP}'.

-- One statement answers a page: the plans, the total (the window is
-- computed before LIMIT) and each plan's prices, all from one snapshot and
-- one round trip. An empty page carries no total; the store then reads the
-- page again and CountActivePlans in one read-only snapshot.
-- name: ListActivePlans :many
SELECT sqlc.embed(p),
       count(*) OVER () AS total,
       (SELECT coalesce(array_agg(pp.currency ORDER BY pp.currency), '{}')
          FROM plan_prices pp WHERE pp.plan_id = p.id)::text[] AS price_currencies,
       (SELECT coalesce(array_agg(pp.amount_minor ORDER BY pp.currency), '{}')
          FROM plan_prices pp WHERE pp.plan_id = p.id)::bigint[] AS price_amounts
FROM plans p
WHERE p.status = 'active'
  AND p.countries @> sqlc.arg(countries)::text[]
  AND (sqlc.arg(plan_type)::text = '' OR p.type = sqlc.arg(plan_type)::text)
  AND (sqlc.arg(currency)::text = ''
       OR EXISTS (SELECT 1 FROM plan_prices pp WHERE pp.plan_id = p.id AND pp.currency = sqlc.arg(currency)::text))
ORDER BY p.created_at DESC, p.id DESC
LIMIT sqlc.arg(lim) OFFSET sqlc.arg(off);

-- name: CountActivePlans :one
SELECT count(*)
FROM plans p
WHERE p.status = 'active'
  AND p.countries @> sqlc.arg(countries)::text[]
  AND (sqlc.arg(plan_type)::text = '' OR p.type = sqlc.arg(plan_type)::text)
  AND (sqlc.arg(currency)::text = ''
       OR EXISTS (SELECT 1 FROM plan_prices pp WHERE pp.plan_id = p.id AND pp.currency = sqlc.arg(currency)::text));

-- The hot read of the gateway: plans and their prices in one statement, so
-- one snapshot and one round trip without a transaction, for as many ids as
-- the gateway coalesced (one, when it is idle). Unknown ids have no row.
-- One row per plan and price, grouped by the caller: a plain join probes
-- both primary keys, where aggregating each plan's prices into arrays cost
-- Postgres a sort and an aggregate per plan, twice the whole statement.
-- name: GetPlans :many
SELECT sqlc.embed(p), pp.currency, pp.amount_minor
FROM plans p
LEFT JOIN plan_prices pp ON pp.plan_id = p.id
WHERE p.id = ANY(sqlc.arg(ids)::uuid[]);

-- Until autovacuum analyses them (never, where it is off), Postgres has no
-- statistics for freshly seeded tables and scans every plan to find one.
-- name: AnalyzeCatalogue :exec
ANALYZE plans, plan_prices;

-- Serialises the catalogue's writers for the rest of the transaction.
-- Row locks (LockPlans) cover only plans that exist: two upserts of a new
-- plan (two replicas seeding at once, or an operator's import racing the
-- seed) would each find nothing, each decide it was new, and the later
-- would overwrite the earlier blind, status included, so a plan imported
-- as retired came back active. Upserts are rare and short, so one lock for
-- all of them costs nothing; reads and RetirePlan do not take it.
-- name: LockCatalogueWrites :exec
SELECT pg_advisory_xact_lock(hashtextextended('esim.catalogue.plans', 0));

-- Holds the plans an upsert merges against, until it commits: RetirePlan
-- takes no advisory lock, so a retirement waits for the upsert, or the
-- upsert reads it. Upserts themselves already run one at a time
-- (LockCatalogueWrites); id order would keep the row locks alone free of
-- deadlocks too.
-- name: LockPlans :many
SELECT * FROM plans WHERE id = ANY(sqlc.arg(ids)::uuid[]) ORDER BY id FOR UPDATE;

-- name: PricesOf :many
SELECT plan_id, currency, amount_minor
FROM plan_prices
WHERE plan_id = ANY(sqlc.arg(plan_ids)::uuid[])
ORDER BY plan_id, currency;

-- created_at is not in the update list: a replaced plan keeps the time it
-- was first sold, even when two writers race to create it.
-- name: UpsertPlan :batchexec
INSERT INTO plans (id, name, type, scope, countries, region, unlimited, total_bytes,
                   validity_days, status, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT (id) DO UPDATE SET
    name          = EXCLUDED.name,
    type          = EXCLUDED.type,
    scope         = EXCLUDED.scope,
    countries     = EXCLUDED.countries,
    region        = EXCLUDED.region,
    unlimited     = EXCLUDED.unlimited,
    total_bytes   = EXCLUDED.total_bytes,
    validity_days = EXCLUDED.validity_days,
    status        = EXCLUDED.status,
    updated_at    = EXCLUDED.updated_at;

-- name: DeletePrices :exec
DELETE FROM plan_prices WHERE plan_id = ANY(sqlc.arg(plan_ids)::uuid[]);

-- name: InsertPrices :exec
INSERT INTO plan_prices (plan_id, currency, amount_minor)
SELECT unnest(sqlc.arg(plan_ids)::uuid[]), unnest(sqlc.arg(currencies)::text[]), unnest(sqlc.arg(amounts)::bigint[]);

-- Only an active plan is updated, so retiring twice keeps the first
-- retirement time.
-- name: RetirePlan :one
UPDATE plans SET status = 'retired', updated_at = sqlc.arg(updated_at)
WHERE id = sqlc.arg(id) AND status <> 'retired'
RETURNING *;
