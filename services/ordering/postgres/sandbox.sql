-- name: AllocateSandboxProfiles :many
-- Allocates positions 0 to n-1, the i-th matching id going to position
-- i-1, and returns the order's profiles in one round trip. A position
-- already allocated keeps its profile (the no-op update only makes the
-- row returned): issuing an order again returns what the first time did.
-- nextval runs for those rows too; a gap in the serials costs nothing.
INSERT INTO sandbox_profiles (order_id, position, serial, matching_id)
SELECT sqlc.arg(order_id)::uuid, i - 1, nextval('sandbox_iccid_serial'), (sqlc.arg(matching_ids)::text[])[i]
FROM generate_subscripts(sqlc.arg(matching_ids)::text[], 1) AS i
ORDER BY i
ON CONFLICT (order_id, position) DO UPDATE SET position = sandbox_profiles.position
RETURNING position, serial, matching_id;
