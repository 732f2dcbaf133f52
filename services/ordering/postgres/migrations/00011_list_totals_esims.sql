-- +goose Up
-- The eSIMs' list totals (00010's table), in a migration of their own:
-- see 00010. OR REPLACE, and the count set afresh rather than added, so
-- that applying it again (a development database of an earlier draft)
-- ends the same.
-- Per statement, not per row: an order's eSIMs, inserted in one
-- statement, add to their scope's row once.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION esims_count_list() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO list_totals (account_id, environment, list, slot, total)
    SELECT account_id, environment, 'esims', pg_backend_pid() % 8, count(*) FROM inserted
    GROUP BY account_id, environment ORDER BY account_id, environment
    ON CONFLICT (account_id, environment, list, slot) DO UPDATE SET total = list_totals.total + EXCLUDED.total;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE OR REPLACE TRIGGER esims_count_list AFTER INSERT ON esims
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION esims_count_list();

DELETE FROM list_totals WHERE list = 'esims';
INSERT INTO list_totals (account_id, environment, list, total)
SELECT account_id, environment, 'esims', count(*) FROM esims GROUP BY account_id, environment;

-- +goose Down
DROP TRIGGER esims_count_list ON esims;
DROP FUNCTION esims_count_list();
DELETE FROM list_totals WHERE list = 'esims';
