-- name: InsertAccount :execrows
-- A taken id inserts nothing (0 rows), which the store reports as a
-- conflict without parsing constraint errors.
INSERT INTO accounts (id, name, currency, rate_limit_per_minute, created_at, live_enabled)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO NOTHING;

-- name: GetAccount :one
SELECT id, name, currency, rate_limit_per_minute, created_at, live_enabled
FROM accounts
WHERE id = $1;

-- name: ListAccounts :many
SELECT id, name, currency, rate_limit_per_minute, created_at, live_enabled
FROM accounts
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(row_limit)::integer OFFSET sqlc.arg(row_offset)::bigint;

-- name: CountAccounts :one
SELECT count(*) FROM accounts;

-- name: SetRateLimit :one
UPDATE accounts
SET rate_limit_per_minute = $2
WHERE id = $1
RETURNING id, name, currency, rate_limit_per_minute, created_at, live_enabled;

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

-- name: EnableLive :one
UPDATE accounts
SET live_enabled = true
WHERE id = $1
RETURNING id, name, currency, rate_limit_per_minute, created_at, live_enabled;

-- name: InsertUser :execrows
-- A taken email inserts nothing (0 rows), reported as a conflict on the
-- email without parsing constraint errors, as InsertAccount does.
INSERT INTO users (id, account_id, email, password_hash, created_at, password_changed_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (email) DO NOTHING;

-- name: GetUser :one
SELECT id, account_id, email, password_hash, created_at, password_changed_at
FROM users
WHERE id = $1;

-- name: UserByEmail :one
SELECT id, account_id, email, password_hash, created_at, password_changed_at
FROM users
WHERE email = $1;

-- name: UserByEmailForUpdate :one
-- Locks the user whose password an invite resets, so a password change
-- running alongside cannot interleave with it.
SELECT id, account_id, email, password_hash, created_at, password_changed_at
FROM users
WHERE email = $1
FOR UPDATE;

-- name: SetPassword :execrows
-- Only while the hash is still the one the caller verified against: a
-- password changed meanwhile updates nothing (0 rows).
UPDATE users
SET password_hash = sqlc.arg(new_hash), password_changed_at = sqlc.arg(changed_at)
WHERE id = sqlc.arg(id) AND password_hash = sqlc.arg(old_hash);

-- name: InsertSession :exec
INSERT INTO sessions (token_hash, user_id, created_at, expires_at)
VALUES ($1, $2, $3, $4);

-- name: SessionByHash :one
SELECT s.token_hash, s.expires_at, s.revoked_at, sqlc.embed(u), sqlc.embed(a)
FROM sessions s
JOIN users u ON u.id = s.user_id
JOIN accounts a ON a.id = u.account_id
WHERE s.token_hash = $1;

-- name: RevokeSession :exec
-- COALESCE keeps the first revocation time, as for keys.
UPDATE sessions
SET revoked_at = COALESCE(revoked_at, sqlc.arg(revoked_at)::timestamptz)
WHERE token_hash = sqlc.arg(token_hash);

-- name: RevokeUserSessions :exec
UPDATE sessions
SET revoked_at = sqlc.arg(revoked_at)::timestamptz
WHERE user_id = sqlc.arg(user_id) AND revoked_at IS NULL;

-- name: InsertInvite :exec
INSERT INTO invites (token_hash, account_id, email, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5);

-- name: InviteByHash :one
-- Read without a lock, so an unknown or spent token is refused before the
-- password is hashed; InviteForUpdate decides.
SELECT token_hash, account_id, email, created_at, expires_at, used_at
FROM invites
WHERE token_hash = $1;

-- name: InviteForUpdate :one
-- The row lock is what makes an invite single-use: a second accept of the
-- same token waits here, then reads the invite as used.
SELECT token_hash, account_id, email, created_at, expires_at, used_at
FROM invites
WHERE token_hash = $1
FOR UPDATE;

-- name: UseInvite :exec
UPDATE invites
SET used_at = sqlc.arg(used_at)::timestamptz
WHERE token_hash = sqlc.arg(token_hash);

-- name: ListUsers :many
SELECT id, account_id, email, password_hash, created_at, password_changed_at
FROM users
WHERE account_id = $1
ORDER BY created_at, id;

-- name: LockAccount :one
-- Serialises removals of an account's users, so two of them cannot each
-- see the other's user and together remove the last one.
SELECT id FROM accounts WHERE id = $1 FOR UPDATE;

-- name: CountUsers :one
SELECT count(*) FROM users WHERE account_id = $1;

-- name: DeleteUserSessions :exec
DELETE FROM sessions WHERE user_id = $1;

-- name: DeleteUser :execrows
DELETE FROM users WHERE id = sqlc.arg(id) AND account_id = sqlc.arg(account_id);

-- name: InsertPasswordReset :exec
INSERT INTO password_resets (token_hash, user_id, created_at, expires_at)
VALUES ($1, $2, $3, $4);

-- name: PasswordResetByHash :one
-- Read without a lock, as InviteByHash; PasswordResetForUpdate decides.
SELECT r.token_hash, r.user_id, r.created_at, r.expires_at, r.used_at, u.email, a.name AS account_name
FROM password_resets r
JOIN users u ON u.id = r.user_id
JOIN accounts a ON a.id = u.account_id
WHERE r.token_hash = $1;

-- name: PasswordResetForUpdate :one
-- The row lock makes a reset single-use, as InviteForUpdate does invites.
SELECT token_hash, user_id, created_at, expires_at, used_at
FROM password_resets
WHERE token_hash = $1
FOR UPDATE;

-- name: UsePasswordReset :exec
UPDATE password_resets
SET used_at = sqlc.arg(used_at)::timestamptz
WHERE token_hash = sqlc.arg(token_hash);

-- name: ForcePassword :exec
UPDATE users
SET password_hash = sqlc.arg(new_hash), password_changed_at = sqlc.arg(changed_at)
WHERE id = sqlc.arg(id);

-- name: InsertLiveRequest :exec
-- The first request is kept: asking again changes nothing.
INSERT INTO live_requests (account_id, requested_by, requested_at)
VALUES ($1, $2, $3)
ON CONFLICT (account_id) DO NOTHING;

-- name: GetLiveRequest :one
SELECT l.requested_by, l.requested_at, sqlc.embed(a)
FROM live_requests l
JOIN accounts a ON a.id = l.account_id
WHERE l.account_id = $1;

-- name: ListLiveRequests :many
SELECT l.requested_by, l.requested_at, sqlc.embed(a)
FROM live_requests l
JOIN accounts a ON a.id = l.account_id
WHERE NOT a.live_enabled
ORDER BY l.requested_at, l.account_id;
