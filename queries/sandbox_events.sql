-- name: InsertSandboxEvent :one
-- An event row that is no move (a new sandbox's first, a note; a move's is UpdateSandboxStatus's)
-- and its announcement on the sandbox channel (the payload db.SandboxPayload built), in one round
-- trip: the NOTIFY is sent at commit, with the row, or not at all.
WITH e AS (
    INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason, detail, provider_event_id, provider_timestamp, files,
        via_token, version_number, duration_ms, output, failure_code, failure_command, failure_exit_code, failure_port, failure_limit_ms,
        env_set, env_removed)
    VALUES (@sandbox_id, @from_status, @to_status, @source, @reason, @detail, sqlc.narg('provider_event_id'), sqlc.narg('provider_timestamp'),
        coalesce(sqlc.narg('files')::text[], '{}'), sqlc.narg('via_token'), sqlc.narg('version_number'), sqlc.narg('duration_ms'),
        coalesce(sqlc.narg('output')::text, ''), sqlc.narg('failure_code'), coalesce(sqlc.narg('failure_command')::text, ''),
        sqlc.narg('failure_exit_code'), sqlc.narg('failure_port'), sqlc.narg('failure_limit_ms'),
        coalesce(sqlc.narg('env_set')::text[], '{}'), coalesce(sqlc.narg('env_removed')::text[], '{}'))
    RETURNING id, sandbox_id
)
SELECT e.id FROM e, pg_notify(@channel::text, @payload::text);

-- name: ListSandboxEvents :many
SELECT * FROM sandbox_events WHERE sandbox_id = @sandbox_id ORDER BY id;

-- name: GetLatestSandboxEvent :one
-- The sandbox's newest event: its state's version for live updates.
SELECT * FROM sandbox_events WHERE sandbox_id = @sandbox_id ORDER BY id DESC LIMIT 1;

-- name: CountFailedResumesSinceRunning :one
-- How many resumes in a row have failed since the sandbox last ran (a visitor's page offers to
-- try once more after one, and says the provider is in trouble after two).
SELECT count(*)::integer FROM sandbox_events e
WHERE e.sandbox_id = @sandbox_id::uuid AND e.to_status = 'resume_failed' AND e.from_status <> 'resume_failed'
  AND e.id > coalesce((SELECT max(r.id) FROM sandbox_events r WHERE r.sandbox_id = @sandbox_id::uuid AND r.to_status = 'running'), 0);

-- name: HasVisitorNote :one
-- Whether a visitor's note with this reason was recorded for the sandbox (it is recorded once).
SELECT EXISTS (SELECT 1 FROM sandbox_events WHERE sandbox_id = @sandbox_id AND source = 'visitor'
    AND from_status = to_status AND reason = @reason)::boolean;

-- name: ListProjectHistory :many
-- A project's newest events up to a given one, across all its sandboxes (each rebuild makes a
-- new one), with the kind of build each sandbox ran: the build page's history.
SELECT sqlc.embed(e), b.kind AS build_kind
FROM sandbox_events e
JOIN sandboxes s ON s.id = e.sandbox_id
JOIN builds b ON b.id = s.build_id
WHERE s.project_id = @project_id AND s.owner_id = @owner_id AND e.id <= @up_to
ORDER BY e.id DESC
LIMIT @max_events;
