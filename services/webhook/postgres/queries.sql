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

-- name: InsertDelivery :exec
-- Due at once, by the database's clock, which every replica's claims
-- read.
INSERT INTO deliveries (event_id, account_id, environment, next_attempt_at)
VALUES ($1, $2, $3, clock_timestamp());

-- name: PickDue :one
-- The fairest due job of one environment whose scope has room for one
-- more attempt in flight: a scope with the fewest attempts in flight
-- first (one being served by none comes before those being served), a
-- first attempt before a retry, then the job due longest. Locked with its
-- endpoint's row: claims of one scope thus run one after the other from
-- here to their commit (CountInFlight then sees every claim before),
-- while claims of other scopes go past (SKIP LOCKED). NO KEY UPDATE, not
-- UPDATE, leaves the row free for the foreign keys of new deliveries.
WITH in_flight AS (
    SELECT f.account_id, count(*) AS n
    FROM deliveries f
    WHERE f.environment = sqlc.arg(environment)::text AND f.locked_until > clock_timestamp()
    GROUP BY f.account_id
)
SELECT d.event_id, d.account_id, d.environment, d.attempts,
       ev.url, ev.payload, ev.trace_context,
       e.secret, e.previous_secret, e.previous_secret_expires_at
FROM deliveries d
JOIN endpoints e ON e.account_id = d.account_id AND e.environment = d.environment
JOIN events ev ON ev.id = d.event_id
LEFT JOIN in_flight f ON f.account_id = d.account_id
WHERE d.environment = sqlc.arg(environment)::text
  AND d.next_attempt_at <= clock_timestamp()
  AND (d.locked_until IS NULL OR d.locked_until <= clock_timestamp())
  AND coalesce(f.n, 0) < sqlc.arg(max_per_scope)::bigint
ORDER BY coalesce(f.n, 0), d.attempts > 0, d.next_attempt_at, d.event_id
LIMIT 1
FOR NO KEY UPDATE OF d, e SKIP LOCKED;

-- name: CountInFlight :one
SELECT count(*) FROM deliveries
WHERE account_id = $1 AND environment = $2 AND locked_until > clock_timestamp();

-- name: InterruptAttempt :execrows
-- The attempt a replica left unfinished, dying or losing its lease.
UPDATE attempts SET finished = true, error = sqlc.arg(error)
WHERE event_id = $1 AND NOT finished;

-- name: LeaseDelivery :one
UPDATE deliveries
SET attempts = attempts + 1,
    locked_until = clock_timestamp() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond'
WHERE event_id = $1
RETURNING attempts;

-- name: InsertAttempt :exec
INSERT INTO attempts (event_id, number, started_at)
VALUES ($1, $2, clock_timestamp());

-- name: FinishAttempt :execrows
-- No row when the attempt was recorded as interrupted meanwhile.
UPDATE attempts
SET finished = true, duration_ms = sqlc.arg(duration_ms), status_code = sqlc.arg(status_code),
    error = sqlc.arg(error), response_body = sqlc.arg(response_body)
WHERE event_id = $1 AND number = $2 AND NOT finished;

-- name: RescheduleDelivery :execrows
UPDATE deliveries
SET locked_until = NULL,
    next_attempt_at = clock_timestamp() + sqlc.arg(retry_in_ms)::bigint * interval '1 millisecond'
WHERE event_id = $1 AND attempts = $2;

-- name: DeleteDelivery :execrows
DELETE FROM deliveries WHERE event_id = $1 AND attempts = $2;

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
