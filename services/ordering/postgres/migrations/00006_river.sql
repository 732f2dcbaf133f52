-- +goose Up
-- River's river_job becomes ordering's one queue. The events still waiting
-- in the outbox become jobs of the same publication (jobs.PublishEvent),
-- oldest first, and the outbox goes; the orders with profiles due for
-- cancellation get the canceller's job (jobs.CancelProfiles), and the
-- reservations' lease (next_attempt_at) goes. The service migrates
-- River's schema (rivermigrate) before this, so river_job exists whenever
-- there are rows to move; a database with none (a new one, a test's)
-- never needs it.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM outbox WHERE sent_at IS NULL) THEN
        INSERT INTO river_job (kind, queue, max_attempts, args)
        SELECT 'ordering.publish_event', 'events', 25,
               jsonb_build_object('event_id', event_id, 'type', type, 'order_id', order_id,
                                  'created_at', created_at, 'trace_context', trace_context)
        FROM outbox
        WHERE sent_at IS NULL
        ORDER BY seq;
    END IF;
    IF EXISTS (SELECT 1 FROM es2plus_reservations WHERE state = 'cancel_due') THEN
        INSERT INTO river_job (kind, queue, max_attempts, args)
        SELECT 'ordering.cancel_profiles', 'cancellations', 25, jsonb_build_object('order_id', order_id)
        FROM es2plus_reservations
        WHERE state = 'cancel_due'
        GROUP BY order_id;
    END IF;
END
$$;
-- +goose StatementEnd
DROP TABLE outbox;
-- Its CHECK and index go with it.
ALTER TABLE es2plus_reservations DROP COLUMN next_attempt_at;

-- +goose Down
ALTER TABLE es2plus_reservations ADD COLUMN next_attempt_at timestamptz;
UPDATE es2plus_reservations SET next_attempt_at = now() WHERE state = 'cancel_due';
ALTER TABLE es2plus_reservations ADD CHECK ((state = 'cancel_due') = (next_attempt_at IS NOT NULL));
CREATE INDEX es2plus_reservations_cancel_due_idx ON es2plus_reservations (next_attempt_at) WHERE state = 'cancel_due';
-- Empty: the events it would hold wait in river_job.
CREATE TABLE outbox (
    seq           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id      text        NOT NULL UNIQUE CHECK (event_id ~ '^evt_[0-9a-f]{32}$'),
    type          text        NOT NULL CHECK (type IN ('order.completed', 'order.failed')),
    order_id      uuid        NOT NULL UNIQUE REFERENCES orders (id),
    created_at    timestamptz NOT NULL,
    trace_context jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(trace_context) = 'object'),
    sent_at       timestamptz
);
CREATE INDEX outbox_unsent_idx ON outbox (seq) WHERE sent_at IS NULL;
CREATE INDEX outbox_sent_at_idx ON outbox (sent_at) WHERE sent_at IS NOT NULL;
