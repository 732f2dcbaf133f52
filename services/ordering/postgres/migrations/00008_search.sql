-- +goose NO TRANSACTION
-- +goose Up
-- The portal's search box: prefixes of customer references, customer
-- emails (in any case) and ICCIDs, within a partner's scope. In the "C"
-- collation a btree serves LIKE 'prefix%' as a range scan, in the order
-- the results are listed, whatever the database's own collation is.
-- CONCURRENTLY: orders and esims are big, and writes go on meanwhile.
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_search_reference_idx
    ON orders (account_id, environment, (customer_reference COLLATE "C")) WHERE kind = 'esims' AND customer_reference <> '';
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_search_email_idx
    ON orders (account_id, environment, (lower(customer_email) COLLATE "C")) WHERE kind = 'esims' AND customer_email <> '';
CREATE INDEX CONCURRENTLY IF NOT EXISTS esims_search_iccid_idx
    ON esims (account_id, environment, (iccid COLLATE "C"));

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS esims_search_iccid_idx;
DROP INDEX CONCURRENTLY IF EXISTS orders_search_email_idx;
DROP INDEX CONCURRENTLY IF EXISTS orders_search_reference_idx;
