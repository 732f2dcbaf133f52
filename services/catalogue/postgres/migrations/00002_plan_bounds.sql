-- +goose Up
-- The domain's bounds (catalogue.Validate), held by the schema as well, so
-- that a writer that skips the domain cannot store what it would refuse.

-- Upper-case ISO 3166-1 alpha-2 shapes, no NULLs, one dimension: the GIN
-- index answers "plans covering JP" only for codes spelt as the filter is.
ALTER TABLE plans ADD CONSTRAINT plans_countries_alpha2 CHECK (
    array_ndims(countries) = 1
    AND array_position(countries, NULL) IS NULL
    AND array_to_string(countries, ',') ~ '^[A-Z]{2}(,[A-Z]{2})*$'
);

-- catalogue.MaxRegionLength, catalogue.MaxValidityDays, catalogue.MaxTotalBytes.
ALTER TABLE plans ADD CONSTRAINT plans_region_length CHECK (char_length(region) <= 60);
ALTER TABLE plans ADD CONSTRAINT plans_validity_days_max CHECK (validity_days <= 365);
ALTER TABLE plans ADD CONSTRAINT plans_total_bytes_max CHECK (total_bytes <= 1099511627776);

-- catalogue.MaxPriceMinor: price x 365 days x 50 eSIMs stays exact as a
-- JSON number and far from int64 overflow.
ALTER TABLE plan_prices ADD CONSTRAINT plan_prices_amount_minor_max CHECK (amount_minor <= 1000000);

-- +goose Down
ALTER TABLE plan_prices DROP CONSTRAINT plan_prices_amount_minor_max;
ALTER TABLE plans DROP CONSTRAINT plans_total_bytes_max;
ALTER TABLE plans DROP CONSTRAINT plans_validity_days_max;
ALTER TABLE plans DROP CONSTRAINT plans_region_length;
ALTER TABLE plans DROP CONSTRAINT plans_countries_alpha2;
