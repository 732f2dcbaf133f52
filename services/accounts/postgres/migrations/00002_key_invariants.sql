-- +goose Up
-- The schema holds the key rules the domain keeps, so that a bug, a manual
-- fix or a future writer that skips the domain cannot break them.

-- The display prefix is the environment's own prefix plus six characters
-- of the secret, never more: a longer "prefix" would store part or all of
-- the secret in plain text, and a prefix naming the other environment
-- would show a live key as a sandbox one in every list.
ALTER TABLE api_keys ADD CONSTRAINT api_keys_prefix_matches_environment
    CHECK (prefix ~ ('^sk_' || environment || '_[A-Za-z0-9]{6}$'));

-- The domain's bound (accounts.MaxRateLimitPerMinute).
ALTER TABLE accounts ADD CONSTRAINT accounts_rate_limit_per_minute_max
    CHECK (rate_limit_per_minute <= 1000000);

-- Revocation is final and a key is what it was issued as. A CHECK cannot
-- compare a row with its previous version, so a trigger refuses the
-- update: clearing or moving revoked_at, or changing whose key it is,
-- which environment it grants or which secret it answers to.
-- +goose StatementBegin
CREATE FUNCTION api_keys_refuse_rewrite() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at THEN
        RAISE EXCEPTION 'api key % was revoked at %; revocation is final', OLD.id, OLD.revoked_at
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF (NEW.id, NEW.account_id, NEW.environment, NEW.prefix, NEW.secret_hash, NEW.created_at)
       IS DISTINCT FROM (OLD.id, OLD.account_id, OLD.environment, OLD.prefix, OLD.secret_hash, OLD.created_at) THEN
        RAISE EXCEPTION 'api key %: only its name and revocation may change', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER api_keys_refuse_rewrite BEFORE UPDATE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION api_keys_refuse_rewrite();

-- +goose Down
DROP TRIGGER api_keys_refuse_rewrite ON api_keys;
DROP FUNCTION api_keys_refuse_rewrite();
ALTER TABLE accounts DROP CONSTRAINT accounts_rate_limit_per_minute_max;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_prefix_matches_environment;
