-- name: SetSandboxApp :one
-- The app's state (lifecycle's app writer, next to the status writer): a new run (new_run)
-- replaces whatever run the row held; any other change applies only to the run it is about,
-- so an earlier run's end, reported late, never overwrites a later run's state, and only when
-- it changes something (two instances that both saw the end report it once). No row: nothing
-- to change. pid, when given, is the run's process. only_running: the change applies to a
-- running sandbox only, with no pause asked for (a server ended by a pause has not exited).
UPDATE sandboxes x SET
    app_status    = @app_status::app_status,
    app_version   = CASE WHEN @new_run::boolean THEN @app_version::integer ELSE x.app_version END,
    app_since     = CASE WHEN x.app_status IS DISTINCT FROM @app_status::app_status OR @new_run::boolean THEN now() ELSE x.app_since END,
    app_exit_code = sqlc.narg('app_exit_code')::integer,
    app_run_id    = @app_run_id::uuid,
    app_pid       = CASE WHEN @new_run::boolean THEN sqlc.narg('app_pid')::integer ELSE coalesce(sqlc.narg('app_pid')::integer, x.app_pid) END,
    -- The newest version seen up, kept here rather than on the project's row: this writer
    -- holds the sandbox's lock, and the project's is taken before it (docs/architecture.md,
    -- "Data and SQL").
    app_good_version = CASE WHEN @app_status::app_status = 'up' THEN greatest(x.app_good_version,
        CASE WHEN @new_run::boolean THEN @app_version::integer ELSE x.app_version END) ELSE x.app_good_version END
WHERE x.id = @id::uuid AND (@new_run::boolean OR x.app_run_id = @app_run_id::uuid
    AND (x.app_status IS DISTINCT FROM @app_status::app_status OR sqlc.narg('app_pid')::integer IS NOT NULL))
    AND (NOT @only_running::boolean OR x.status = 'running' AND x.pause_requested_at IS NULL)
RETURNING x.*;

-- name: GetWatchedApp :one
-- A running preview's dev server as the watch follows it: where to reach its envd and the run
-- the row holds.
SELECT s.id, s.project_id, s.status, coalesce(s.provider_id, '')::text AS provider_id, s.envd_token, s.provider_domain, s.preview_url,
    s.app_status, s.app_run_id, s.app_pid, coalesce(s.app_version, 0)::integer AS app_version
FROM sandboxes s WHERE s.id = @id;

-- name: HoldWatchedApps :many
-- The watch's takeover (docs/architecture.md, "The watch of dev servers"): of the running
-- previews whose dev server has a process to follow, the ones no instance holds, each taken
-- here (a session-level advisory lock on the watch's own connection, let go when that
-- connection ends, so a dead instance's previews are free at once). held: the previews this
-- instance holds already (the lock is reentrant: taking one again would count it twice). A
-- server still starting is followed by the job that started it, which hands it over.
WITH c AS MATERIALIZED (
    SELECT s.id, s.project_id, s.status, coalesce(s.provider_id, '')::text AS provider_id, s.envd_token, s.provider_domain, s.preview_url,
        s.app_status, s.app_run_id, s.app_pid, coalesce(s.app_version, 0)::integer AS app_version
    FROM sandboxes s
    WHERE s.status = 'running' AND s.app_pid IS NOT NULL AND s.app_run_id IS NOT NULL AND s.provider_id IS NOT NULL
      AND s.app_status IN ('up', 'not_answering') AND NOT (s.id = ANY(@held::uuid[]))
    ORDER BY s.app_since
    LIMIT @max_count
)
SELECT c.* FROM c WHERE pg_try_advisory_lock(@namespace::integer, hashtext(c.id::text));

-- name: HoldWatchedApp :one
-- Takes one preview's watch (HoldWatchedApps' lock) if no instance holds it.
SELECT pg_try_advisory_lock(@namespace::integer, hashtext(CAST(@id::uuid AS text)))::boolean;

-- name: ReleaseWatchedApp :exec
-- Lets one preview's watch go.
SELECT pg_advisory_unlock(@namespace::integer, hashtext(CAST(@id::uuid AS text)));

-- name: SetSandboxAppVersion :exec
-- A dev server that reloads changed files itself runs the version applied, in the same run.
UPDATE sandboxes SET app_version = @app_version::integer WHERE id = @id AND app_run_id IS NOT NULL;

-- name: ListNotAnsweringApps :many
-- Of the previews this instance holds the watch of (ids), those whose dev server runs without
-- answering: the only ones the watch probes, to see them come up (by primary key: no scan).
SELECT s.id, s.preview_url, s.app_run_id::uuid AS app_run_id
FROM sandboxes s
WHERE s.id = ANY(@ids::uuid[]) AND s.status = 'running' AND s.pause_requested_at IS NULL
  AND s.app_status = 'not_answering' AND s.app_run_id IS NOT NULL;
