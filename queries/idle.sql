-- The idle pause's deadline queue (lifecycle/idle.go, docs/states.md "Idle pause").

-- name: LockIdleQueue :exec
-- Waits for, then holds until the session ends, the lock whose holder runs the queue's loop.
SELECT pg_advisory_lock(@key::bigint);

-- name: ClaimIdleSandboxes :many
-- The queue's claim: running sandboxes past their
-- deadline (last activity + idle_secs) whose pause nobody asked for, or asked for so long ago
-- (stale_secs) that its worker went away, earliest deadline first, marked as asked for in the
-- same statement. A row another transaction holds (an activity report, a change of state) is
-- skipped, not waited for: the next round sees what it wrote. lag_secs is how late each claim is.
UPDATE sandboxes s SET pause_requested_at = now()
FROM (SELECT id FROM sandboxes
    WHERE status = 'running' AND last_active_at <= now() - make_interval(secs => @idle_secs::float8)
      AND (pause_requested_at IS NULL OR pause_requested_at < now() - make_interval(secs => @stale_secs::float8))
    ORDER BY last_active_at LIMIT @max_rows FOR NO KEY UPDATE SKIP LOCKED) due
WHERE s.id = due.id
RETURNING s.id, s.version, (extract(epoch FROM now() - s.last_active_at) - @idle_secs::float8)::float8 AS lag_secs;

-- name: NextIdleDeadline :one
-- Seconds from now to the earliest deadline of a running sandbox whose pause nobody asked for
-- (negative: already due; none_secs when none runs).
SELECT coalesce(extract(epoch FROM min(last_active_at) - clock_timestamp()) + @idle_secs::float8, @none_secs::float8)::float8 AS wait_secs
FROM sandboxes WHERE status = 'running' AND pause_requested_at IS NULL;

-- name: ClearSandboxPauseRequested :exec
-- An idle pause found its sandbox touched after the claim: the queue takes it at its new deadline.
UPDATE sandboxes SET pause_requested_at = NULL WHERE id = @id AND version = @version;
