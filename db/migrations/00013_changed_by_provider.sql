-- +goose Up
-- Whether the row's last status change applied a provider event (it carries the provider's
-- time) rather than one of Sandman's own: a provider event older than the last change is
-- ignored only after Sandman's own (lifecycle's applyProviderEvent). The row says so itself,
-- so deciding costs no read of the history (a round trip on every webhook that arrives after
-- the change it follows). UpdateSandboxStatus sets it with each change.
ALTER TABLE sandboxes ADD COLUMN changed_by_provider boolean NOT NULL DEFAULT false;
-- A row's last change is its newest event that moved it (a note, from = to, is no change).
UPDATE sandboxes s SET changed_by_provider = true
WHERE (SELECT e.provider_timestamp IS NOT NULL FROM sandbox_events e
       WHERE e.sandbox_id = s.id AND e.from_status <> e.to_status ORDER BY e.id DESC LIMIT 1);

-- +goose Down
ALTER TABLE sandboxes DROP COLUMN changed_by_provider;
