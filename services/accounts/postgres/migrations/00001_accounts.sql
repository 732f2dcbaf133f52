-- +goose Up
CREATE TABLE accounts (
    id                    uuid        PRIMARY KEY,
    name                  text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 120),
    currency              text        NOT NULL DEFAULT 'USD' CHECK (currency IN ('USD', 'EUR', 'GBP')),
    -- 0 means the gateway's default applies.
    rate_limit_per_minute integer     NOT NULL DEFAULT 0 CHECK (rate_limit_per_minute >= 0),
    created_at            timestamptz NOT NULL DEFAULT now()
);

-- Lists are newest first; id breaks ties so pages never overlap.
CREATE INDEX accounts_created_at_idx ON accounts (created_at DESC, id DESC);

CREATE TABLE api_keys (
    id          uuid        PRIMARY KEY,
    account_id  uuid        NOT NULL REFERENCES accounts (id),
    environment text        NOT NULL CHECK (environment IN ('sandbox', 'live')),
    -- Safe to show: the environment prefix and the first random characters.
    prefix      text        NOT NULL,
    name        text        NOT NULL DEFAULT '' CHECK (char_length(name) <= 120),
    -- SHA-256 of the full secret; the secret itself is never stored.
    secret_hash bytea       NOT NULL CHECK (octet_length(secret_hash) = 32),
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

-- Every authenticated request looks a key up by its hash.
CREATE UNIQUE INDEX api_keys_secret_hash_idx ON api_keys (secret_hash);
CREATE INDEX api_keys_account_id_idx ON api_keys (account_id, created_at DESC, id DESC);

-- +goose Down
DROP TABLE api_keys;
DROP TABLE accounts;
