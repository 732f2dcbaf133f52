-- +goose Up
-- Every plan is priced in every account currency (catalogue.Currencies): a
-- plan missing one would vanish from every list of the partners billed in
-- it. Row checks cannot see a plan's other prices, and an upsert rewrites
-- them in two statements, so the rule is a constraint trigger checked at
-- commit, when the plan and all of its prices have been written.

-- Plans already stored without a currency are named and the migration
-- fails: the rule would otherwise hold for new writes only, and those
-- plans stay unlisted for the partners billed in what they lack.
-- +goose StatementBegin
DO $$
DECLARE
    unpriced text;
BEGIN
    SELECT string_agg(id::text, ', ' ORDER BY id) INTO unpriced FROM (
        SELECT p.id FROM plans p
         WHERE (SELECT coalesce(array_agg(pp.currency ORDER BY pp.currency), '{}')
                  FROM plan_prices pp WHERE pp.plan_id = p.id) <> '{EUR,GBP,USD}'::text[]
         ORDER BY p.id LIMIT 10) AS missing;
    IF unpriced IS NOT NULL THEN
        RAISE EXCEPTION 'plans not priced in each of EUR, GBP and USD (up to 10 shown): %; price them, then start again', unpriced
            USING ERRCODE = 'check_violation';
    END IF;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION plan_priced_in_every_currency() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    plan uuid;
BEGIN
    IF TG_TABLE_NAME = 'plans' THEN
        plan := NEW.id;
    ELSIF TG_OP = 'INSERT' THEN
        plan := NEW.plan_id;
    ELSE
        -- A deleted price, or one moved to another plan, leaves a gap in its
        -- old plan (the new one is checked by its own row's insert check).
        plan := OLD.plan_id;
        IF TG_OP = 'UPDATE' AND NEW.plan_id IS DISTINCT FROM OLD.plan_id THEN
            PERFORM plan_priced_in_every_currency_check(NEW.plan_id);
        END IF;
    END IF;
    PERFORM plan_priced_in_every_currency_check(plan);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION plan_priced_in_every_currency_check(plan uuid) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    priced text[];
BEGIN
    -- A plan deleted in the same transaction took its prices with it.
    IF NOT EXISTS (SELECT 1 FROM plans WHERE id = plan) THEN
        RETURN;
    END IF;
    SELECT coalesce(array_agg(currency ORDER BY currency), '{}') INTO priced
      FROM plan_prices WHERE plan_id = plan;
    IF priced <> '{EUR,GBP,USD}'::text[] THEN
        RAISE EXCEPTION 'plan % is priced in {%}; every plan needs a price in EUR, GBP and USD',
            plan, array_to_string(priced, ',')
            USING ERRCODE = 'check_violation';
    END IF;
END;
$$;
-- +goose StatementEnd

-- Row triggers do not see TRUNCATE: empty the catalogue with
-- TRUNCATE plans CASCADE, which takes the prices along, never plan_prices
-- alone.
CREATE CONSTRAINT TRIGGER plans_priced_in_every_currency
    AFTER INSERT ON plans DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION plan_priced_in_every_currency();
CREATE CONSTRAINT TRIGGER plan_prices_priced_in_every_currency
    AFTER INSERT OR UPDATE OR DELETE ON plan_prices DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION plan_priced_in_every_currency();

-- +goose Down
DROP TRIGGER plan_prices_priced_in_every_currency ON plan_prices;
DROP TRIGGER plans_priced_in_every_currency ON plans;
DROP FUNCTION plan_priced_in_every_currency();
DROP FUNCTION plan_priced_in_every_currency_check(uuid);
