-- +goose NO TRANSACTION
-- +goose Up
-- GET /v1/orders lists a scope's orders of kind 'esims', newest first:
-- this index holds only those, so the page's place in a deep list is
-- found by an index-only scan instead of reading every skipped row.
-- CONCURRENTLY: orders is big, and writes go on meanwhile.
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_list_idx
    ON orders (account_id, environment, created_at DESC, id DESC) WHERE kind = 'esims';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS orders_list_idx;
