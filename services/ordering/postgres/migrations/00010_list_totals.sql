-- +goose Up
-- The totals of a scope's unfiltered lists (GET /v1/orders and
-- /v1/esims), kept as rows are inserted: counting a million rows for
-- every page took longer than the page. Orders and eSIMs are never
-- deleted but for a pending order refused before it was charged, which
-- takes itself off again. Filtered lists still count. A scope's total is
-- the sum of up to 8 slots, each connection adding to (or taking from)
-- its own, by its backend pid, so a slot alone may be negative: one row
-- per scope would queue every order of an account behind the one before
-- it until it commits.
CREATE TABLE list_totals (
    account_id  uuid     NOT NULL,
    environment text     NOT NULL,
    list        text     NOT NULL CHECK (list IN ('orders', 'esims')),
    slot        smallint NOT NULL DEFAULT 0 CHECK (slot BETWEEN 0 AND 7),
    total       bigint   NOT NULL,
    PRIMARY KEY (account_id, environment, list, slot)
);

-- Per statement, not per row: rows inserted in one statement add to
-- their scope's row once, scopes in key order, so two statements of
-- several scopes never wait on each other in a cycle.
-- +goose StatementBegin
CREATE FUNCTION orders_count_list() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO list_totals (account_id, environment, list, slot, total)
    SELECT account_id, environment, 'orders', pg_backend_pid() % 8, count(*) FROM inserted WHERE kind = 'esims'
    GROUP BY account_id, environment ORDER BY account_id, environment
    ON CONFLICT (account_id, environment, list, slot) DO UPDATE SET total = list_totals.total + EXCLUDED.total;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION orders_uncount_list() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO list_totals (account_id, environment, list, slot, total)
    SELECT account_id, environment, 'orders', pg_backend_pid() % 8, -count(*) FROM deleted WHERE kind = 'esims'
    GROUP BY account_id, environment ORDER BY account_id, environment
    ON CONFLICT (account_id, environment, list, slot) DO UPDATE SET total = list_totals.total + EXCLUDED.total;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- The triggers first: CREATE TRIGGER holds off inserts until this
-- migration commits, so the count below misses none and counts none
-- twice. eSIMs are 00011's: a transaction that locked both tables would
-- deadlock with the running release's writes, which lock them in either
-- order.
CREATE TRIGGER orders_count_list AFTER INSERT ON orders
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION orders_count_list();
CREATE TRIGGER orders_uncount_list AFTER DELETE ON orders
    REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION orders_uncount_list();

INSERT INTO list_totals (account_id, environment, list, total)
SELECT account_id, environment, 'orders', count(*) FROM orders WHERE kind = 'esims' GROUP BY account_id, environment
ON CONFLICT (account_id, environment, list, slot) DO UPDATE SET total = EXCLUDED.total;

-- +goose Down
DROP TRIGGER orders_uncount_list ON orders;
DROP FUNCTION orders_uncount_list();
DROP TRIGGER orders_count_list ON orders;
DROP FUNCTION orders_count_list();
DROP TABLE list_totals;
