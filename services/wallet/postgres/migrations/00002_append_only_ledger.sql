-- +goose Up
-- The ledger is the record of what happened to partners' money: an entry,
-- once written, is never changed nor removed, whoever writes to the table
-- (a bug, a manual fix, a future writer that skips the domain). A mistake
-- is corrected by a new entry. A CHECK cannot see an UPDATE or a DELETE,
-- so triggers refuse them, and TRUNCATE, which skips row triggers.
-- +goose StatementBegin
CREATE FUNCTION ledger_entries_refuse_rewrite() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger entries are append-only: % refused', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER ledger_entries_refuse_rewrite BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_entries_refuse_rewrite();
CREATE TRIGGER ledger_entries_refuse_truncate BEFORE TRUNCATE ON ledger_entries
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_entries_refuse_rewrite();

-- +goose Down
DROP TRIGGER ledger_entries_refuse_truncate ON ledger_entries;
DROP TRIGGER ledger_entries_refuse_rewrite ON ledger_entries;
DROP FUNCTION ledger_entries_refuse_rewrite();
