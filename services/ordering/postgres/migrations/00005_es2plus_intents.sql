-- +goose Up
-- ICCIDs of 18 to 20 digits, as SM-DP+s issue them (SGP.22 allows up to
-- 20; a padding F is dropped before they are stored).
ALTER TABLE esims DROP CONSTRAINT esims_iccid_check;
ALTER TABLE esims ADD CONSTRAINT esims_iccid_check CHECK (iccid ~ '^89[0-9]{16,18}$' AND luhn_valid(iccid));

-- A reservation is recorded before its downloadOrder is sent: requested,
-- with the functionCallIdentifier and profile type of the call, so an
-- answer that is lost (a timeout, a crash, an answer that could not be
-- read) leaves a record from which the call is sent again under the same
-- identifier, to learn what the SM-DP+ reserved and use it or give it
-- back. Until then its ICCID is unknown.
ALTER TABLE es2plus_reservations
    ADD COLUMN call_id text CHECK (call_id IS NULL OR length(call_id) BETWEEN 1 AND 64),
    ADD COLUMN profile_type text CHECK (profile_type IS NULL OR length(profile_type) BETWEEN 1 AND 64),
    ALTER COLUMN iccid DROP NOT NULL,
    DROP CONSTRAINT es2plus_reservations_iccid_check,
    ADD CONSTRAINT es2plus_reservations_iccid_check CHECK (iccid IS NULL OR (luhn_valid(iccid) AND iccid ~ '^89[0-9]{16,18}$')),
    DROP CONSTRAINT es2plus_reservations_state_check,
    ADD CONSTRAINT es2plus_reservations_state_check CHECK (state IN ('requested', 'reserved', 'released', 'cancel_due', 'cancelled', 'cancel_refused')),
    -- Only a call whose answer is still unknown has no ICCID: requested,
    -- due for cancellation (sent again first) or found to hold nothing.
    ADD CONSTRAINT es2plus_reservations_known_check CHECK (iccid IS NOT NULL OR (state IN ('requested', 'cancel_due', 'cancelled') AND call_id IS NOT NULL AND profile_type IS NOT NULL));

-- +goose Down
DELETE FROM es2plus_reservations WHERE iccid IS NULL;
ALTER TABLE es2plus_reservations
    DROP CONSTRAINT es2plus_reservations_known_check,
    DROP CONSTRAINT es2plus_reservations_state_check,
    ADD CONSTRAINT es2plus_reservations_state_check CHECK (state IN ('reserved', 'released', 'cancel_due', 'cancelled', 'cancel_refused')),
    DROP CONSTRAINT es2plus_reservations_iccid_check,
    ADD CONSTRAINT es2plus_reservations_iccid_check CHECK (luhn_valid(iccid) AND iccid ~ '^89[0-9]{17}$'),
    ALTER COLUMN iccid SET NOT NULL,
    DROP COLUMN profile_type,
    DROP COLUMN call_id;
ALTER TABLE esims DROP CONSTRAINT esims_iccid_check;
ALTER TABLE esims ADD CONSTRAINT esims_iccid_check CHECK (iccid ~ '^89[0-9]{17}$' AND luhn_valid(iccid));
