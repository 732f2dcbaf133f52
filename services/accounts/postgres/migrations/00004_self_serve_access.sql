-- +goose Up
-- Expand only: two new tables, which the previous release never reads.

CREATE TABLE password_resets (
    -- SHA-256 of the one-time token, as for invites.
    token_hash bytea       PRIMARY KEY CHECK (octet_length(token_hash) = 32),
    -- Removing a user takes their unspent resets with them.
    user_id    uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL CHECK (expires_at > created_at),
    used_at    timestamptz
);

CREATE INDEX password_resets_user_id_idx ON password_resets (user_id);

-- A sandbox-only account's request for live: one per account, the first
-- kept. Granting is EnableLive; a granted request stays as a record.
CREATE TABLE live_requests (
    account_id   uuid        PRIMARY KEY REFERENCES accounts (id),
    -- The email, not the user id: the record outlives the user's removal.
    requested_by text        NOT NULL CHECK (char_length(requested_by) BETWEEN 3 AND 254),
    requested_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE live_requests;
DROP TABLE password_resets;
