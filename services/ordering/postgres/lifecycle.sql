-- name: TopUpsOfEsims :many
-- Oldest first, as an eSIM shows them.
SELECT * FROM orders
WHERE esim_id = ANY(sqlc.arg(esim_ids)::uuid[])
ORDER BY esim_id, created_at, id;

-- name: LockEsimsByID :many
-- In id order, as every change takes its rows: two changes of the same
-- eSIMs queue rather than deadlock.
SELECT * FROM esims
WHERE id = ANY(sqlc.arg(ids)::uuid[]) AND (sqlc.arg(any_scope)::boolean
    OR (account_id = sqlc.arg(account_id) AND environment = sqlc.arg(environment)::text))
ORDER BY id
FOR UPDATE;

-- name: LockEsimsByICCID :many
SELECT * FROM esims
WHERE environment = sqlc.arg(environment)::text AND iccid = ANY(sqlc.arg(iccids)::text[])
ORDER BY id
FOR UPDATE;

-- name: UpdateEsims :execrows
-- The changed eSIMs in one statement, one array per column. A zero time
-- (0001-01-01, Go's zero, which pgx sends as is) stands for NULL: the
-- arrays cannot carry one.
UPDATE esims e SET
    status            = (sqlc.arg(statuses)::text[])[i],
    installed_at      = NULLIF((sqlc.arg(installed_at)::timestamptz[])[i], '0001-01-01 00:00:00+00'),
    activated_at      = NULLIF((sqlc.arg(activated_at)::timestamptz[])[i], '0001-01-01 00:00:00+00'),
    expires_at        = NULLIF((sqlc.arg(expires_at)::timestamptz[])[i], '0001-01-01 00:00:00+00'),
    used_bytes        = (sqlc.arg(used_bytes)::bigint[])[i],
    total_bytes       = (sqlc.arg(total_bytes)::bigint[])[i],
    validity_days     = (sqlc.arg(validity_days)::integer[])[i],
    data_updated_at   = (sqlc.arg(data_updated_at)::timestamptz[])[i],
    usage_notified    = (sqlc.arg(usage_notified)::integer[])[i],
    expiring_notified = (sqlc.arg(expiring_notified)::boolean[])[i]
FROM generate_subscripts(sqlc.arg(ids)::uuid[], 1) AS i
WHERE e.id = (sqlc.arg(ids)::uuid[])[i];

-- name: EsimsInUse :many
SELECT id, iccid FROM esims
WHERE environment = sqlc.arg(environment)::text AND status <> 'EXPIRED' AND id > sqlc.arg(after)::uuid
ORDER BY id
LIMIT sqlc.arg(row_limit)::integer;

-- name: DueEsims :many
-- Expired by now, or expiring within the notice and not told so.
SELECT id FROM esims
WHERE status IN ('ACTIVE', 'DEPLETED')
  AND expires_at <= sqlc.arg(notice_until)::timestamptz
  AND (expires_at <= sqlc.arg(now)::timestamptz OR NOT expiring_notified)
ORDER BY expires_at
LIMIT sqlc.arg(row_limit)::integer;
