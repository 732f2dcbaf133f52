-- +goose Up
-- Orders are kept for ever, and with them their idempotency keys (the
-- platform promises at least 30 days).
CREATE TABLE orders (
    id                 uuid        PRIMARY KEY,
    account_id         uuid        NOT NULL,
    environment        text        NOT NULL CHECK (environment IN ('sandbox', 'live')),
    -- NULL for an order placed without one: no replay protection.
    idempotency_key    text        CHECK (idempotency_key ~ '^[ -~]{1,255}$'),
    -- SHA-256 of the request, which a replay with the same key must match.
    fingerprint        bytea       NOT NULL CHECK (octet_length(fingerprint) = 32),
    plan_id            uuid        NOT NULL,
    -- The plan as it was priced: finishing an order never needs the
    -- catalogue, where the plan may have been retired since.
    plan_name          text        NOT NULL CHECK (plan_name <> ''),
    per_day            boolean     NOT NULL,
    unlimited          boolean     NOT NULL,
    total_bytes        bigint      NOT NULL,
    -- Each eSIM's: the plan's on fixed plans, the days ordered on per-day.
    validity_days      integer     NOT NULL CHECK (validity_days > 0),
    quantity           integer     NOT NULL CHECK (quantity BETWEEN 1 AND 50),
    -- 0 on fixed plans.
    days               integer     NOT NULL,
    currency           text        NOT NULL CHECK (currency IN ('USD', 'EUR', 'GBP')),
    unit_minor         bigint      NOT NULL CHECK (unit_minor > 0),
    total_minor        bigint      NOT NULL,
    customer_name      text        NOT NULL DEFAULT '' CHECK (char_length(customer_name) <= 120),
    customer_email     text        NOT NULL DEFAULT '' CHECK (char_length(customer_email) <= 255),
    customer_reference text        NOT NULL DEFAULT '' CHECK (char_length(customer_reference) <= 120),
    -- pending -> completed, or pending -> failing (provider failed, refund
    -- due) -> failed (refunded). See 00002 for the transitions.
    status             text        NOT NULL CHECK (status IN ('pending', 'failing', 'completed', 'failed')),
    error_code         text        CHECK (error_code IN ('provider_error')),
    error_message      text        CHECK (char_length(error_message) BETWEEN 1 AND 1000),
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    -- The wallet debits total_minor: an overflow fails here rather than wrap.
    CONSTRAINT orders_total_is_unit_times_quantity CHECK (total_minor = unit_minor * quantity),
    CONSTRAINT orders_days_only_per_day CHECK (
        CASE WHEN per_day THEN days BETWEEN 1 AND 365 AND validity_days = days ELSE days = 0 END),
    CONSTRAINT orders_per_day_is_unlimited CHECK (unlimited OR NOT per_day),
    CONSTRAINT orders_bytes_unless_unlimited CHECK (
        CASE WHEN unlimited THEN total_bytes = 0 ELSE total_bytes > 0 END),
    CONSTRAINT orders_error_when_failing_or_failed CHECK (
        (status IN ('failing', 'failed')) = (error_code IS NOT NULL)
        AND (error_code IS NULL) = (error_message IS NULL)),
    -- The target of esims' foreign key, which keeps an eSIM in its order's
    -- account and environment.
    CONSTRAINT orders_id_scope UNIQUE (id, account_id, environment)
);

-- One order per key in an account and environment: the idempotency record.
CREATE UNIQUE INDEX orders_idempotency_key_idx ON orders (account_id, environment, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- Lists are newest first; id breaks ties so pages never overlap.
CREATE INDEX orders_scope_created_at_idx ON orders (account_id, environment, created_at DESC, id DESC);
CREATE INDEX orders_created_at_idx ON orders (created_at DESC, id DESC);
-- The recovery loop's question, every few seconds: small, as few orders
-- are ever unfinished.
CREATE INDEX orders_unfinished_idx ON orders (created_at) WHERE status IN ('pending', 'failing');

-- luhn_valid reports whether a string of digits ends in the Luhn check
-- digit of the others.
-- +goose StatementBegin
CREATE FUNCTION luhn_valid(digits text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    -- CASE, not AND: only digits may reach the casts.
    SELECT CASE WHEN digits ~ '^[0-9]+$' THEN (
        SELECT sum(CASE WHEN (length(digits) - i) % 2 = 1
                        THEN (2 * substr(digits, i, 1)::int) / 10 + (2 * substr(digits, i, 1)::int) % 10
                        ELSE substr(digits, i, 1)::int END) % 10 = 0
        FROM generate_series(1, length(digits)) AS i) ELSE false END
$$;
-- +goose StatementEnd

CREATE TABLE esims (
    id              uuid        PRIMARY KEY,
    order_id        uuid        NOT NULL,
    account_id      uuid        NOT NULL,
    environment     text        NOT NULL,
    -- The eSIM's place in its order, from 0.
    position        integer     NOT NULL CHECK (position BETWEEN 0 AND 49),
    plan_name       text        NOT NULL CHECK (plan_name <> ''),
    -- 19 digits, 89 first (telecommunications), a Luhn check digit last.
    iccid           text        NOT NULL CHECK (iccid ~ '^89[0-9]{17}$' AND luhn_valid(iccid)),
    -- Both go into LPA:1$<smdp_address>$<matching_id>: printable, no
    -- space, no $.
    matching_id     text        NOT NULL CHECK (matching_id ~ '^[!-#%-~]{1,255}$'),
    smdp_address    text        NOT NULL CHECK (smdp_address ~ '^[!-#%-~]{1,255}$'),
    -- 32 random bytes, base64url: the unguessable name of the QR image.
    qr_token        text        NOT NULL CHECK (qr_token ~ '^[A-Za-z0-9_-]{43}$'),
    status          text        NOT NULL CHECK (status IN ('ALLOCATED')),
    validity_days   integer     NOT NULL CHECK (validity_days > 0),
    unlimited       boolean     NOT NULL,
    total_bytes     bigint      NOT NULL,
    used_bytes      bigint      NOT NULL DEFAULT 0 CHECK (used_bytes >= 0),
    data_updated_at timestamptz NOT NULL,
    created_at      timestamptz NOT NULL,
    CONSTRAINT esims_bytes_unless_unlimited CHECK (
        CASE WHEN unlimited THEN total_bytes = 0 ELSE total_bytes > 0 END),
    CONSTRAINT esims_order_scope FOREIGN KEY (order_id, account_id, environment)
        REFERENCES orders (id, account_id, environment),
    CONSTRAINT esims_order_position UNIQUE (order_id, position)
);

-- Unique across the platform, whatever provider issued them.
CREATE UNIQUE INDEX esims_iccid_idx ON esims (iccid);
CREATE UNIQUE INDEX esims_qr_token_idx ON esims (qr_token);
CREATE INDEX esims_scope_created_at_idx ON esims (account_id, environment, created_at DESC, id DESC);
CREATE INDEX esims_created_at_idx ON esims (created_at DESC, id DESC);

-- The sandbox provider's allocations: one per order and position, so that
-- issuing an order again returns the same profiles. serial is the ICCID's
-- body (8999, then 14 digits); 999 is no country's code, so no sandbox
-- ICCID can be a real one.
CREATE SEQUENCE sandbox_iccid_serial MINVALUE 1 MAXVALUE 99999999999999 NO CYCLE;

CREATE TABLE sandbox_profiles (
    order_id    uuid        NOT NULL REFERENCES orders (id),
    position    integer     NOT NULL CHECK (position BETWEEN 0 AND 49),
    serial      bigint      NOT NULL UNIQUE CHECK (serial BETWEEN 1 AND 99999999999999),
    matching_id text        NOT NULL UNIQUE CHECK (matching_id ~ '^[A-Z0-9]{5}(-[A-Z0-9]{5}){4}$'),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (order_id, position)
);

-- +goose Down
DROP TABLE sandbox_profiles;
DROP SEQUENCE sandbox_iccid_serial;
DROP TABLE esims;
DROP FUNCTION luhn_valid(text);
DROP TABLE orders;
