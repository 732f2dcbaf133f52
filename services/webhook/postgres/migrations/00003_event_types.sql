-- +goose Up
-- The eSIM's events after its order and its top-ups' (limits.EventTypes);
-- order_id is the order each is about, the eSIM's order for esim.* and
-- topup.*, so events_order_unless_ping holds for them as it stands.
ALTER TABLE events DROP CONSTRAINT events_type_check,
    ADD CONSTRAINT events_type_check CHECK (type IN (
        'order.completed', 'order.failed',
        'esim.installed', 'esim.activated', 'esim.usage', 'esim.expiring', 'esim.expired',
        'topup.completed', 'topup.failed',
        'ping'));

-- +goose Down
-- NOT VALID: the events of the new types stay, as events are never
-- deleted; a service rolled back stores none of them.
ALTER TABLE events DROP CONSTRAINT events_type_check,
    ADD CONSTRAINT events_type_check CHECK (type IN ('order.completed', 'order.failed', 'ping')) NOT VALID;
