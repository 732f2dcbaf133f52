-- +goose Up
-- The events of orders that reached their final status, each written in
-- the transaction that moved the status and published to Kafka by the
-- relay afterwards: Kafka being down delays an event but never loses it,
-- and an event is never published for a status that did not commit.
CREATE TABLE outbox (
    -- The relay publishes oldest first.
    seq           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- What consumers dedupe on: the same on every publication.
    event_id      text        NOT NULL UNIQUE CHECK (event_id ~ '^evt_[0-9a-f]{32}$'),
    type          text        NOT NULL CHECK (type IN ('order.completed', 'order.failed')),
    -- An order reaches its final status once: one event each.
    order_id      uuid        NOT NULL UNIQUE REFERENCES orders (id),
    -- When the order reached its final status.
    created_at    timestamptz NOT NULL,
    -- The W3C trace context of the order's processing, as a JSON object
    -- of header names to values ({} when untraced): the publication
    -- joins the order's trace.
    trace_context jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(trace_context) = 'object'),
    -- NULL until published; published rows go after OUTBOX_RETENTION.
    sent_at       timestamptz
);

-- The relay's question, on every order and every poll: small, as rows
-- wait only milliseconds unless Kafka is down.
CREATE INDEX outbox_unsent_idx ON outbox (seq) WHERE sent_at IS NULL;
-- The retention's.
CREATE INDEX outbox_sent_at_idx ON outbox (sent_at) WHERE sent_at IS NOT NULL;

-- +goose Down
DROP TABLE outbox;
