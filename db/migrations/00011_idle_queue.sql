-- +goose Up
-- The idle pause's deadline queue (docs/states.md, "Idle pause"): a running sandbox's deadline
-- is its last activity plus the idle timeout, so the running rows in order of last activity are
-- the queue, earliest deadline first. One index over them, and no job per sandbox, lets one loop
-- find the next deadline and the due sandboxes in one index scan each.
CREATE INDEX sandboxes_idle_idx ON sandboxes (last_active_at) WHERE status = 'running';

-- +goose Down
DROP INDEX sandboxes_idle_idx;
