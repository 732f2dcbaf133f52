-- name: EntryByReference :one
-- The idempotency lookup: the entry a reference names, if any.
SELECT id, account_id, environment, kind, amount_minor, currency, reference,
       balance_after_minor, actor, note, created_at
FROM ledger_entries
WHERE account_id = $1 AND environment = $2 AND kind = $3 AND reference = $4;

-- name: EnsureBalance :exec
-- Creates an empty balance in the given currency unless the account has
-- one in this environment. No conflict target: a concurrent first credit
-- may trip either unique index (the key or the currency's), and both are
-- waited for and skipped rather than raised.
INSERT INTO balances (account_id, environment, currency, amount_minor, updated_at)
VALUES ($1, $2, $3, 0, clock_timestamp())
ON CONFLICT DO NOTHING;

-- name: Credit :one
-- Adds to a balance held in the given currency; no row for one held in
-- another. The time is read once the row is locked (clock_timestamp, not
-- the transaction's now()), so a balance's entries are in the order its
-- amount moved.
UPDATE balances
SET amount_minor = amount_minor + sqlc.arg(amount_minor),
    updated_at = clock_timestamp()
WHERE account_id = $1 AND environment = $2 AND currency = $3
RETURNING amount_minor, updated_at;

-- name: Debit :one
-- Takes from a balance that covers the amount; no row when it does not
-- (or does not exist, or is in another currency). The guard and the
-- subtraction are one statement on the locked row, so concurrent debits
-- cannot both pass it on the same money.
UPDATE balances
SET amount_minor = amount_minor - sqlc.arg(amount_minor),
    updated_at = clock_timestamp()
WHERE account_id = $1 AND environment = $2 AND currency = $3
  AND amount_minor >= sqlc.arg(amount_minor)
RETURNING amount_minor, updated_at;

-- name: InsertEntry :one
-- No row when an entry of the kind with the reference exists: the caller
-- rolls back what it moved and answers with that entry.
INSERT INTO ledger_entries (id, account_id, environment, kind, amount_minor, currency,
                            reference, balance_after_minor, actor, note, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (account_id, environment, kind, reference) DO NOTHING
RETURNING id, account_id, environment, kind, amount_minor, currency, reference,
          balance_after_minor, actor, note, created_at;

-- name: GetBalance :one
SELECT account_id, environment, currency, amount_minor, updated_at
FROM balances
WHERE account_id = $1 AND environment = $2;

-- name: ListEntries :many
SELECT id, account_id, environment, kind, amount_minor, currency, reference,
       balance_after_minor, actor, note, created_at
FROM ledger_entries
WHERE account_id = $1 AND environment = $2
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(row_limit)::integer OFFSET sqlc.arg(row_offset)::bigint;

-- name: CountEntries :one
SELECT count(*) FROM ledger_entries WHERE account_id = $1 AND environment = $2;
