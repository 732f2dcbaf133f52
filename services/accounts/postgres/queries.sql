-- name: InsertAccount :execrows
-- A taken id inserts nothing (0 rows), which the store reports as a
-- conflict without parsing constraint errors.
INSERT INTO accounts (id, name, currency, rate_limit_per_minute, created_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO NOTHING;

-- name: GetAccount :one
SELECT id, name, currency, rate_limit_per_minute, created_at
FROM accounts
WHERE id = $1;

-- name: ListAccounts :many
SELECT id, name, currency, rate_limit_per_minute, created_at
FROM accounts
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(row_limit)::integer OFFSET sqlc.arg(row_offset)::bigint;

-- name: CountAccounts :one
SELECT count(*) FROM accounts;

-- name: SetRateLimit :one
UPDATE accounts
SET rate_limit_per_minute = $2
WHERE id = $1
RETURNING id, name, currency, rate_limit_per_minute, created_at;

-- name: InsertKey :exec
INSERT INTO api_keys (id, account_id, environment, prefix, name, secret_hash, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: ListKeys :many
-- id breaks ties between keys created in the same microsecond, so a page
-- boundary never splits them differently from one call to the next.
SELECT id, account_id, environment, prefix, name, created_at, revoked_at
FROM api_keys
WHERE account_id = sqlc.arg(account_id)
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(row_limit)::integer OFFSET sqlc.arg(row_offset)::bigint;

-- name: CountKeys :one
SELECT count(*) FROM api_keys WHERE account_id = $1;

-- name: RevokeKey :one
-- COALESCE keeps the first revocation time, so revoking twice is a no-op.
UPDATE api_keys
SET revoked_at = COALESCE(revoked_at, sqlc.arg(revoked_at)::timestamptz)
WHERE id = sqlc.arg(id) AND account_id = sqlc.arg(account_id)
RETURNING id, account_id, environment, prefix, name, created_at, revoked_at;

-- name: KeyByHash :one
SELECT k.id, k.account_id, k.environment, k.prefix, k.name, k.created_at, k.revoked_at,
       k.secret_hash, a.currency, a.rate_limit_per_minute
FROM api_keys k
JOIN accounts a ON a.id = k.account_id
WHERE k.secret_hash = $1;
