-- name: AdvisoryTryLock :one
-- A session lock, held until unlocked or the session ends: the order's
-- processing spans calls to other services, which no transaction should.
SELECT pg_try_advisory_lock(hashtextextended(sqlc.arg(key)::text, 0));

-- name: ClaimInFlightSlot :one
-- The first free of the scope's max_slots places, locked on this session;
-- no row when all are taken. The filter runs row by row under the LIMIT,
-- so no place past the first free one is locked (a store test checks).
SELECT slot::integer FROM generate_series(1, sqlc.arg(max_slots)::integer) AS slot
WHERE pg_try_advisory_lock(hashtext(sqlc.arg(scope)::text), slot)
LIMIT 1;

-- name: AdvisoryUnlockAll :exec
-- The order's lock and its place in flight, at once.
SELECT pg_advisory_unlock_all();

-- name: InsertOrder :execrows
-- A taken id or idempotency key inserts nothing (0 rows), which the store
-- reports as a conflict without parsing constraint errors.
INSERT INTO orders (
    id, account_id, environment, idempotency_key, fingerprint, plan_id, plan_name, per_day,
    unlimited, total_bytes, validity_days, quantity, days, currency, unit_minor, total_minor,
    customer_name, customer_email, customer_reference, status, created_at, updated_at, kind, esim_id, countries
) VALUES (
    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, 'pending', $20, $20,
    sqlc.arg(kind)::text, sqlc.narg(esim_id)::uuid, sqlc.arg(countries)::text[]
)
ON CONFLICT DO NOTHING;

-- name: OrderByKey :one
SELECT * FROM orders
WHERE account_id = $1 AND environment = $2 AND idempotency_key = sqlc.arg(idempotency_key)::text;

-- name: OrderByID :one
SELECT * FROM orders WHERE id = $1;

-- name: OrderInScope :one
SELECT * FROM orders
WHERE id = sqlc.arg(id) AND (sqlc.arg(any_scope)::boolean
    OR (account_id = sqlc.arg(account_id) AND environment = sqlc.arg(environment)::text));

-- name: CompletedOrderInScope :many
-- A completed order and its eSIMs in one round trip, the commonest read;
-- no rows for an order without eSIMs (pending, failed) or out of scope,
-- which OrderInScope then reads. has_top_ups spares the commonest read a
-- second round trip for top-ups it does not have.
SELECT sqlc.embed(o), sqlc.embed(e),
    EXISTS (SELECT 1 FROM orders t WHERE t.esim_id = e.id) AS has_top_ups
FROM orders o
JOIN esims e ON e.order_id = o.id
WHERE o.id = sqlc.arg(id) AND (sqlc.arg(any_scope)::boolean
    OR (o.account_id = sqlc.arg(account_id) AND o.environment = sqlc.arg(environment)::text))
ORDER BY e.position;

-- name: OrdersInScopes :many
-- The orders of many lookups in one round trip, each found only in its own
-- scope: the gateway's concurrent reads share it.
SELECT sqlc.embed(o)
FROM orders o
JOIN ROWS FROM (unnest(sqlc.arg(ids)::uuid[]), unnest(sqlc.arg(account_ids)::uuid[]), unnest(sqlc.arg(environments)::text[])) AS l(id, account_id, environment)
    ON o.id = l.id AND o.account_id = l.account_id AND o.environment = l.environment;

-- name: DeletePendingOrder :execrows
DELETE FROM orders WHERE id = $1 AND status = 'pending';

-- name: MarkOrderFailing :execrows
UPDATE orders
SET status = 'failing', error_code = sqlc.arg(error_code)::text, error_message = sqlc.arg(error_message)::text,
    updated_at = now()
WHERE id = sqlc.arg(id) AND status = 'pending';

-- name: MarkOrderFailed :execrows
-- No row (0) when the order was not failing. Its event's publication is
-- inserted in the same transaction.
UPDATE orders SET status = 'failed', updated_at = now()
WHERE id = sqlc.arg(id) AND status = 'failing';

-- name: MarkOrderCompleted :execrows
-- As MarkOrderFailed, within the transaction that inserts the eSIMs.
UPDATE orders SET status = 'completed', updated_at = now()
WHERE id = sqlc.arg(id) AND status = 'pending';

-- name: InsertEsims :execrows
-- An order's eSIMs in one prepared statement, one array per column, with
-- the order's account and environment read in the same statement: a COPY
-- would first ask the server for the columns' types, a round trip more
-- for the commonest order, of one eSIM.
INSERT INTO esims (
    id, order_id, account_id, environment, position, plan_name, iccid, matching_id, smdp_address,
    qr_token, status, validity_days, unlimited, total_bytes, used_bytes, data_updated_at, created_at,
    plan_id, per_day, countries
)
SELECT (sqlc.arg(ids)::uuid[])[i], o.id, o.account_id, o.environment,
       (sqlc.arg(positions)::integer[])[i], (sqlc.arg(plan_names)::text[])[i], (sqlc.arg(iccids)::text[])[i],
       (sqlc.arg(matching_ids)::text[])[i], (sqlc.arg(smdp_addresses)::text[])[i], (sqlc.arg(qr_tokens)::text[])[i],
       (sqlc.arg(statuses)::text[])[i], (sqlc.arg(validity_days)::integer[])[i], (sqlc.arg(unlimited)::boolean[])[i],
       (sqlc.arg(total_bytes)::bigint[])[i], (sqlc.arg(used_bytes)::bigint[])[i], (sqlc.arg(data_updated_at)::timestamptz[])[i],
       (sqlc.arg(created_at)::timestamptz[])[i], o.plan_id, o.per_day, o.countries
FROM orders o CROSS JOIN generate_subscripts(sqlc.arg(ids)::uuid[], 1) AS i
WHERE o.id = sqlc.arg(order_id);

-- name: EsimsOfOrders :many
SELECT * FROM esims WHERE order_id = ANY(sqlc.arg(order_ids)::uuid[]) ORDER BY order_id, position;

-- name: ListOrdersInScope :many
-- An empty statuses or reference filters nothing. id breaks ties between
-- orders created in the same microsecond, so a page boundary never splits
-- them differently from one call to the next.
SELECT * FROM orders
WHERE account_id = sqlc.arg(account_id) AND environment = sqlc.arg(environment)::text AND kind = 'esims'
  AND (cardinality(sqlc.arg(statuses)::text[]) = 0 OR status = ANY(sqlc.arg(statuses)::text[]))
  AND (sqlc.arg(reference)::text = '' OR customer_reference = sqlc.arg(reference)::text)
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(row_limit)::integer OFFSET sqlc.arg(row_offset)::bigint;

-- name: ListOrdersInScopeFromOldest :many
-- The same list read from its oldest end, oldest first: a page past the
-- middle of the list skips the fewer rows from there (the store turns it
-- round).
SELECT o.* FROM orders o
WHERE o.account_id = sqlc.arg(account_id) AND o.environment = sqlc.arg(environment)::text AND o.kind = 'esims'
  AND (o.created_at, o.id) >= (
    SELECT s.created_at, s.id FROM orders s
    WHERE s.account_id = sqlc.arg(account_id) AND s.environment >= sqlc.arg(environment)::text AND s.environment <= sqlc.arg(environment)::text AND s.kind = 'esims'
    ORDER BY s.environment DESC, s.created_at, s.id
    LIMIT 1 OFFSET sqlc.arg(row_offset)::bigint)
ORDER BY o.created_at, o.id
LIMIT sqlc.arg(row_limit)::integer;

-- name: ListOrdersInScopeFrom :many
-- The unfiltered list, as ListOrdersInScope: the page's first row is found
-- by an index-only scan of orders_list_idx, which skips a deep page's
-- offset without reading the skipped orders, and the page is read from it.
-- The subquery names its environment as a range and orders by it: the
-- scope's index gives that order and the operators' index across scopes
-- (created_at, id) does not, so the planner cannot take the latter and
-- walk past every other scope's newer rows, which it would for a scope
-- holding most of the table.
SELECT o.* FROM orders o
WHERE o.account_id = sqlc.arg(account_id) AND o.environment = sqlc.arg(environment)::text AND o.kind = 'esims'
  AND (o.created_at, o.id) <= (
    SELECT s.created_at, s.id FROM orders s
    WHERE s.account_id = sqlc.arg(account_id) AND s.environment >= sqlc.arg(environment)::text AND s.environment <= sqlc.arg(environment)::text AND s.kind = 'esims'
    ORDER BY s.environment, s.created_at DESC, s.id DESC
    LIMIT 1 OFFSET sqlc.arg(row_offset)::bigint)
ORDER BY o.created_at DESC, o.id DESC
LIMIT sqlc.arg(row_limit)::integer;

-- name: ListTotal :one
-- The total of a scope's unfiltered list ('orders' or 'esims'), kept by
-- 00010's triggers in up to 8 slots: 0 before its first row.
SELECT COALESCE((SELECT sum(total) FROM list_totals
    WHERE account_id = sqlc.arg(account_id) AND environment = sqlc.arg(environment)::text AND list = sqlc.arg(list)::text), 0)::bigint AS total;

-- name: CountOrdersInScope :one
SELECT count(*) FROM orders
WHERE account_id = sqlc.arg(account_id) AND environment = sqlc.arg(environment)::text AND kind = 'esims'
  AND (cardinality(sqlc.arg(statuses)::text[]) = 0 OR status = ANY(sqlc.arg(statuses)::text[]))
  AND (sqlc.arg(reference)::text = '' OR customer_reference = sqlc.arg(reference)::text);

-- name: ListAllOrders :many
-- Operators' view, across accounts and environments.
SELECT * FROM orders
WHERE kind = 'esims' AND (cardinality(sqlc.arg(statuses)::text[]) = 0 OR status = ANY(sqlc.arg(statuses)::text[]))
  AND (sqlc.arg(reference)::text = '' OR customer_reference = sqlc.arg(reference)::text)
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(row_limit)::integer OFFSET sqlc.arg(row_offset)::bigint;

-- name: CountAllOrders :one
SELECT count(*) FROM orders
WHERE kind = 'esims' AND (cardinality(sqlc.arg(statuses)::text[]) = 0 OR status = ANY(sqlc.arg(statuses)::text[]))
  AND (sqlc.arg(reference)::text = '' OR customer_reference = sqlc.arg(reference)::text);

-- name: EsimInScope :one
SELECT * FROM esims
WHERE id = sqlc.arg(id) AND (sqlc.arg(any_scope)::boolean
    OR (account_id = sqlc.arg(account_id) AND environment = sqlc.arg(environment)::text));

-- name: EsimByQRToken :one
SELECT * FROM esims WHERE qr_token = $1;

-- name: ListEsimsInScope :many
-- The nil UUID, an empty ICCID and an empty status filter nothing.
SELECT * FROM esims
WHERE account_id = sqlc.arg(account_id) AND environment = sqlc.arg(environment)::text
  AND (sqlc.arg(order_id)::uuid = '00000000-0000-0000-0000-000000000000' OR order_id = sqlc.arg(order_id)::uuid)
  AND (sqlc.arg(iccid)::text = '' OR iccid = sqlc.arg(iccid)::text)
  AND (sqlc.arg(status)::text = '' OR status = sqlc.arg(status)::text)
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(row_limit)::integer OFFSET sqlc.arg(row_offset)::bigint;

-- name: ListEsimsInScopeFromOldest :many
-- The same list read from its oldest end, oldest first: a page past the
-- middle of the list skips the fewer rows from there (the store turns it
-- round).
SELECT e.* FROM esims e
WHERE e.account_id = sqlc.arg(account_id) AND e.environment = sqlc.arg(environment)::text
  AND (e.created_at, e.id) >= (
    SELECT s.created_at, s.id FROM esims s
    WHERE s.account_id = sqlc.arg(account_id) AND s.environment >= sqlc.arg(environment)::text AND s.environment <= sqlc.arg(environment)::text
    ORDER BY s.environment DESC, s.created_at, s.id
    LIMIT 1 OFFSET sqlc.arg(row_offset)::bigint)
ORDER BY e.created_at, e.id
LIMIT sqlc.arg(row_limit)::integer;

-- name: ListEsimsInScopeFrom :many
-- The unfiltered list, as ListEsimsInScope: the page's first row found by
-- an index-only scan of esims_scope_created_at_idx, the page read from it.
-- The subquery names its environment as a range and orders by it: the
-- scope's index gives that order and the operators' index across scopes
-- (created_at, id) does not, so the planner cannot take the latter and
-- walk past every other scope's newer rows, which it would for a scope
-- holding most of the table.
SELECT e.* FROM esims e
WHERE e.account_id = sqlc.arg(account_id) AND e.environment = sqlc.arg(environment)::text
  AND (e.created_at, e.id) <= (
    SELECT s.created_at, s.id FROM esims s
    WHERE s.account_id = sqlc.arg(account_id) AND s.environment >= sqlc.arg(environment)::text AND s.environment <= sqlc.arg(environment)::text
    ORDER BY s.environment, s.created_at DESC, s.id DESC
    LIMIT 1 OFFSET sqlc.arg(row_offset)::bigint)
ORDER BY e.created_at DESC, e.id DESC
LIMIT sqlc.arg(row_limit)::integer;

-- name: CountEsimsInScope :one
SELECT count(*) FROM esims
WHERE account_id = sqlc.arg(account_id) AND environment = sqlc.arg(environment)::text
  AND (sqlc.arg(order_id)::uuid = '00000000-0000-0000-0000-000000000000' OR order_id = sqlc.arg(order_id)::uuid)
  AND (sqlc.arg(iccid)::text = '' OR iccid = sqlc.arg(iccid)::text)
  AND (sqlc.arg(status)::text = '' OR status = sqlc.arg(status)::text);

-- name: ListAllEsims :many
SELECT * FROM esims
WHERE (sqlc.arg(order_id)::uuid = '00000000-0000-0000-0000-000000000000' OR order_id = sqlc.arg(order_id)::uuid)
  AND (sqlc.arg(iccid)::text = '' OR iccid = sqlc.arg(iccid)::text)
  AND (sqlc.arg(status)::text = '' OR status = sqlc.arg(status)::text)
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(row_limit)::integer OFFSET sqlc.arg(row_offset)::bigint;

-- name: CountAllEsims :one
SELECT count(*) FROM esims
WHERE (sqlc.arg(order_id)::uuid = '00000000-0000-0000-0000-000000000000' OR order_id = sqlc.arg(order_id)::uuid)
  AND (sqlc.arg(iccid)::text = '' OR iccid = sqlc.arg(iccid)::text)
  AND (sqlc.arg(status)::text = '' OR status = sqlc.arg(status)::text);

-- name: UnfinishedOrders :many
-- Oldest first: the longest wait is finished first.
SELECT * FROM orders
WHERE status IN ('pending', 'failing') AND created_at < sqlc.arg(created_before)::timestamptz
ORDER BY created_at, id
LIMIT sqlc.arg(row_limit)::integer;

-- name: SearchOrdersByReference :many
-- pattern is a LIKE prefix pattern ('abc%'), its wildcards escaped; the
-- COLLATE "C" expressions are orders_search_reference_idx's.
SELECT * FROM orders
WHERE account_id = sqlc.arg(account_id) AND environment = sqlc.arg(environment)::text
  AND kind = 'esims' AND customer_reference <> ''
  AND (customer_reference COLLATE "C") LIKE sqlc.arg(pattern)::text
ORDER BY (customer_reference COLLATE "C"), created_at DESC, id DESC
LIMIT sqlc.arg(row_limit)::integer;

-- name: SearchOrdersByEmail :many
-- Emails match in any case: both sides lower case.
SELECT * FROM orders
WHERE account_id = sqlc.arg(account_id) AND environment = sqlc.arg(environment)::text
  AND kind = 'esims' AND customer_email <> ''
  AND (lower(customer_email) COLLATE "C") LIKE lower(sqlc.arg(pattern)::text)
ORDER BY (lower(customer_email) COLLATE "C"), created_at DESC, id DESC
LIMIT sqlc.arg(row_limit)::integer;

-- name: SearchEsimsByICCID :many
SELECT * FROM esims
WHERE account_id = sqlc.arg(account_id) AND environment = sqlc.arg(environment)::text
  AND (iccid COLLATE "C") LIKE sqlc.arg(pattern)::text
ORDER BY (iccid COLLATE "C")
LIMIT sqlc.arg(row_limit)::integer;
