-- +goose Up
-- The checks repeat the domain rules on purpose: the database is the last
-- line of defence against a plan that could be sold with a wrong shape.
CREATE TABLE plans (
    id            uuid PRIMARY KEY,
    name          text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 120),
    type          text        NOT NULL CHECK (type IN ('fixed', 'per_day')),
    scope         text        NOT NULL CHECK (scope IN ('country', 'region', 'global')),
    -- ISO 3166-1 alpha-2 codes, sorted; an array so one GIN index answers
    -- "plans covering JP" with countries @> '{JP}'.
    countries     text[]      NOT NULL CHECK (cardinality(countries) >= 1),
    region        text        NOT NULL DEFAULT '',
    unlimited     boolean     NOT NULL,
    total_bytes   bigint      NOT NULL,
    validity_days integer     NOT NULL,
    status        text        NOT NULL CHECK (status IN ('active', 'retired')),
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    CONSTRAINT plans_shape CHECK (
        (type = 'fixed' AND NOT unlimited AND total_bytes > 0 AND validity_days > 0)
        OR (type = 'per_day' AND unlimited AND total_bytes = 0 AND validity_days = 0)
    ),
    CONSTRAINT plans_coverage CHECK (
        (scope = 'country' AND cardinality(countries) = 1 AND region = '')
        OR (scope = 'region' AND cardinality(countries) >= 2 AND region <> '')
        OR (scope = 'global' AND region = '')
    )
);

CREATE INDEX plans_countries ON plans USING gin (countries);
-- Listings read active plans newest first with id as the tiebreak.
CREATE INDEX plans_active_newest ON plans (created_at DESC, id DESC) WHERE status = 'active';

-- One row per plan and currency, in minor units; every plan has one in each
-- currency (held at commit since 00003_plan_prices_complete.sql).
CREATE TABLE plan_prices (
    plan_id      uuid   NOT NULL REFERENCES plans (id) ON DELETE CASCADE,
    currency     text   NOT NULL CHECK (currency IN ('USD', 'EUR', 'GBP')),
    amount_minor bigint NOT NULL CHECK (amount_minor > 0),
    PRIMARY KEY (plan_id, currency)
);

CREATE INDEX plan_prices_currency ON plan_prices (currency, plan_id);

-- +goose Down
DROP TABLE plan_prices;
DROP TABLE plans;
