-- +goose Up
-- A failed build, and a version that did not start, store why as facts: a code and what its
-- sentence needs (the command, its exit code, the port, the time limit, the output's tail).
-- views writes the sentence from them (docs/architecture.md, "Codes, not copy"). Rows from
-- before the codes are 'other', their sentence kept as it was (a build's as its detail, an
-- event's as its output), and views shows it unchanged.
CREATE TYPE build_failure AS ENUM ('install_failed', 'install_timed_out', 'start_exited', 'start_not_answering',
    'provider', 'worker_lost', 'operator_stopped', 'replaced', 'other');

ALTER TABLE builds RENAME COLUMN error TO failure_detail;
ALTER TABLE builds ADD COLUMN failure_code build_failure,
    ADD COLUMN failure_command text NOT NULL DEFAULT '',
    ADD COLUMN failure_exit_code integer,
    ADD COLUMN failure_port integer,
    ADD COLUMN failure_limit_ms bigint;
UPDATE builds SET failure_code = 'other' WHERE status = 'failed';

ALTER TABLE sandbox_events ADD COLUMN failure_code build_failure,
    ADD COLUMN failure_command text NOT NULL DEFAULT '',
    ADD COLUMN failure_exit_code integer,
    ADD COLUMN failure_port integer,
    ADD COLUMN failure_limit_ms bigint;
UPDATE sandbox_events SET failure_code = 'other' WHERE reason IN ('version_failed', 'woke_not_starting');

-- +goose Down
-- The sentences of failures recorded since are not written back: their detail (the output's
-- tail) stands in for them.
ALTER TABLE sandbox_events DROP COLUMN failure_code, DROP COLUMN failure_command, DROP COLUMN failure_exit_code,
    DROP COLUMN failure_port, DROP COLUMN failure_limit_ms;
ALTER TABLE builds DROP COLUMN failure_code, DROP COLUMN failure_command, DROP COLUMN failure_exit_code,
    DROP COLUMN failure_port, DROP COLUMN failure_limit_ms;
ALTER TABLE builds RENAME COLUMN failure_detail TO error;
DROP TYPE build_failure;
