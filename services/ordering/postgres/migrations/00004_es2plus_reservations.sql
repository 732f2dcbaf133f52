-- +goose Up
-- The profiles an SM-DP+ reserved over ES2+ for live orders, one per
-- position of an order, written as soon as downloadOrder answers: an order
-- resumed after a crash or by a retry continues with the profiles it
-- already holds instead of reserving a second set, and an order that fails
-- knows which ones to give back with cancelOrder.
CREATE TABLE es2plus_reservations (
    order_id        uuid        NOT NULL REFERENCES orders (id),
    position        integer     NOT NULL CHECK (position BETWEEN 0 AND 49),
    iccid           text        NOT NULL CHECK (luhn_valid(iccid) AND iccid ~ '^89[0-9]{17}$'),
    -- reserved: downloadOrder answered; released: confirmOrder with
    -- releaseFlag answered; cancel_due: the order failed and the profile
    -- must be given back; cancelled: cancelOrder answered;
    -- cancel_refused: the SM-DP+ refused the cancellation for good (an
    -- operator's matter, logged).
    state           text        NOT NULL CHECK (state IN ('reserved', 'released', 'cancel_due', 'cancelled', 'cancel_refused')),
    matching_id     text        CHECK (matching_id IS NULL OR length(matching_id) BETWEEN 1 AND 255),
    smdp_address    text        CHECK (smdp_address IS NULL OR length(smdp_address) BETWEEN 1 AND 255),
    -- Cancellations: how many were tried, the last one's error, and when
    -- the next may be (a lease: one canceller at a time).
    cancel_attempts integer     NOT NULL DEFAULT 0,
    last_error      text,
    next_attempt_at timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (order_id, position),
    CHECK ((state = 'released') = (matching_id IS NOT NULL AND smdp_address IS NOT NULL) OR state IN ('cancel_due', 'cancelled', 'cancel_refused')),
    CHECK ((state = 'cancel_due') = (next_attempt_at IS NOT NULL))
);

-- The canceller's question on every pass: small, as cancellations are rare.
CREATE INDEX es2plus_reservations_cancel_due_idx ON es2plus_reservations (next_attempt_at) WHERE state = 'cancel_due';

-- +goose Down
DROP TABLE es2plus_reservations;
