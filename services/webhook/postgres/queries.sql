-- name: UpsertEndpoint :one
-- The first call for a scope creates its endpoint with the secret given;
-- later ones change the URL only, so a scope's secret changes by rotation
-- alone, and two first calls at once leave one secret.
INSERT INTO endpoints (account_id, environment, url, secret, secret_created_at, updated_at)
VALUES ($1, $2, $3, $4, sqlc.arg(now), sqlc.arg(now))
ON CONFLICT (account_id, environment) DO UPDATE SET url = excluded.url, updated_at = excluded.updated_at
RETURNING *;

-- name: GetEndpoint :one
SELECT * FROM endpoints WHERE account_id = $1 AND environment = $2;

-- name: AnyEndpoint :one
SELECT * FROM endpoints LIMIT 1;

-- name: RotateSecret :one
UPDATE endpoints
SET previous_secret = secret, previous_secret_expires_at = sqlc.arg(previous_expires_at),
    secret = sqlc.arg(secret), secret_created_at = sqlc.arg(now), updated_at = sqlc.arg(now)
WHERE account_id = $1 AND environment = $2
RETURNING *;

-- name: InsertEvent :one
-- With the URL of the scope's endpoint as it is, or no_endpoint without
-- one. No row when the id is taken: the event was stored before.
INSERT INTO events (id, type, account_id, environment, order_id, created_at, payload, trace_context, status, url)
SELECT sqlc.arg(id), sqlc.arg(type), sqlc.arg(account_id), sqlc.arg(environment)::text, sqlc.narg(order_id)::uuid,
       sqlc.arg(created_at), sqlc.arg(payload), sqlc.arg(trace_context),
       CASE WHEN e.url IS NULL THEN 'no_endpoint' ELSE 'pending' END, e.url
FROM (SELECT) AS one
LEFT JOIN endpoints e ON e.account_id = sqlc.arg(account_id) AND e.environment = sqlc.arg(environment)::text
ON CONFLICT (id) DO NOTHING
RETURNING status;

-- name: InsertEvents :many
-- InsertEvent for many events in one statement, in their order: the rows
-- of ids taken (stored before, or earlier in the same list) are not
-- returned.
INSERT INTO events (id, type, account_id, environment, order_id, created_at, payload, trace_context, status, url)
SELECT n.id, n.type, n.account_id, n.environment, n.order_id,
       n.created_at, n.payload, n.trace_context::jsonb,
       CASE WHEN e.url IS NULL THEN 'no_endpoint' ELSE 'pending' END, e.url
FROM (SELECT unnest(sqlc.arg(ids)::text[]) AS id, unnest(sqlc.arg(types)::text[]) AS type,
             unnest(sqlc.arg(account_ids)::uuid[]) AS account_id, unnest(sqlc.arg(environments)::text[]) AS environment,
             unnest(sqlc.arg(order_ids)::uuid[]) AS order_id, unnest(sqlc.arg(created_ats)::timestamptz[]) AS created_at,
             unnest(sqlc.arg(payloads)::text[]) AS payload, unnest(sqlc.arg(trace_contexts)::text[]) AS trace_context) AS n
LEFT JOIN endpoints e ON e.account_id = n.account_id AND e.environment = n.environment
ON CONFLICT (id) DO NOTHING
RETURNING id, status;

-- name: CountPendingUpTo :one
-- A scope's pending events, counted up to a bound: enough to tell a scope
-- with a backlog from one without, at a bounded cost however long it is.
SELECT count(*) FROM (
    SELECT 1 FROM events
    WHERE account_id = $1 AND environment = $2 AND status = 'pending'
    LIMIT sqlc.arg(up_to)::bigint
) AS pending;

-- name: LockEventForAttempt :one
-- Runs of one event's job (a job rescued from a replica thought dead
-- while it still ran) start their attempts one after the other.
SELECT id, account_id, environment, status, url, payload, trace_context
FROM events WHERE id = $1
FOR NO KEY UPDATE;

-- name: LockEndpointForAttempt :one
-- Attempts of one scope start one after the other from here to their
-- commit, so CountInFlight sees every attempt started before and the cap
-- holds exactly across replicas; the secrets are read as they are now.
SELECT * FROM endpoints WHERE account_id = $1 AND environment = $2
FOR NO KEY UPDATE;

-- name: CountInFlight :one
-- The scope's attempts in flight, of other events than the one starting
-- an attempt (whose own unfinished attempt a crash left).
SELECT count(*) FROM attempts a
JOIN events e ON e.id = a.event_id
WHERE NOT a.finished AND e.account_id = $1 AND e.environment = $2 AND a.event_id <> sqlc.arg(event_id);

-- name: LastAttempt :one
SELECT coalesce(max(number), 0)::integer FROM attempts WHERE event_id = $1;

-- name: InterruptAttempt :execrows
-- The attempt a replica left unfinished, dying or losing its lease.
UPDATE attempts SET finished = true, error = sqlc.arg(error)
WHERE event_id = $1 AND NOT finished;

-- name: InsertAttempt :exec
INSERT INTO attempts (event_id, number, started_at)
VALUES ($1, $2, clock_timestamp());

-- name: FinishAttempt :execrows
-- No row when the attempt was recorded as interrupted meanwhile.
UPDATE attempts
SET finished = true, duration_ms = sqlc.arg(duration_ms), status_code = sqlc.arg(status_code),
    error = sqlc.arg(error), response_body = sqlc.arg(response_body)
WHERE event_id = $1 AND number = $2 AND NOT finished;

-- name: SetEventStatus :exec
UPDATE events SET status = $2 WHERE id = $1;

-- name: EventInScope :one
SELECT * FROM events
WHERE id = sqlc.arg(id) AND (sqlc.arg(any_scope)::boolean
    OR (account_id = sqlc.arg(account_id) AND environment = sqlc.arg(environment)::text));

-- name: AttemptsOf :many
SELECT * FROM attempts WHERE event_id = ANY(sqlc.arg(event_ids)::text[]) ORDER BY event_id, number;

-- name: ListEventsInScope :many
SELECT * FROM events
WHERE account_id = sqlc.arg(account_id) AND environment = sqlc.arg(environment)::text
  AND (sqlc.arg(type)::text = '' OR type = sqlc.arg(type)::text)
  AND (sqlc.narg(order_id)::uuid IS NULL OR order_id = sqlc.narg(order_id)::uuid)
  AND (sqlc.arg(status)::text = '' OR status = sqlc.arg(status)::text)
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(row_limit)::integer OFFSET sqlc.arg(row_offset)::bigint;

-- name: ListEventsInScopeFromOldest :many
-- The same list read from its oldest end, oldest first: a page past the
-- middle of the list skips the fewer rows from there (the store turns it
-- round).
SELECT e.* FROM events e
WHERE e.account_id = sqlc.arg(account_id) AND e.environment = sqlc.arg(environment)::text
  AND (e.created_at, e.id) >= (
    SELECT s.created_at, s.id FROM events s
    WHERE s.account_id = sqlc.arg(account_id) AND s.environment >= sqlc.arg(environment)::text AND s.environment <= sqlc.arg(environment)::text
    ORDER BY s.environment DESC, s.created_at, s.id
    LIMIT 1 OFFSET sqlc.arg(row_offset)::bigint)
ORDER BY e.created_at, e.id
LIMIT sqlc.arg(row_limit)::integer;

-- name: ListEventsInScopeFrom :many
-- The unfiltered list, as ListEventsInScope: the page's first row is found
-- by an index-only scan of events_listing_idx, which skips a deep page's
-- offset without reading the skipped events, and the page is read from it.
-- The subquery names its environment as a range and orders by it: the
-- scope's index gives that order and the operators' index across scopes
-- (created_at, id) does not, so the planner cannot take the latter and
-- walk past every other scope's newer rows, which it would for a scope
-- holding most of the table.
SELECT e.* FROM events e
WHERE e.account_id = sqlc.arg(account_id) AND e.environment = sqlc.arg(environment)::text
  AND (e.created_at, e.id) <= (
    SELECT s.created_at, s.id FROM events s
    WHERE s.account_id = sqlc.arg(account_id) AND s.environment >= sqlc.arg(environment)::text AND s.environment <= sqlc.arg(environment)::text
    ORDER BY s.environment, s.created_at DESC, s.id DESC
    LIMIT 1 OFFSET sqlc.arg(row_offset)::bigint)
ORDER BY e.created_at DESC, e.id DESC
LIMIT sqlc.arg(row_limit)::integer;

-- name: EventTotal :one
-- The total of a scope's unfiltered list, kept by 00004's trigger: 0
-- before its first event.
SELECT COALESCE((SELECT total FROM event_totals
    WHERE account_id = sqlc.arg(account_id) AND environment = sqlc.arg(environment)::text), 0)::bigint AS total;

-- name: CountEventsInScope :one
SELECT count(*) FROM events
WHERE account_id = sqlc.arg(account_id) AND environment = sqlc.arg(environment)::text
  AND (sqlc.arg(type)::text = '' OR type = sqlc.arg(type)::text)
  AND (sqlc.narg(order_id)::uuid IS NULL OR order_id = sqlc.narg(order_id)::uuid)
  AND (sqlc.arg(status)::text = '' OR status = sqlc.arg(status)::text);

-- name: ListAllEvents :many
SELECT * FROM events
WHERE (sqlc.arg(type)::text = '' OR type = sqlc.arg(type)::text)
  AND (sqlc.narg(order_id)::uuid IS NULL OR order_id = sqlc.narg(order_id)::uuid)
  AND (sqlc.arg(status)::text = '' OR status = sqlc.arg(status)::text)
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(row_limit)::integer OFFSET sqlc.arg(row_offset)::bigint;

-- name: CountAllEvents :one
SELECT count(*) FROM events
WHERE (sqlc.arg(type)::text = '' OR type = sqlc.arg(type)::text)
  AND (sqlc.narg(order_id)::uuid IS NULL OR order_id = sqlc.narg(order_id)::uuid)
  AND (sqlc.arg(status)::text = '' OR status = sqlc.arg(status)::text);
