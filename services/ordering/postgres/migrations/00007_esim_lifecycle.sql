-- +goose Up
-- The eSIM after its order (DESIGN 3b): its lifecycle, usage, expiry and
-- top-ups. A top-up is an order of kind 'topup' for one eSIM, so that it
-- is priced, debited, provisioned, refunded, replayed and recovered as
-- orders are; it has no eSIMs of its own.
ALTER TABLE orders
    ADD COLUMN kind text NOT NULL DEFAULT 'esims' CHECK (kind IN ('esims', 'topup')),
    ADD COLUMN esim_id uuid,
    -- The plan's countries when priced: what a top-up of its eSIMs must
    -- cover. Orders placed before this migration cover none known ('{}'),
    -- so any plan of their type tops them up.
    ADD COLUMN countries text[] NOT NULL DEFAULT '{}' CHECK (array_position(countries, NULL) IS NULL),
    ADD CONSTRAINT orders_topup_of_one_esim CHECK ((kind = 'topup') = (esim_id IS NOT NULL) AND (kind = 'esims' OR quantity = 1));

ALTER TABLE esims
    ADD COLUMN plan_id uuid,
    ADD COLUMN per_day boolean,
    ADD COLUMN countries text[] NOT NULL DEFAULT '{}',
    ADD COLUMN installed_at timestamptz,
    ADD COLUMN activated_at timestamptz,
    ADD COLUMN expires_at timestamptz,
    -- The highest usage threshold told (esim.usage): 0, 50, 80 or 100.
    ADD COLUMN usage_notified integer NOT NULL DEFAULT 0 CHECK (usage_notified IN (0, 50, 80, 100)),
    ADD COLUMN expiring_notified boolean NOT NULL DEFAULT false;

UPDATE esims e SET plan_id = o.plan_id, per_day = o.per_day, countries = o.countries
FROM orders o WHERE o.id = e.order_id;

-- +goose StatementBegin
-- The release before this migration goes on issuing eSIMs beside the one
-- that applies it until a rollout ends, and knows none of these columns:
-- its rows take them from their order, as the UPDATE above did, before
-- NOT NULL is checked. Its own rows this release writes whole. Drop it
-- (IF EXISTS: a database migrated by this file before it had the trigger
-- lacks it) once no release before this one runs.
CREATE FUNCTION esims_fill_from_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.plan_id IS NULL THEN
        SELECT o.plan_id, o.per_day, o.countries INTO NEW.plan_id, NEW.per_day, NEW.countries
        FROM orders o WHERE o.id = NEW.order_id;
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER esims_fill_from_order BEFORE INSERT ON esims
    FOR EACH ROW EXECUTE FUNCTION esims_fill_from_order();

ALTER TABLE esims
    -- contract: the release before this one writes neither column, and
    -- esims_fill_from_order fills both for it.
    ALTER COLUMN plan_id SET NOT NULL,
    ALTER COLUMN per_day SET NOT NULL,
    DROP CONSTRAINT esims_status_check,
    ADD CONSTRAINT esims_status_check CHECK (status IN ('ALLOCATED', 'INSTALLED', 'ACTIVE', 'DEPLETED', 'EXPIRED')),
    -- Each status has the times that lead to it.
    ADD CONSTRAINT esims_installed_has_time CHECK (status <> 'INSTALLED' OR installed_at IS NOT NULL),
    ADD CONSTRAINT esims_active_has_times CHECK (
        status NOT IN ('ACTIVE', 'DEPLETED') OR (activated_at IS NOT NULL AND expires_at IS NOT NULL)),
    ADD CONSTRAINT esims_used_within_total CHECK (unlimited OR used_bytes <= total_bytes),
    ADD CONSTRAINT esims_depleted_used_up CHECK (status <> 'DEPLETED' OR (NOT unlimited AND used_bytes = total_bytes)),
    -- The target of top-ups' foreign key, which keeps a top-up in its
    -- eSIM's account and environment.
    ADD CONSTRAINT esims_id_scope UNIQUE (id, account_id, environment);

ALTER TABLE orders ADD CONSTRAINT orders_topup_esim_scope FOREIGN KEY (esim_id, account_id, environment)
    REFERENCES esims (id, account_id, environment);

CREATE INDEX orders_topups_idx ON orders (esim_id, created_at, id) WHERE esim_id IS NOT NULL;
-- The usage reader's pages, and the expiry pass's due eSIMs.
CREATE INDEX esims_in_use_idx ON esims (environment, id) WHERE status <> 'EXPIRED';
CREATE INDEX esims_expiry_idx ON esims (expires_at) WHERE status IN ('ACTIVE', 'DEPLETED');
CREATE INDEX esims_scope_status_idx ON esims (account_id, environment, status, created_at DESC, id DESC);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orders_refuse_rewrite() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.id, NEW.account_id, NEW.environment, NEW.idempotency_key, NEW.fingerprint, NEW.plan_id,
        NEW.plan_name, NEW.per_day, NEW.unlimited, NEW.total_bytes, NEW.validity_days, NEW.quantity,
        NEW.days, NEW.currency, NEW.unit_minor, NEW.total_minor, NEW.customer_name, NEW.customer_email,
        NEW.customer_reference, NEW.created_at, NEW.kind, NEW.esim_id, NEW.countries)
       IS DISTINCT FROM
       (OLD.id, OLD.account_id, OLD.environment, OLD.idempotency_key, OLD.fingerprint, OLD.plan_id,
        OLD.plan_name, OLD.per_day, OLD.unlimited, OLD.total_bytes, OLD.validity_days, OLD.quantity,
        OLD.days, OLD.currency, OLD.unit_minor, OLD.total_minor, OLD.customer_name, OLD.customer_email,
        OLD.customer_reference, OLD.created_at, OLD.kind, OLD.esim_id, OLD.countries) THEN
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

-- +goose StatementBegin
-- A completed order has its eSIMs, a top-up none.
CREATE OR REPLACE FUNCTION orders_check_esims() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    target uuid;
    o orders%ROWTYPE;
    n integer;
    top integer;
BEGIN
    IF TG_TABLE_NAME = 'orders' THEN
        target := NEW.id;
    ELSE
        target := NEW.order_id;
    END IF;
    SELECT * INTO o FROM orders WHERE id = target;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT count(*), max(e.position) INTO n, top FROM esims e WHERE e.order_id = o.id;
    IF o.kind = 'topup' THEN
        IF n > 0 THEN
            RAISE EXCEPTION 'top-up % has % eSIMs: a top-up has none', o.id, n
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN NULL;
    END IF;
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

-- +goose StatementBegin
-- An eSIM's identity never changes; its status moves only forward
-- (ALLOCATED -> INSTALLED -> ACTIVE <-> DEPLETED, and any but EXPIRED ->
-- EXPIRED, final), each time it records is written once, and top-ups only
-- add data and days.
CREATE OR REPLACE FUNCTION esims_refuse_rewrite() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rank_old integer := array_position(ARRAY['ALLOCATED', 'INSTALLED', 'ACTIVE', 'EXPIRED'],
        CASE OLD.status WHEN 'DEPLETED' THEN 'ACTIVE' ELSE OLD.status END);
    rank_new integer;
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'eSIM % was issued: it is never deleted', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    rank_new := array_position(ARRAY['ALLOCATED', 'INSTALLED', 'ACTIVE', 'EXPIRED'],
        CASE NEW.status WHEN 'DEPLETED' THEN 'ACTIVE' ELSE NEW.status END);
    IF (NEW.id, NEW.order_id, NEW.account_id, NEW.environment, NEW.position, NEW.plan_name, NEW.iccid,
        NEW.matching_id, NEW.smdp_address, NEW.qr_token, NEW.unlimited, NEW.created_at,
        NEW.plan_id, NEW.per_day, NEW.countries)
       IS DISTINCT FROM
       (OLD.id, OLD.order_id, OLD.account_id, OLD.environment, OLD.position, OLD.plan_name, OLD.iccid,
        OLD.matching_id, OLD.smdp_address, OLD.qr_token, OLD.unlimited, OLD.created_at,
        OLD.plan_id, OLD.per_day, OLD.countries) THEN
        RAISE EXCEPTION 'eSIM %: only its status, use, validity and data may change', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status AND (OLD.status = 'EXPIRED' OR rank_new < rank_old) THEN
        RAISE EXCEPTION 'eSIM %: % cannot become %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF (OLD.installed_at IS NOT NULL AND NEW.installed_at IS DISTINCT FROM OLD.installed_at)
       OR (OLD.activated_at IS NOT NULL AND NEW.activated_at IS DISTINCT FROM OLD.activated_at) THEN
        RAISE EXCEPTION 'eSIM %: its installation and activation are written once', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NEW.total_bytes < OLD.total_bytes OR NEW.validity_days < OLD.validity_days OR NEW.used_bytes < OLD.used_bytes THEN
        RAISE EXCEPTION 'eSIM %: data, use and validity only grow', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER IF EXISTS esims_fill_from_order ON esims;
DROP FUNCTION IF EXISTS esims_fill_from_order();
-- Top-ups go with their kind: the older schema has no place for them.
ALTER TABLE orders DISABLE TRIGGER orders_refuse_delete;
DELETE FROM orders WHERE kind = 'topup';
ALTER TABLE orders ENABLE TRIGGER orders_refuse_delete;
DROP INDEX esims_scope_status_idx;
DROP INDEX esims_expiry_idx;
DROP INDEX esims_in_use_idx;
DROP INDEX orders_topups_idx;
ALTER TABLE orders DROP CONSTRAINT orders_topup_esim_scope;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orders_refuse_rewrite() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orders_check_esims() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION esims_refuse_rewrite() RETURNS trigger LANGUAGE plpgsql AS $$
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

UPDATE esims SET status = 'ALLOCATED' WHERE status <> 'ALLOCATED';
ALTER TABLE esims
    DROP CONSTRAINT esims_id_scope,
    DROP CONSTRAINT esims_depleted_used_up,
    DROP CONSTRAINT esims_used_within_total,
    DROP CONSTRAINT esims_active_has_times,
    DROP CONSTRAINT esims_installed_has_time,
    DROP CONSTRAINT esims_status_check,
    ADD CONSTRAINT esims_status_check CHECK (status IN ('ALLOCATED')),
    DROP COLUMN expiring_notified,
    DROP COLUMN usage_notified,
    DROP COLUMN expires_at,
    DROP COLUMN activated_at,
    DROP COLUMN installed_at,
    DROP COLUMN countries,
    DROP COLUMN per_day,
    DROP COLUMN plan_id;
ALTER TABLE orders
    DROP CONSTRAINT orders_topup_of_one_esim,
    DROP COLUMN countries,
    DROP COLUMN esim_id,
    DROP COLUMN kind;
