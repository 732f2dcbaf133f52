-- +goose Up
-- Delivery jobs are River jobs (river_job, made by rivermigrate, which the
-- service runs before these migrations): the deliveries table goes, and
-- the jobs still in it move into River's queue of their environment, due
-- when they were (a job leased by a replica when it stopped, once its
-- lease has run out: its next run records the attempt as interrupted).
-- The kind, queues, priorities and max_attempts are postgres/queue.go's.
-- +goose StatementBegin
DO $$
BEGIN
    IF to_regclass('river_job') IS NULL THEN
        IF EXISTS (SELECT 1 FROM deliveries) THEN
            RAISE EXCEPTION 'River''s tables are missing: run rivermigrate before this migration, or the pending deliveries would be lost';
        END IF;
        RETURN;
    END IF;
    INSERT INTO river_job (kind, queue, args, priority, attempt, max_attempts, state, scheduled_at)
    SELECT 'webhook_delivery', 'webhook_' || d.environment, jsonb_build_object('event_id', d.event_id),
           CASE WHEN d.attempts > 0 THEN 2 ELSE 1 END, d.attempts, 4, 'available',
           greatest(d.next_attempt_at, coalesce(d.locked_until, d.next_attempt_at))
    FROM deliveries d;
END
$$;
-- +goose StatementEnd
DROP TABLE deliveries;

-- Attempts in flight, which the per-endpoint cap counts.
CREATE INDEX attempts_unfinished_idx ON attempts (event_id) WHERE NOT finished;
-- A scope's pending events, which an event's priority counts at insert.
CREATE INDEX events_pending_idx ON events (account_id, environment) WHERE status = 'pending';

-- +goose Down
DROP INDEX events_pending_idx;
DROP INDEX attempts_unfinished_idx;
-- The jobs stay River's: a service rolled back finds none to deliver.
CREATE TABLE deliveries (
    event_id        text        PRIMARY KEY REFERENCES events (id),
    account_id      uuid        NOT NULL,
    environment     text        NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts BETWEEN 0 AND 3),
    next_attempt_at timestamptz NOT NULL,
    locked_until    timestamptz,
    CONSTRAINT deliveries_endpoint_fkey FOREIGN KEY (account_id, environment) REFERENCES endpoints (account_id, environment)
);
CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at, event_id);
CREATE INDEX deliveries_leased_idx ON deliveries (account_id, environment, locked_until) WHERE locked_until IS NOT NULL;
