-- +goose Up
-- When Sandman last asked the provider to pause the sandbox, set just before the request and
-- cleared by the next status change. While it is recent, the provider's own report of that
-- pause (the reconcile's list, its paused event) is left to the pause job, which records the
-- pause with its cause (idle, or the founder) and its snapshot kind (docs/states.md, "History").
ALTER TABLE sandboxes ADD COLUMN pause_requested_at timestamptz;

-- +goose Down
ALTER TABLE sandboxes DROP COLUMN pause_requested_at;
