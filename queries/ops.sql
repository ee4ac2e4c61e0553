-- name: CountSandboxesByState :many
-- The fleet: sandboxes not gone by state (and a pause by its snapshot kind), from the index.
SELECT status, snapshot_kind, count(*)::bigint AS n FROM sandboxes
WHERE status IN ('starting', 'running', 'paused', 'resuming', 'resume_failed', 'unknown')
GROUP BY status, snapshot_kind;

-- name: CountGoneSince :one
-- Sandboxes that ended since an instant, but not by a rebuild (that preview lives on in another).
SELECT count(*)::bigint FROM sandboxes
WHERE killed_at > @since::timestamptz AND killed_reason IS DISTINCT FROM 'replaced';

-- name: CountFoundersRunning :one
SELECT count(DISTINCT owner_id)::bigint FROM sandboxes WHERE status = 'running';

-- name: ListEventsByReasonSince :many
-- Events that need a hand since an instant (failed resumes and builds, previews the provider
-- lost, files the integrity check restored: ops.attentionReasons), newest first, with their
-- preview's founder and project.
SELECT e.id, e.sandbox_id, e.from_status, e.to_status, e.source, e.reason, e.detail, e.created_at,
    cardinality(e.files)::integer AS files, p.id AS project_id, p.name AS project_name, u.email AS founder
FROM sandbox_events e
JOIN sandboxes s ON s.id = e.sandbox_id
JOIN projects p ON p.id = s.project_id
JOIN users u ON u.id = s.owner_id
WHERE e.reason IN ('resume_not_found', 'resume_unreachable', 'resume_timed_out', 'resume_files_lost', 'build_failed',
    'build_failed_refunded', 'lost', 'restored') AND e.created_at > @since::timestamptz
ORDER BY e.id DESC
LIMIT @max_rows;

-- name: ListStuckWithOwners :many
-- Sandboxes left in a transitional state past its deadline, with their founder and project.
SELECT s.id, s.status, s.state_changed_at, p.id AS project_id, p.name AS project_name, u.email AS founder
FROM sandboxes s JOIN projects p ON p.id = s.project_id JOIN users u ON u.id = s.owner_id
WHERE (s.status = 'starting' AND s.state_changed_at < @starting_before::timestamptz)
   OR (s.status = 'resuming' AND s.state_changed_at < @resuming_before::timestamptz)
ORDER BY s.state_changed_at LIMIT 100;

-- name: InsertOrphanKill :exec
INSERT INTO orphan_kills (provider_id, started_at) VALUES (@provider_id, sqlc.narg('started_at'));

-- name: ListOrphanKillsSince :many
-- One line per provider sandbox, however many times it was killed since: how many, and the last.
SELECT provider_id, count(*) AS kills, max(created_at)::timestamptz AS last_at
FROM orphan_kills WHERE created_at > @since::timestamptz
GROUP BY provider_id ORDER BY last_at DESC, provider_id LIMIT 100;

-- name: CountWebhookRejection :exec
-- A delivery refused for its signature, counted in its minute.
INSERT INTO webhook_rejections AS r (minute, n) VALUES (to_timestamp(floor(extract(epoch FROM now()) / 60) * 60), 1)
ON CONFLICT (minute) DO UPDATE SET n = r.n + 1;

-- name: SumWebhookRejectionsSince :one
SELECT coalesce(sum(n), 0)::bigint FROM webhook_rejections WHERE minute >= @since::timestamptz;

-- name: GetLatestWebhookDelivery :one
SELECT id, event_type, event_at, received_at, processed_at, outcome FROM webhook_deliveries ORDER BY id DESC LIMIT 1;

-- name: CountWebhookDeliveriesSince :one
SELECT count(*)::bigint FROM webhook_deliveries WHERE received_at > @since::timestamptz;

-- name: CountEventsBySourceSince :one
SELECT count(*)::bigint FROM sandbox_events WHERE source = @source AND created_at > @since::timestamptz;

-- name: GetSandboxForOps :one
-- One sandbox with its founder and project, for the console's page of it.
SELECT sqlc.embed(s), p.name AS project_name, u.email AS founder
FROM sandboxes s JOIN projects p ON p.id = s.project_id JOIN users u ON u.id = s.owner_id
WHERE s.id = @id;

-- name: SetSandboxSizes :exec
-- The provider reported these sandboxes' sizes (its list's cpuCount and memoryMB): one statement
-- for the whole reconcile, as the verification of rows that agree.
UPDATE sandboxes s SET vcpus = v.vcpus, memory_mib = v.memory_mib
FROM (SELECT unnest(@provider_ids::text[]) AS provider_id, unnest(@vcpus::integer[]) AS vcpus,
    unnest(@memory_mib::integer[]) AS memory_mib) v
WHERE s.provider_id = v.provider_id AND (s.vcpus <> v.vcpus OR s.memory_mib <> v.memory_mib);
