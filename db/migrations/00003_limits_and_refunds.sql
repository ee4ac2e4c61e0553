-- +goose Up
-- Sign-ups per client address, so open sign-up cannot mint accounts (and their free credits)
-- without end. Kept in the database so the limit holds across instances.
CREATE TABLE signups (
    id         bigserial PRIMARY KEY,
    ip         text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX signups_ip_idx ON signups (ip, created_at);

-- login_failures now also holds attempts whose password is being checked: each is recorded
-- before the check, so parallel attempts count each other.
COMMENT ON TABLE login_failures IS 'Log-in attempts that did not succeed (or are being checked); a success deletes its email''s rows.';

-- A build's credit is refunded at most once.
CREATE UNIQUE INDEX credit_ledger_refund_once ON credit_ledger (build_id) WHERE delta > 0;

-- +goose Down
DROP INDEX credit_ledger_refund_once;
COMMENT ON TABLE login_failures IS NULL;
DROP TABLE signups;
