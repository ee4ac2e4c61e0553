-- name: InsertSandboxEvent :one
INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason, provider_event_id, provider_timestamp, files)
VALUES (@sandbox_id, @from_status, @to_status, @source, @reason, sqlc.narg('provider_event_id'), sqlc.narg('provider_timestamp'),
    coalesce(sqlc.narg('files')::text[], '{}'))
RETURNING *;

-- name: ListSandboxEvents :many
SELECT * FROM sandbox_events WHERE sandbox_id = @sandbox_id ORDER BY id;

-- name: GetLatestSandboxEvent :one
-- The sandbox's newest event: its state's version for live updates, and why it is in it.
SELECT * FROM sandbox_events WHERE sandbox_id = @sandbox_id ORDER BY id DESC LIMIT 1;

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

-- name: LatestSandboxEventFromProvider :one
-- Whether the sandbox's newest change came from a provider event (it carries the provider's time).
SELECT (provider_timestamp IS NOT NULL)::boolean AS from_provider FROM sandbox_events WHERE sandbox_id = @sandbox_id ORDER BY id DESC LIMIT 1;
