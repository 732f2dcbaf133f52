-- name: ES2PlusReservations :many
SELECT order_id, position, iccid, state, matching_id, smdp_address, cancel_attempts, last_error, call_id, profile_type
FROM es2plus_reservations
WHERE order_id = $1
ORDER BY position;

-- name: RequestES2PlusReservation :exec
-- Before its downloadOrder is sent.
INSERT INTO es2plus_reservations (order_id, position, state, call_id, profile_type)
VALUES ($1, $2, 'requested', sqlc.arg(call_id)::text, sqlc.arg(profile_type)::text);

-- name: AddES2PlusReservation :execrows
-- downloadOrder answered: the requested position holds iccid.
UPDATE es2plus_reservations
SET state = 'reserved', iccid = sqlc.arg(iccid)::text, updated_at = now()
WHERE order_id = $1 AND position = $2 AND state = 'requested';

-- name: ForgetES2PlusRequest :execrows
-- downloadOrder was refused: the position holds nothing.
DELETE FROM es2plus_reservations
WHERE order_id = $1 AND position = $2 AND state = 'requested';

-- name: LearnES2PlusCancelICCID :execrows
-- A cancellation's call sent again answered what it had reserved.
UPDATE es2plus_reservations
SET iccid = sqlc.arg(iccid)::text, updated_at = now()
WHERE order_id = $1 AND position = $2 AND state = 'cancel_due' AND iccid IS NULL;

-- name: ReleaseES2PlusReservation :execrows
UPDATE es2plus_reservations
SET state = 'released', matching_id = sqlc.arg(matching_id)::text, smdp_address = sqlc.arg(smdp_address)::text, updated_at = now()
WHERE order_id = $1 AND position = $2 AND state = 'reserved';

-- name: MarkES2PlusCancelDue :many
-- Every profile the order holds, or may hold, is to be given back but one
-- another eSIM has (an SM-DP+ that issued an ICCID twice: it is that
-- eSIM's); the first attempt is the caller's, the canceller's job waits
-- for the order's lock.
UPDATE es2plus_reservations r
SET state = 'cancel_due', last_error = sqlc.arg(reason)::text, updated_at = now()
WHERE r.order_id = sqlc.arg(order_id) AND r.state IN ('requested', 'reserved', 'released')
  AND (r.iccid IS NULL OR NOT EXISTS (SELECT 1 FROM esims e WHERE e.iccid = r.iccid))
RETURNING r.order_id, r.position, r.iccid, r.state, r.matching_id, r.smdp_address, r.cancel_attempts, r.last_error, r.call_id, r.profile_type;

-- name: FinishES2PlusCancellation :execrows
UPDATE es2plus_reservations
SET state = sqlc.arg(state), cancel_attempts = cancel_attempts + 1, last_error = sqlc.narg(last_error),
    updated_at = now()
WHERE order_id = $1 AND position = $2 AND state = 'cancel_due';

-- name: RetryES2PlusCancellation :execrows
UPDATE es2plus_reservations
SET cancel_attempts = cancel_attempts + 1, last_error = sqlc.arg(last_error)::text, updated_at = now()
WHERE order_id = $1 AND position = $2 AND state = 'cancel_due';
