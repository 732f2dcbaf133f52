-- +goose Up
-- One endpoint per account and environment. Accounts live in the accounts
-- service's database, so account_id references nothing here.
CREATE TABLE endpoints (
    account_id                 uuid        NOT NULL,
    environment                text        NOT NULL CHECK (environment IN ('sandbox', 'live')),
    url                        text        NOT NULL CHECK (char_length(url) BETWEEN 1 AND 2048),
    -- Signing secrets, sealed with AES-256-GCM under SECRETS_KEY (never
    -- stored in the clear): the current one, and the one it replaced
    -- while that still signs beside it.
    secret                     bytea       NOT NULL,
    secret_created_at          timestamptz NOT NULL,
    previous_secret            bytea,
    previous_secret_expires_at timestamptz,
    updated_at                 timestamptz NOT NULL,
    PRIMARY KEY (account_id, environment),
    CONSTRAINT endpoints_previous_secret_expires CHECK ((previous_secret IS NULL) = (previous_secret_expires_at IS NULL))
);

-- Every event, as consumed from Kafka or made here (ping), with the body
-- every attempt sends. Events are never deleted by the service.
CREATE TABLE events (
    -- Ordering's id, the dedupe key of a message read twice.
    id            text        PRIMARY KEY CHECK (id ~ '^evt_[0-9a-f]{32}$'),
    type          text        NOT NULL CHECK (type IN ('order.completed', 'order.failed', 'ping')),
    account_id    uuid        NOT NULL,
    environment   text        NOT NULL CHECK (environment IN ('sandbox', 'live')),
    order_id      uuid,
    created_at    timestamptz NOT NULL,
    -- Rendered once: text, not jsonb, which would re-render it and
    -- break the signatures of the bytes already sent.
    payload       text        NOT NULL,
    -- The W3C trace context (traceparent, tracestate) the event was
    -- stored under, which every attempt's span continues.
    trace_context jsonb       NOT NULL DEFAULT '{}',
    status        text        NOT NULL CHECK (status IN ('pending', 'delivered', 'failed', 'no_endpoint')),
    -- The endpoint's URL when the event was stored: where every attempt
    -- goes, whatever the endpoint says later.
    url           text,
    CONSTRAINT events_url_unless_no_endpoint CHECK ((status = 'no_endpoint') = (url IS NULL)),
    CONSTRAINT events_order_unless_ping CHECK ((type = 'ping') = (order_id IS NULL))
);

-- A scope's events, newest first; id breaks ties so pages never overlap.
CREATE INDEX events_listing_idx ON events (account_id, environment, created_at DESC, id DESC);
-- Every scope's, for operators.
CREATE INDEX events_created_idx ON events (created_at DESC, id DESC);
CREATE INDEX events_order_idx ON events (order_id) WHERE order_id IS NOT NULL;

-- The delivery jobs still to do: a pending event's row, deleted in the
-- transaction that makes the event delivered or failed, so the queue
-- stays as small as the work in hand.
CREATE TABLE deliveries (
    event_id        text        PRIMARY KEY REFERENCES events (id),
    -- The event's, here for the per-endpoint cap of the claim.
    account_id      uuid        NOT NULL,
    environment     text        NOT NULL,
    -- Attempts started, counted when one is claimed, before it is sent:
    -- at most 3, whatever crashes.
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts BETWEEN 0 AND 3),
    next_attempt_at timestamptz NOT NULL,
    -- Set while a replica holds the job, in the middle of an attempt;
    -- past it the job is another's to take over.
    locked_until    timestamptz,
    CONSTRAINT deliveries_endpoint_fkey FOREIGN KEY (account_id, environment) REFERENCES endpoints (account_id, environment)
);

CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at, event_id);
CREATE INDEX deliveries_leased_idx ON deliveries (account_id, environment, locked_until) WHERE locked_until IS NOT NULL;

-- Every attempt, inserted when it starts (finished false) and completed
-- with its result.
CREATE TABLE attempts (
    event_id      text        NOT NULL REFERENCES events (id),
    number        integer     NOT NULL CHECK (number BETWEEN 1 AND 3),
    started_at    timestamptz NOT NULL,
    finished      boolean     NOT NULL DEFAULT false,
    -- NULL while in flight, and for an attempt cut short by a crash,
    -- whose duration nobody measured.
    duration_ms   bigint      CHECK (duration_ms >= 0),
    status_code   integer     NOT NULL DEFAULT 0 CHECK (status_code BETWEEN 0 AND 999),
    error         text        NOT NULL DEFAULT '',
    -- The first KiB of the answer, as bytes: it need not be text.
    response_body bytea       NOT NULL DEFAULT '' CHECK (length(response_body) <= 1024),
    PRIMARY KEY (event_id, number),
    CONSTRAINT attempts_result_when_finished CHECK (finished OR (status_code = 0 AND error = '' AND duration_ms IS NULL))
);

-- +goose Down
DROP TABLE attempts;
DROP TABLE deliveries;
DROP TABLE events;
DROP TABLE endpoints;
