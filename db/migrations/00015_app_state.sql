-- +goose Up
-- The app's own state next to the sandbox's (docs/states.md, "The app"): the dev server Sandman
-- started in a running sandbox is starting, up, exited (its process ended, with its exit code)
-- or not answering; the API says stopped whenever the sandbox itself is not running, so that
-- is never stored. app_run_id names the run whose state the row holds (a later run's start
-- replaces it, so an earlier run's end is never taken for the current one's), app_pid its
-- process, which the watch of dev servers connects to again after a restart of Sandman or a
-- resume (docs/architecture.md, "The watch of dev servers").
CREATE TYPE app_status AS ENUM ('starting', 'up', 'exited', 'not_answering');
ALTER TABLE sandboxes
    ADD COLUMN app_status app_status,
    ADD COLUMN app_version integer,
    ADD COLUMN app_since timestamptz,
    ADD COLUMN app_exit_code integer,
    ADD COLUMN app_run_id uuid,
    ADD COLUMN app_pid integer;
-- The newest version of the project whose app was up: the version to restore when the current
-- one does not start.
ALTER TABLE projects ADD COLUMN last_good_version integer;

-- A running preview's dev server ended (detail: its exit code; output: its last lines), and a
-- wake that worked with a version whose dev server does not start.
ALTER TYPE event_reason ADD VALUE 'app_exited';
ALTER TYPE event_reason ADD VALUE 'woke_not_starting';
-- The watch of dev servers saw it (a crash while the preview ran).
ALTER TYPE event_source ADD VALUE IF NOT EXISTS 'watch';

-- What was running before the watch existed answered its probe when it was last looked at.
UPDATE sandboxes s SET app_status = 'up', app_since = s.state_changed_at,
    app_version = (SELECT v.number FROM versions v WHERE v.id = s.deployed_version_id)
WHERE s.status = 'running';
UPDATE projects p SET last_good_version = (SELECT max(n) FROM (
    SELECT e.version_number AS n FROM sandbox_events e JOIN sandboxes s ON s.id = e.sandbox_id
    WHERE s.project_id = p.id AND e.reason = 'version_live'
    UNION ALL
    SELECT v.number FROM builds b JOIN versions v ON v.id = b.files_version_id
    WHERE b.project_id = p.id AND b.status = 'ready') x);

-- +goose Down
-- event_reason and event_source keep their values: PostgreSQL cannot drop an enum's value.
ALTER TABLE projects DROP COLUMN last_good_version;
ALTER TABLE sandboxes DROP COLUMN app_status, DROP COLUMN app_version, DROP COLUMN app_since, DROP COLUMN app_exit_code,
    DROP COLUMN app_run_id, DROP COLUMN app_pid;
DROP TYPE app_status;
