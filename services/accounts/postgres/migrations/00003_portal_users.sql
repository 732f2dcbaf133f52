-- +goose Up
-- Accounts an operator creates, and every account that existed before the
-- portal, keep live; only a self-service sign-up starts without it, and
-- the domain says so explicitly when it inserts one.
ALTER TABLE accounts ADD COLUMN live_enabled boolean NOT NULL DEFAULT true;

CREATE TABLE users (
    id                  uuid        PRIMARY KEY,
    account_id          uuid        NOT NULL REFERENCES accounts (id),
    -- One user per address across the platform: signing in names no
    -- account. Stored lower-cased, so the unique index is case-blind.
    email               text        NOT NULL UNIQUE
                                    CHECK (email = lower(email) AND char_length(email) BETWEEN 3 AND 254),
    -- A PHC string; the prefix check keeps a plaintext password out even if
    -- a writer skips the domain.
    password_hash       text        NOT NULL CHECK (password_hash LIKE '$argon2id$v=19$%'),
    created_at          timestamptz NOT NULL,
    password_changed_at timestamptz NOT NULL
);

CREATE TABLE sessions (
    -- SHA-256 of the token the portal holds; the token itself is never
    -- stored, so a copy of this table signs nobody in.
    token_hash bytea       PRIMARY KEY CHECK (octet_length(token_hash) = 32),
    user_id    uuid        NOT NULL REFERENCES users (id),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL CHECK (expires_at > created_at),
    revoked_at timestamptz
);

-- Signing out everywhere and changing a password revoke a user's live
-- sessions; revoked ones are never looked up by user again.
CREATE INDEX sessions_user_id_live_idx ON sessions (user_id) WHERE revoked_at IS NULL;

CREATE TABLE invites (
    -- SHA-256 of the one-time token, as for sessions.
    token_hash bytea       PRIMARY KEY CHECK (octet_length(token_hash) = 32),
    account_id uuid        NOT NULL REFERENCES accounts (id),
    email      text        NOT NULL CHECK (email = lower(email) AND char_length(email) BETWEEN 3 AND 254),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL CHECK (expires_at > created_at),
    used_at    timestamptz
);

-- +goose Down
DROP TABLE invites;
DROP TABLE sessions;
DROP TABLE users;
ALTER TABLE accounts DROP COLUMN live_enabled;
