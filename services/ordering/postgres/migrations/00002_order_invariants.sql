-- +goose Up
-- The schema holds the rules of an order's life that the domain keeps, so
-- that a bug, a manual fix or a future writer that skips the domain cannot
-- break them: money was debited on the strength of these rows.

-- An order moves only forward (pending -> completed, pending -> failing ->
-- failed), its error is written once, when it starts failing, and nothing
-- else about it ever changes: what was priced is what was debited.
-- +goose StatementBegin
CREATE FUNCTION orders_refuse_rewrite() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.id, NEW.account_id, NEW.environment, NEW.idempotency_key, NEW.fingerprint, NEW.plan_id,
        NEW.plan_name, NEW.per_day, NEW.unlimited, NEW.total_bytes, NEW.validity_days, NEW.quantity,
        NEW.days, NEW.currency, NEW.unit_minor, NEW.total_minor, NEW.customer_name, NEW.customer_email,
        NEW.customer_reference, NEW.created_at)
       IS DISTINCT FROM
       (OLD.id, OLD.account_id, OLD.environment, OLD.idempotency_key, OLD.fingerprint, OLD.plan_id,
        OLD.plan_name, OLD.per_day, OLD.unlimited, OLD.total_bytes, OLD.validity_days, OLD.quantity,
        OLD.days, OLD.currency, OLD.unit_minor, OLD.total_minor, OLD.customer_name, OLD.customer_email,
        OLD.customer_reference, OLD.created_at) THEN
        RAISE EXCEPTION 'order %: only its status and error may change', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status
       AND (OLD.status, NEW.status) NOT IN (('pending', 'completed'), ('pending', 'failing'), ('failing', 'failed')) THEN
        RAISE EXCEPTION 'order %: % cannot become %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF (NEW.error_code, NEW.error_message) IS DISTINCT FROM (OLD.error_code, OLD.error_message)
       AND NOT (OLD.status = 'pending' AND NEW.status = 'failing') THEN
        RAISE EXCEPTION 'order %: its error is written once, when it starts failing', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER orders_refuse_rewrite BEFORE UPDATE ON orders
    FOR EACH ROW EXECUTE FUNCTION orders_refuse_rewrite();

-- Only a pending order goes away: the one whose debit was refused, which
-- frees its key. A debited one stays for ever.
-- +goose StatementBegin
CREATE FUNCTION orders_refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status <> 'pending' THEN
        RAISE EXCEPTION 'order % is %: only a pending order may be deleted', OLD.id, OLD.status
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN OLD;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER orders_refuse_delete BEFORE DELETE ON orders
    FOR EACH ROW EXECUTE FUNCTION orders_refuse_delete();

-- A completed order has exactly quantity eSIMs, at positions 0 to
-- quantity - 1, and any other order none. Rows are written one by one, so
-- the check runs at commit (a deferred constraint trigger), once the
-- transaction that completes an order has written all of them.
-- +goose StatementBegin
CREATE FUNCTION orders_check_esims() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    target uuid;
    o orders%ROWTYPE;
    n integer;
    top integer;
BEGIN
    -- A row of orders has no order_id, one of esims no quantity: each
    -- field is read only where it exists.
    IF TG_TABLE_NAME = 'orders' THEN
        target := NEW.id;
    ELSE
        target := NEW.order_id;
    END IF;
    SELECT * INTO o FROM orders WHERE id = target;
    IF NOT FOUND THEN
        RETURN NULL; -- deleted since, with no eSIMs (the foreign key saw to that)
    END IF;
    SELECT count(*), max(e.position) INTO n, top FROM esims e WHERE e.order_id = o.id;
    IF o.status = 'completed' AND (n <> o.quantity OR top <> o.quantity - 1) THEN
        RAISE EXCEPTION 'order % completed with % eSIMs (positions up to %), not %', o.id, n, top, o.quantity
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF o.status <> 'completed' AND n > 0 THEN
        RAISE EXCEPTION 'order % is % with % eSIMs: only a completed order has eSIMs', o.id, o.status, n
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE CONSTRAINT TRIGGER orders_check_esims AFTER INSERT OR UPDATE ON orders
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION orders_check_esims();
CREATE CONSTRAINT TRIGGER esims_check_order AFTER INSERT ON esims
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION orders_check_esims();

-- An eSIM stays the profile it was issued as, in the order it was issued
-- for; only its status and data use may change (later issues track them).
-- +goose StatementBegin
CREATE FUNCTION esims_refuse_rewrite() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'eSIM % was issued: it is never deleted', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF (NEW.id, NEW.order_id, NEW.account_id, NEW.environment, NEW.position, NEW.plan_name, NEW.iccid,
        NEW.matching_id, NEW.smdp_address, NEW.qr_token, NEW.validity_days, NEW.unlimited, NEW.total_bytes,
        NEW.created_at)
       IS DISTINCT FROM
       (OLD.id, OLD.order_id, OLD.account_id, OLD.environment, OLD.position, OLD.plan_name, OLD.iccid,
        OLD.matching_id, OLD.smdp_address, OLD.qr_token, OLD.validity_days, OLD.unlimited, OLD.total_bytes,
        OLD.created_at) THEN
        RAISE EXCEPTION 'eSIM %: only its status and data use may change', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER esims_refuse_rewrite BEFORE UPDATE OR DELETE ON esims
    FOR EACH ROW EXECUTE FUNCTION esims_refuse_rewrite();

-- +goose Down
DROP TRIGGER esims_refuse_rewrite ON esims;
DROP FUNCTION esims_refuse_rewrite();
DROP TRIGGER esims_check_order ON esims;
DROP TRIGGER orders_check_esims ON orders;
DROP FUNCTION orders_check_esims();
DROP TRIGGER orders_refuse_delete ON orders;
DROP FUNCTION orders_refuse_delete();
DROP TRIGGER orders_refuse_rewrite ON orders;
DROP FUNCTION orders_refuse_rewrite();
