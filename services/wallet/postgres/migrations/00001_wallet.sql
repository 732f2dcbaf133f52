-- +goose Up
-- One balance per account and environment. Accounts live in the accounts
-- service's database, so account_id references nothing here.
CREATE TABLE balances (
    account_id   uuid        NOT NULL,
    environment  text        NOT NULL CHECK (environment IN ('sandbox', 'live')),
    -- Fixed by the first top-up: ledger entries reference it, so it cannot
    -- change once money moved.
    currency     text        NOT NULL CHECK (currency IN ('USD', 'EUR', 'GBP')),
    -- Never negative, whatever writes here: the guard of the debit is the
    -- domain's, this is the last fence.
    amount_minor bigint      NOT NULL CHECK (amount_minor >= 0),
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (account_id, environment),
    -- What entries reference, so an entry's currency is its balance's.
    CONSTRAINT balances_currency_key UNIQUE (account_id, environment, currency)
);

-- The ledger: every change of a balance is one row, written in the same
-- transaction. Rows are never updated nor deleted (00002).
CREATE TABLE ledger_entries (
    id                  uuid        PRIMARY KEY,
    account_id          uuid        NOT NULL,
    environment         text        NOT NULL,
    kind                text        NOT NULL CHECK (kind IN ('top_up', 'debit', 'refund')),
    -- Positive: the kind gives the sign. The bound is wallet.MaxAmountMinor.
    amount_minor        bigint      NOT NULL CHECK (amount_minor > 0 AND amount_minor <= 10000000000),
    currency            text        NOT NULL,
    -- The idempotency key: 1 to 255 printable ASCII characters.
    reference           text        NOT NULL CHECK (reference ~ '^[ -~]{1,255}$'),
    balance_after_minor bigint      NOT NULL CHECK (balance_after_minor >= 0),
    -- The authenticated caller that moved the money.
    actor               text        NOT NULL CHECK (actor <> ''),
    note                text        NOT NULL DEFAULT '' CHECK (char_length(note) <= 255),
    created_at          timestamptz NOT NULL,
    -- 'debit' on a refund, NULL otherwise: the column the refund's
    -- reference to its debit goes through (below).
    refunded_kind       text        GENERATED ALWAYS AS (CASE WHEN kind = 'refund' THEN 'debit' END) STORED,
    -- Only an operator's top-up carries a note.
    CONSTRAINT ledger_entries_note_on_top_ups CHECK (kind = 'top_up' OR note = ''),
    CONSTRAINT ledger_entries_balance_fkey FOREIGN KEY (account_id, environment, currency)
        REFERENCES balances (account_id, environment, currency),
    -- The idempotency key of every movement, and at most one refund per
    -- debit.
    CONSTRAINT ledger_entries_reference_key UNIQUE (account_id, environment, kind, reference),
    -- The same, with the amount: only there for the refund's reference
    -- below to name the amount too.
    CONSTRAINT ledger_entries_reference_amount_key UNIQUE (account_id, environment, kind, reference, amount_minor),
    -- A refund gives back a debit of its account and environment with its
    -- reference, exactly its amount and (through the balance) currency:
    -- never more, never a refund of nothing. For other kinds refunded_kind
    -- is NULL, which a foreign key does not check.
    CONSTRAINT ledger_entries_refund_of_debit_fkey FOREIGN KEY (account_id, environment, refunded_kind, reference, amount_minor)
        REFERENCES ledger_entries (account_id, environment, kind, reference, amount_minor)
);

-- A balance's ledger, newest first; id breaks ties so pages never overlap.
CREATE INDEX ledger_entries_listing_idx ON ledger_entries (account_id, environment, created_at DESC, id DESC);

-- +goose Down
DROP TABLE ledger_entries;
DROP TABLE balances;
