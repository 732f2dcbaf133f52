-- name: ES2PlusReservations :many
SELECT order_id, position, iccid, state, matching_id, smdp_address, cancel_attempts, last_error
FROM es2plus_reservations
WHERE order_id = $1
ORDER BY position;

-- name: AddES2PlusReservation :exec
INSERT INTO es2plus_reservations (order_id, position, iccid, state)
VALUES ($1, $2, $3, 'reserved');

-- name: ReleaseES2PlusReservation :execrows
UPDATE es2plus_reservations
SET state = 'released', matching_id = sqlc.arg(matching_id)::text, smdp_address = sqlc.arg(smdp_address)::text, updated_at = now()
WHERE order_id = $1 AND position = $2 AND state = 'reserved';

-- name: MarkES2PlusCancelDue :many
-- Every profile the order holds is to be given back; the first attempt is
-- the caller's, the canceller's only after the lease.
UPDATE es2plus_reservations
SET state = 'cancel_due', next_attempt_at = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond', last_error = sqlc.arg(reason)::text, updated_at = now()
WHERE order_id = $1 AND state IN ('reserved', 'released')
RETURNING order_id, position, iccid, state, matching_id, smdp_address, cancel_attempts, last_error;

-- name: ClaimES2PlusCancellations :many
-- Takes the due cancellations under a lease, so that replicas never send
-- one at once; a canceller that dies lets the lease run out.
UPDATE es2plus_reservations r
SET next_attempt_at = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond', updated_at = now()
FROM (
    SELECT order_id, position FROM es2plus_reservations
    WHERE state = 'cancel_due' AND next_attempt_at <= now()
    ORDER BY next_attempt_at
    LIMIT sqlc.arg(max_rows)
    FOR UPDATE SKIP LOCKED
) due
WHERE r.order_id = due.order_id AND r.position = due.position
RETURNING r.order_id, r.position, r.iccid, r.state, r.matching_id, r.smdp_address, r.cancel_attempts, r.last_error;

-- name: FinishES2PlusCancellation :execrows
UPDATE es2plus_reservations
SET state = sqlc.arg(state), cancel_attempts = cancel_attempts + 1, last_error = sqlc.narg(last_error),
    next_attempt_at = NULL, updated_at = now()
WHERE order_id = $1 AND position = $2 AND state = 'cancel_due';

-- name: RetryES2PlusCancellation :execrows
UPDATE es2plus_reservations
SET cancel_attempts = cancel_attempts + 1, last_error = sqlc.arg(last_error)::text,
    next_attempt_at = now() + sqlc.arg(backoff_ms)::bigint * interval '1 millisecond', updated_at = now()
WHERE order_id = $1 AND position = $2 AND state = 'cancel_due';
