-- +goose Up
-- Every stored file's SHA-256, computed once when the file is stored (a project's files at
-- upload, by Sandman; a build copies its files' digests with them). The integrity check compares
-- a sandbox's files with it after every build and resume (docs/states.md, "Integrity"). Rows
-- stored before are digested here, once.
ALTER TABLE project_files ADD COLUMN sha256 bytea;
UPDATE project_files SET sha256 = sha256(content);
ALTER TABLE project_files ALTER COLUMN sha256 SET NOT NULL,
    ADD CONSTRAINT project_files_sha256_length CHECK (length(sha256) = 32);

ALTER TABLE build_files ADD COLUMN sha256 bytea;
UPDATE build_files SET sha256 = sha256(content);
ALTER TABLE build_files ALTER COLUMN sha256 SET NOT NULL,
    ADD CONSTRAINT build_files_sha256_length CHECK (length(sha256) = 32);

-- What Sandman saw of the build's files in the sandbox at its last look (once the build was
-- ready, and before each pause it asks for): the stored files the app itself had changed or
-- removed by then. The integrity check never judges them. files_seen_at is that look's time;
-- NULL for a sandbox Sandman never looked at (one made before this migration).
ALTER TABLE sandboxes ADD COLUMN app_changed_files text[] NOT NULL DEFAULT '{}',
    ADD COLUMN files_seen_at timestamptz;

-- When a check first found the provider without the sandbox while no event said why. It is
-- declared lost ("lost by the provider") only when no kill event has come within the events'
-- catch-up window since; a check that finds it again clears it.
ALTER TABLE sandboxes ADD COLUMN missing_since timestamptz;

-- The files an event names: the ones an integrity check restored ("Restored 3 files the
-- provider lost").
ALTER TABLE sandbox_events ADD COLUMN files text[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE sandbox_events DROP COLUMN files;
ALTER TABLE sandboxes DROP COLUMN missing_since, DROP COLUMN files_seen_at, DROP COLUMN app_changed_files;
ALTER TABLE build_files DROP COLUMN sha256;
ALTER TABLE project_files DROP COLUMN sha256;
