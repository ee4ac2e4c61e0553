-- +goose Up
-- Codes, not copy (docs/architecture.md, "Codes, not copy"): what rules read (why an event
-- happened, why a resume failed, why a sandbox ended, what became of a webhook delivery, what a
-- ledger row is for) is stored as a code, and the sentences people read are made from the codes
-- in one place (lifecycle/history.go, lifecycle/states.go). Free-form parts (an error's text, the
-- provider's raw kill reason, a refund's cause) go to a `detail` column that no rule reads.
-- Existing rows are mapped from the old strings; a string no writer produces any more becomes
-- `other`, its text kept in `detail`.

CREATE TYPE event_reason AS ENUM (
    'created',               -- a build or rebuild made the sandbox
    'ready',                 -- the build's dev server answered
    'build_failed',          -- the founder's code failed the build (the credit stays spent)
    'build_failed_refunded', -- the platform failed the build (the credit was given back)
    'replaced',              -- a rebuild ended the sandbox
    'idle',                  -- paused after the idle timeout
    'after_build',           -- paused as soon as the build was ready (SANDMAN_PAUSE_AFTER_READY)
    'requested',             -- a person asked (the founder, or an operator: see the source)
    'resume',                -- a resume started
    'resumed',               -- a resume reached running
    'resume_not_found',      -- a resume failed: the provider no longer has the sandbox
    'resume_unreachable',    -- a resume failed: the sandbox could not be reached
    'resume_timed_out',      -- a resume never ended (the sweep)
    'resume_files_lost',     -- a resume failed: files lost and not restored
    'restored',              -- the integrity check restored files (the event names them)
    'synced',                -- a check corrected the row to the provider's state
    'cannot_verify',         -- the provider cannot be asked (detail: the error)
    'provider_paused',       -- the provider reported a pause
    'provider_resumed',      -- the provider reported a resume
    'provider_timeout',      -- the provider killed it at its timeout
    'provider_request',      -- the provider killed it on a request
    'provider_other',        -- the provider killed it for another reason (detail: its kill_reason)
    'missing_past_end',      -- found missing after its end time
    'missing_after_kill',    -- found missing after Sandman's own kill
    'lost',                  -- found missing with no event within the catch-up window
    'visitor_wake',          -- a visitor of the share link woke it
    'visitor_found_gone',    -- a visitor of the share link found it gone (a note)
    'version_live',          -- a version was applied to a running preview and its dev server answered
    'version_failed',        -- a version's dev server did not start on it (detail: its output)
    'woke_with_version',     -- a resume applied the version made while the preview slept
    'other'                  -- a row written before these codes, its text in detail
);

ALTER TABLE sandbox_events ADD COLUMN detail text NOT NULL DEFAULT '';
UPDATE sandbox_events SET detail = substr(reason, length('cannot verify: ') + 1) WHERE reason LIKE 'cannot verify: %';
-- The text of what the mapping below cannot name (a provider's own kill reason, or anything
-- else) is kept.
UPDATE sandbox_events SET detail = reason WHERE reason NOT LIKE 'cannot verify: %' AND reason NOT IN (
    'created', 'ready', 'build_failed', 'replaced', 'idle', 'requested', 'resume', 'resumed', 'build_failed: refunded',
    'paused after the build (SANDMAN_PAUSE_AFTER_READY=immediate)', 'resume failed: not found', 'resume failed: unreachable',
    'resume timed out', 'resume failed: files lost', 'restored files', 'synced with provider', 'paused by the provider',
    'resumed by the provider', 'timeout', 'request', 'missing after its end time', 'missing after Sandman''s kill',
    'lost by the provider', 'visitor wake', 'visitor found it gone', 'version live', 'version failed', 'woke with version');
ALTER TABLE sandbox_events ALTER COLUMN reason DROP DEFAULT;
ALTER TABLE sandbox_events ALTER COLUMN reason TYPE event_reason USING (CASE
    WHEN reason IN ('created', 'ready', 'build_failed', 'replaced', 'idle', 'requested', 'resume', 'resumed') THEN reason
    WHEN reason = 'build_failed: refunded' THEN 'build_failed_refunded'
    WHEN reason = 'paused after the build (SANDMAN_PAUSE_AFTER_READY=immediate)' THEN 'after_build'
    WHEN reason = 'resume failed: not found' THEN 'resume_not_found'
    WHEN reason = 'resume failed: unreachable' THEN 'resume_unreachable'
    WHEN reason = 'resume timed out' THEN 'resume_timed_out'
    WHEN reason = 'resume failed: files lost' THEN 'resume_files_lost'
    WHEN reason = 'restored files' THEN 'restored'
    WHEN reason = 'synced with provider' THEN 'synced'
    WHEN reason LIKE 'cannot verify: %' THEN 'cannot_verify'
    WHEN reason = 'paused by the provider' THEN 'provider_paused'
    WHEN reason = 'resumed by the provider' THEN 'provider_resumed'
    WHEN reason = 'timeout' THEN 'provider_timeout'
    WHEN reason = 'request' THEN 'provider_request'
    WHEN reason = 'missing after its end time' THEN 'missing_past_end'
    WHEN reason = 'missing after Sandman''s kill' THEN 'missing_after_kill'
    WHEN reason = 'lost by the provider' THEN 'lost'
    WHEN reason = 'visitor wake' THEN 'visitor_wake'
    WHEN reason = 'visitor found it gone' THEN 'visitor_found_gone'
    WHEN reason = 'version live' THEN 'version_live'
    WHEN reason = 'version failed' THEN 'version_failed'
    WHEN reason = 'woke with version' THEN 'woke_with_version'
    -- A killed event carried the provider's own kill_reason, whatever it was.
    WHEN to_status IN ('killed', 'expired', 'terminated') AND from_status <> to_status THEN 'provider_other'
    ELSE 'other'
END)::event_reason;

-- sandboxes.killed_reason holds the code of the event that ended it; its raw provider reason is
-- killed_detail.
ALTER TABLE sandboxes ADD COLUMN killed_detail text NOT NULL DEFAULT '';
ALTER TABLE sandboxes ALTER COLUMN killed_reason DROP DEFAULT, ALTER COLUMN killed_reason DROP NOT NULL;
UPDATE sandboxes SET killed_detail = killed_reason
WHERE killed_reason NOT IN ('', 'timeout', 'request', 'build_failed', 'replaced', 'lost by the provider',
    'missing after its end time', 'missing after Sandman''s kill');
ALTER TABLE sandboxes ALTER COLUMN killed_reason TYPE event_reason USING (CASE
    WHEN killed_reason = '' THEN NULL
    WHEN killed_reason IN ('build_failed', 'replaced') THEN killed_reason
    WHEN killed_reason = 'timeout' THEN 'provider_timeout'
    WHEN killed_reason = 'request' THEN 'provider_request'
    WHEN killed_reason = 'lost by the provider' THEN 'lost'
    WHEN killed_reason = 'missing after its end time' THEN 'missing_past_end'
    WHEN killed_reason = 'missing after Sandman''s kill' THEN 'missing_after_kill'
    ELSE 'provider_other'
END)::event_reason;

-- Why a resume failed: the rule "only a rebuild fixes it" reads the code, the page its sentence.
CREATE TYPE failure_cause AS ENUM ('not_found', 'unreachable', 'files_lost', 'other');
ALTER TABLE sandboxes ADD COLUMN failure_detail text NOT NULL DEFAULT '';
ALTER TABLE sandboxes ALTER COLUMN failure_cause DROP DEFAULT, ALTER COLUMN failure_cause DROP NOT NULL;
UPDATE sandboxes SET failure_detail = failure_cause
WHERE failure_cause NOT IN ('',
    'This preview was cleaned up and can''t be recovered. Rebuild it from your saved files.',
    'The sandbox couldn''t be reached. It may be corrupted.',
    'The preview''s files were lost by the provider and couldn''t be restored. Rebuild it from your saved files.');
ALTER TABLE sandboxes ALTER COLUMN failure_cause TYPE failure_cause USING (CASE failure_cause
    WHEN '' THEN NULL
    WHEN 'This preview was cleaned up and can''t be recovered. Rebuild it from your saved files.' THEN 'not_found'
    WHEN 'The sandbox couldn''t be reached. It may be corrupted.' THEN 'unreachable'
    WHEN 'The preview''s files were lost by the provider and couldn''t be restored. Rebuild it from your saved files.' THEN 'files_lost'
    ELSE 'other'
END)::failure_cause;

-- What became of a webhook delivery.
CREATE TYPE webhook_outcome AS ENUM ('pending', 'applied', 'ignored', 'unknown_type', 'unparseable', 'other');
ALTER TABLE webhook_deliveries ADD COLUMN detail text NOT NULL DEFAULT '';
UPDATE webhook_deliveries SET detail = outcome WHERE outcome NOT IN ('pending', 'applied', 'ignored', 'unknown_type', 'unparseable');
ALTER TABLE webhook_deliveries ALTER COLUMN outcome DROP DEFAULT;
ALTER TABLE webhook_deliveries ALTER COLUMN outcome TYPE webhook_outcome USING (CASE
    WHEN outcome IN ('pending', 'applied', 'ignored', 'unknown_type', 'unparseable') THEN outcome
    ELSE 'other'
END)::webhook_outcome;
ALTER TABLE webhook_deliveries ALTER COLUMN outcome SET DEFAULT 'pending';

-- What a ledger row is for; a refund's cause is its detail. The idempotency replay compares
-- the code (build or rebuild), never the text.
CREATE TYPE ledger_reason AS ENUM ('build', 'rebuild', 'refund', 'other');
ALTER TABLE credit_ledger ADD COLUMN detail text NOT NULL DEFAULT '';
UPDATE credit_ledger SET detail = substr(reason, length('refund: ') + 1) WHERE reason LIKE 'refund: %';
UPDATE credit_ledger SET detail = reason WHERE reason NOT IN ('build', 'rebuild') AND reason NOT LIKE 'refund: %';
ALTER TABLE credit_ledger ALTER COLUMN reason TYPE ledger_reason USING (CASE
    WHEN reason IN ('build', 'rebuild') THEN reason
    WHEN reason LIKE 'refund: %' OR delta > 0 THEN 'refund'
    ELSE 'other'
END)::ledger_reason;

-- +goose Down
-- The codes go back to text (the sentences' old keys are not restored: their writers are gone).
ALTER TABLE credit_ledger ALTER COLUMN reason TYPE text USING (CASE reason
    WHEN 'refund' THEN 'refund: ' || detail WHEN 'other' THEN detail ELSE reason::text END);
ALTER TABLE credit_ledger DROP COLUMN detail;
DROP TYPE ledger_reason;
ALTER TABLE webhook_deliveries ALTER COLUMN outcome DROP DEFAULT;
ALTER TABLE webhook_deliveries ALTER COLUMN outcome TYPE text USING (CASE outcome WHEN 'other' THEN detail ELSE outcome::text END);
ALTER TABLE webhook_deliveries ALTER COLUMN outcome SET DEFAULT 'pending';
ALTER TABLE webhook_deliveries DROP COLUMN detail;
DROP TYPE webhook_outcome;
ALTER TABLE sandboxes ALTER COLUMN failure_cause TYPE text USING coalesce(failure_cause::text, '');
ALTER TABLE sandboxes ALTER COLUMN failure_cause SET DEFAULT '', ALTER COLUMN failure_cause SET NOT NULL;
ALTER TABLE sandboxes DROP COLUMN failure_detail;
DROP TYPE failure_cause;
ALTER TABLE sandboxes ALTER COLUMN killed_reason TYPE text USING coalesce(killed_reason::text, '');
ALTER TABLE sandboxes ALTER COLUMN killed_reason SET DEFAULT '', ALTER COLUMN killed_reason SET NOT NULL;
ALTER TABLE sandboxes DROP COLUMN killed_detail;
ALTER TABLE sandbox_events ALTER COLUMN reason TYPE text USING (CASE reason WHEN 'other' THEN detail ELSE reason::text END);
ALTER TABLE sandbox_events ALTER COLUMN reason SET DEFAULT '';
ALTER TABLE sandbox_events DROP COLUMN detail;
DROP TYPE event_reason;
