-- +goose Up
-- The totals of a scope's unfiltered GET /v1/events, kept as events are
-- inserted: counting a million rows for every page took longer than the
-- page. Events are never deleted, so inserts are all that changes them.
-- Filtered lists still count.
CREATE TABLE event_totals (
    account_id  uuid   NOT NULL,
    environment text   NOT NULL,
    total       bigint NOT NULL CHECK (total >= 0),
    PRIMARY KEY (account_id, environment)
);

-- Per statement, not per row: a batch of events adds to each scope's row
-- once, scopes in key order so two batches never wait on each other in a
-- cycle.
-- +goose StatementBegin
CREATE FUNCTION events_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO event_totals (account_id, environment, total)
    SELECT account_id, environment, count(*) FROM inserted
    GROUP BY account_id, environment ORDER BY account_id, environment
    ON CONFLICT (account_id, environment) DO UPDATE SET total = event_totals.total + EXCLUDED.total;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- The trigger first: CREATE TRIGGER holds off inserts until this
-- migration commits, so the count below misses none and counts none twice.
CREATE TRIGGER events_count AFTER INSERT ON events
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION events_count();

INSERT INTO event_totals (account_id, environment, total)
SELECT account_id, environment, count(*) FROM events GROUP BY account_id, environment;

-- +goose Down
DROP TRIGGER events_count ON events;
DROP FUNCTION events_count();
DROP TABLE event_totals;
