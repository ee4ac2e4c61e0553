-- name: InsertSandboxEvent :one
INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason, provider_event_id, provider_timestamp)
VALUES (@sandbox_id, @from_status, @to_status, @source, @reason, sqlc.narg('provider_event_id'), sqlc.narg('provider_timestamp'))
RETURNING *;

-- name: ListSandboxEvents :many
SELECT * FROM sandbox_events WHERE sandbox_id = @sandbox_id ORDER BY id;

-- name: GetLatestSandboxEventID :one
SELECT coalesce(max(id), 0)::bigint FROM sandbox_events WHERE sandbox_id = @sandbox_id;

-- name: LatestSandboxEventFromProvider :one
-- Whether the sandbox's newest change came from a provider event (it carries the provider's time).
SELECT (provider_timestamp IS NOT NULL)::boolean AS from_provider FROM sandbox_events WHERE sandbox_id = @sandbox_id ORDER BY id DESC LIMIT 1;
