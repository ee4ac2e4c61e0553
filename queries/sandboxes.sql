-- name: InsertSandbox :one
INSERT INTO sandboxes (owner_id, project_id, build_id, recreated, deployed_version_id, vcpus, memory_mib, lifetime_seconds)
VALUES (@owner_id, @project_id, @build_id, @recreated, (SELECT files_version_id FROM builds WHERE id = @build_id), @vcpus, @memory_mib,
    @lifetime_seconds)
RETURNING *;

-- name: GetSandbox :one
SELECT * FROM sandboxes WHERE id = @id;

-- name: GetSandboxByOwner :one
SELECT * FROM sandboxes WHERE id = @id AND owner_id = @owner_id;

-- name: GetSandboxByProviderID :one
SELECT * FROM sandboxes WHERE provider_id = @provider_id;

-- name: GetSandboxByProviderIDForUpdate :one
-- A provider event's sandbox, locked, with its project's pause kind: the snapshot a paused event
-- says the provider kept.
SELECT sqlc.embed(s), p.pause_kind FROM sandboxes s JOIN projects p ON p.id = s.project_id
WHERE s.provider_id = @provider_id FOR NO KEY UPDATE OF s;

-- name: GetSandboxForUpdate :one
SELECT * FROM sandboxes WHERE id = @id FOR NO KEY UPDATE;

-- name: GetCurrentSandboxByProjectForUpdate :one
-- The project's current sandbox, locked: a visitor's wake decides under this lock, so of any
-- number of visitors at once one resumes it and the others find it resuming.
SELECT * FROM sandboxes WHERE project_id = @project_id ORDER BY created_at DESC LIMIT 1 FOR NO KEY UPDATE;

-- name: GetCurrentSandboxByProject :one
-- The sandbox of the project's newest build.
SELECT * FROM sandboxes WHERE project_id = @project_id ORDER BY created_at DESC LIMIT 1;

-- name: GetSharedSandboxByProject :one
-- The project's current sandbox with its build and its newest event's id (project_states), read
-- in one statement so the state and its version agree: a visitor's stream skips a version it
-- already sent, so a state read before a change and labelled with that change's id would never
-- be corrected.
SELECT sqlc.embed(s), sqlc.embed(b), st.latest_event_id
FROM project_states st
JOIN sandboxes s ON s.id = st.sandbox_id
JOIN builds b ON b.id = s.build_id
WHERE st.project_id = @project_id;

-- name: GetSandboxStatus :one
-- One of the founder's sandboxes for the JSON status read (docs/api.md), in one round trip:
-- its row, whether it is its project's current (newest) sandbox, the version its files are,
-- and its project's newest version and last good one (project_states). No build, change or
-- history: the answer shows none.
SELECT sqlc.embed(x),
       (x.id = st.sandbox_id)::boolean AS is_current,
       (SELECT v.number FROM versions v WHERE v.id = x.deployed_version_id)::integer AS deployed_number,
       st.current_version, st.last_good_version
FROM sandboxes x
JOIN project_states st ON st.project_id = x.project_id AND st.owner_id = @owner_id
WHERE x.id = @sandbox_id AND x.owner_id = @owner_id;

-- name: GetCurrentSandboxState :one
-- One project's state (project_states) with its newest sandbox, that sandbox's build and its
-- newest change (every sandbox has one from its creation: why it is in its state), in one
-- round trip (ListProjectStatesByOwner reads each of the founder's the same way). No row: the
-- project was never built.
SELECT sqlc.embed(st), sqlc.embed(s), sqlc.embed(b), sqlc.embed(e)
FROM project_states st
JOIN sandboxes s ON s.id = st.sandbox_id
JOIN builds b ON b.id = s.build_id
JOIN sandbox_events e ON e.id = st.change_event_id
WHERE st.project_id = @project_id;

-- name: UpdateSandboxStatus :one
-- The only statement that writes status: lifecycle's apply calls it inside a transaction. The
-- version check makes concurrent writers lose cleanly (no row). With the row it inserts the
-- change's event row (its detail is the killed detail's too) and announces it on the sandbox
-- channel (the payload db.SandboxPayload built), in one round trip:
-- all three happen, or none does.
WITH u AS (
    UPDATE sandboxes x SET
        status           = @status,
        version          = x.version + 1,
        state_changed_at = now(),
        recreated        = @recreated,
        preview_url      = coalesce(sqlc.narg('preview_url'), x.preview_url),
        snapshot_kind    = CASE WHEN @set_snapshot_kind::boolean THEN sqlc.narg('snapshot_kind')::pause_kind ELSE x.snapshot_kind END,
        end_at           = coalesce(sqlc.narg('end_at'), x.end_at),
        killed_at        = coalesce(sqlc.narg('killed_at'), x.killed_at),
        killed_reason    = coalesce(sqlc.narg('killed_reason'), x.killed_reason),
        killed_detail    = CASE WHEN sqlc.narg('killed_reason')::event_reason IS NULL THEN x.killed_detail ELSE @detail END,
        failure_cause    = sqlc.narg('failure_cause'),
        failure_detail   = @failure_detail,
        last_event_at    = greatest(x.last_event_at, sqlc.narg('event_at')),
        changed_by_provider = sqlc.narg('event_at')::timestamptz IS NOT NULL,
        last_verified_at = coalesce(sqlc.narg('verified_at'), x.last_verified_at),
        verification_failures = CASE WHEN sqlc.narg('verified_at')::timestamptz IS NULL THEN x.verification_failures ELSE 0 END,
        pause_requested_at = NULL,
        missing_since    = NULL
    WHERE x.id = @id AND x.version = @version
    RETURNING x.*
), e AS (
    INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason, detail, provider_event_id, provider_timestamp)
    SELECT u.id, @from_status::sandbox_status, u.status, @source::event_source, @reason::event_reason, @detail::text,
        sqlc.narg('provider_event_id')::text, sqlc.narg('event_at')::timestamptz
    FROM u
    RETURNING id, sandbox_id
)
SELECT u.* FROM u JOIN e ON e.sandbox_id = u.id, pg_notify(@channel::text, @payload::text);

-- name: SetSandboxProvider :one
-- Records what the provider answered at creation; not a state change.
UPDATE sandboxes SET provider_id = @provider_id, preview_url = @preview_url, envd_token = @envd_token,
    provider_domain = @provider_domain, end_at = @end_at
WHERE id = @id AND status = 'starting'
RETURNING *;

-- name: SetSandboxEndAt :exec
UPDATE sandboxes SET end_at = @end_at WHERE id = @id;

-- name: SetSandboxPauseRequested :exec
-- Sandman is about to ask the provider to pause this running sandbox; not a state change.
UPDATE sandboxes SET pause_requested_at = now() WHERE id = @id AND status IN ('running', 'unknown');

-- name: SetSandboxKillRequested :exec
UPDATE sandboxes SET kill_requested = true WHERE id = @id;

-- name: TouchSandboxActivity :one
-- Moves the idle deadline; at most once per second per sandbox, so many tabs cost little.
UPDATE sandboxes SET last_active_at = now()
WHERE id = @id AND owner_id = @owner_id AND last_active_at < now() - interval '1 second'
RETURNING *;

-- name: MarkSandboxVerified :exec
-- The provider agrees with the row (or sent an event that changes nothing): a sandbox found
-- missing before is there after all.
UPDATE sandboxes SET last_verified_at = now(), verification_failures = 0,
    last_event_at = greatest(last_event_at, sqlc.narg('event_at')), missing_since = NULL
WHERE id = @id;

-- name: IncrementVerificationFailures :one
UPDATE sandboxes SET verification_failures = verification_failures + 1 WHERE id = @id
RETURNING verification_failures;

-- name: ListReconcileRows :many
-- What the reconcile compares with the provider's list, for every row the provider can
-- contradict: only the columns it reads (a whole row each made 100,000 rows a sort on disk).
SELECT id, provider_id::text AS provider_id, status, vcpus, memory_mib FROM sandboxes
WHERE status IN ('running', 'paused', 'unknown') AND provider_id IS NOT NULL;

-- name: ListStuckSandboxes :many
-- Sandboxes left in a transitional state past its deadline (a crashed worker, say).
SELECT * FROM sandboxes
WHERE (status = 'starting' AND state_changed_at < @starting_before::timestamptz)
   OR (status = 'resuming' AND state_changed_at < @resuming_before::timestamptz)
ORDER BY state_changed_at LIMIT 500;

-- name: GetSandboxByBuild :one
SELECT * FROM sandboxes WHERE build_id = @build_id;

-- name: TouchActivity :exec
UPDATE sandboxes SET last_active_at = now() WHERE id = @id;

-- name: MarkSandboxesVerified :exec
-- The reconcile sweep's batch for rows the provider agrees with; a row that changed status since
-- it was read is left for the next pass.
UPDATE sandboxes s SET last_verified_at = now(), verification_failures = 0, missing_since = NULL
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@statuses::text[]) AS status) v
WHERE s.id = v.id AND s.status::text = v.status;

-- name: ListWantedProviderIDs :many
-- Of these provider sandboxes, the ones a row still wants: any row not gone (the reconcile kills
-- the rest once they are old enough, as orphans).
SELECT provider_id::text FROM sandboxes
WHERE provider_id = ANY(@ids::text[]) AND status NOT IN ('killed', 'expired', 'terminated');

-- name: SetSandboxMissing :one
-- A check found the provider without the sandbox and no event saying why: remembers when that
-- was first seen (not a state change), and answers it.
UPDATE sandboxes SET missing_since = coalesce(missing_since, now()) WHERE id = @id
RETURNING missing_since::timestamptz;

-- name: SetSandboxFilesSeen :exec
-- Sandman looked at the build's files in the sandbox (once the build was ready, before a pause
-- it asked for): the stored files the app changed or removed by then are the app's from now on.
UPDATE sandboxes SET app_changed_files = @app_changed_files::text[], files_seen_at = now() WHERE id = @id;

-- name: ClaimSandboxDeploy :one
-- An apply claims the sandbox for a version: zero rows while another apply, claimed less than
-- stale_secs ago, still runs (it applies the newest version before it lets go).
UPDATE sandboxes SET deploying_version_id = @version_id, deploying_since = now(), deploying_job = @job_id
WHERE id = @id AND (deploying_version_id IS NULL OR deploying_job = @job_id
    OR deploying_since < now() - make_interval(secs => @stale_secs::float8))
RETURNING *;

-- name: SetSandboxDeploying :exec
-- The version the claiming apply moves on to.
UPDATE sandboxes SET deploying_version_id = @version_id WHERE id = @id;

-- name: EndSandboxDeploy :exec
-- The apply lets go; version_id, when set, is what the sandbox's files are now.
UPDATE sandboxes SET deploying_version_id = NULL, deploying_since = NULL, deploying_job = NULL,
    deployed_version_id = coalesce(sqlc.narg('version_id'), deployed_version_id)
WHERE id = @id;

-- name: SetSandboxDeployed :exec
-- The sandbox's files are this version's now (a resume's check applied it).
UPDATE sandboxes SET deployed_version_id = @version_id WHERE id = @id;
