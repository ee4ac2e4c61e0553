-- +goose Up
-- The operator's console (docs/operations.md).

-- Operators: founders' accounts that may open /ops. Granted and revoked by `sandman operator`;
-- every grant, revocation and operator action is in operator_log, with who did it.
CREATE TABLE operators (
    user_id    uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    added_by   text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TYPE operator_action AS ENUM ('grant', 'revoke', 'pause', 'kill');
CREATE TABLE operator_log (
    id         bigserial PRIMARY KEY,
    action     operator_action NOT NULL,
    -- Who did it: an operator's account (an action on /ops), or the command line's user.
    actor_id   uuid REFERENCES users (id) ON DELETE SET NULL,
    actor      text NOT NULL,
    -- What it was done to: an account (grant, revoke) or a sandbox (pause, kill).
    user_id    uuid REFERENCES users (id) ON DELETE SET NULL,
    sandbox_id uuid REFERENCES sandboxes (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- An operator's pause and kill are recorded with their own source.
ALTER TYPE event_source ADD VALUE IF NOT EXISTS 'operator';

-- A sandbox's size (what it costs while awake: ops.Size) and the lifetime the provider gives it
-- at each start (what a sleep saves is capped at it). Filled from the configuration when the row
-- is made; the size from the provider's list (cpuCount, memoryMB) when it reports them.
ALTER TABLE sandboxes ADD COLUMN vcpus integer NOT NULL DEFAULT 2 CHECK (vcpus > 0),
    ADD COLUMN memory_mib integer NOT NULL DEFAULT 512 CHECK (memory_mib > 0),
    ADD COLUMN lifetime_seconds integer NOT NULL DEFAULT 3600 CHECK (lifetime_seconds > 0);

-- Usage: each sandbox's time awake (the provider bills it: starting, running, resuming, unknown)
-- and asleep (paused, resume_failed: what sleeping saves), one row per stretch, written by
-- lifecycle's apply in the transaction of the change that starts or ends it. A sleep counts
-- until counts_until: the end of the lifetime the sandbox had when it was paused (the provider
-- would have stopped it then). At most one stretch per sandbox is open (ended_at NULL).
CREATE TYPE usage_kind AS ENUM ('awake', 'asleep');
CREATE TABLE usage_intervals (
    id           bigserial PRIMARY KEY,
    sandbox_id   uuid NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    kind         usage_kind NOT NULL,
    started_at   timestamptz NOT NULL,
    ended_at     timestamptz CHECK (ended_at >= started_at),
    counts_until timestamptz,
    vcpus        integer NOT NULL CHECK (vcpus > 0),
    memory_mib   integer NOT NULL CHECK (memory_mib > 0),
    CHECK ((kind = 'asleep') = (counts_until IS NOT NULL))
);
CREATE UNIQUE INDEX usage_intervals_open_idx ON usage_intervals (sandbox_id) WHERE ended_at IS NULL;
CREATE INDEX usage_intervals_open_kind_idx ON usage_intervals (kind, started_at) INCLUDE (vcpus, memory_mib, counts_until)
    WHERE ended_at IS NULL;
CREATE INDEX usage_intervals_sandbox_idx ON usage_intervals (sandbox_id, started_at);

-- Closed stretches rolled up per hour, added when a stretch closes (ops.Split), so a period's
-- spend and savings read at most 24 × 31 × 16 rows however many sandboxes there are. The shard
-- (a hash of the sandbox id, mod 16) spreads concurrent closes over 16 rows of each hour.
CREATE TABLE usage_hours (
    hour               timestamptz NOT NULL,
    shard              smallint NOT NULL,
    awake_seconds      double precision NOT NULL DEFAULT 0,
    awake_vcpu_seconds double precision NOT NULL DEFAULT 0,
    awake_gib_seconds  double precision NOT NULL DEFAULT 0,
    saved_vcpu_seconds double precision NOT NULL DEFAULT 0,
    saved_gib_seconds  double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, shard),
    CHECK (extract(epoch FROM hour)::bigint % 3600 = 0)
);

-- Every sandbox not gone has its open stretch from now on.
INSERT INTO usage_intervals (sandbox_id, kind, started_at, counts_until, vcpus, memory_mib)
SELECT id, CASE WHEN status IN ('paused', 'resume_failed') THEN 'asleep' ELSE 'awake' END::usage_kind, state_changed_at,
    CASE WHEN status IN ('paused', 'resume_failed') THEN greatest(state_changed_at, coalesce(end_at, state_changed_at + interval '1 hour')) END,
    vcpus, memory_mib
FROM sandboxes WHERE status NOT IN ('killed', 'expired', 'terminated');

-- Orphans the reconcile killed (provider sandboxes no row wanted), for every instance's console.
CREATE TABLE orphan_kills (
    id          bigserial PRIMARY KEY,
    provider_id text NOT NULL,
    started_at  timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX orphan_kills_created_idx ON orphan_kills (created_at);

-- Webhook deliveries refused for their signature, counted per minute (bounded however many a
-- forger sends).
CREATE TABLE webhook_rejections (
    minute timestamptz PRIMARY KEY CHECK (extract(epoch FROM minute)::bigint % 60 = 0),
    n      integer NOT NULL
);

-- A delivery's provider time, for the lag between it and its application.
ALTER TABLE webhook_deliveries ADD COLUMN event_at timestamptz;
CREATE INDEX webhook_deliveries_received_idx ON webhook_deliveries (received_at);

-- The console's lists and counts of the last day or hour (needs a hand, provider health), each
-- one index range however long the history.
CREATE INDEX sandbox_events_reason_idx ON sandbox_events (reason, created_at);
CREATE INDEX sandbox_events_source_idx ON sandbox_events (source, created_at);
-- The fleet by state, and the founders with one running, from the index alone.
CREATE INDEX sandboxes_status_idx ON sandboxes (status, snapshot_kind);
CREATE INDEX sandboxes_running_owner_idx ON sandboxes (owner_id) WHERE status = 'running';
CREATE INDEX sandboxes_killed_idx ON sandboxes (killed_at) WHERE killed_at IS NOT NULL;

-- +goose Down
DROP INDEX sandboxes_killed_idx;
DROP INDEX sandboxes_running_owner_idx;
DROP INDEX sandboxes_status_idx;
DROP INDEX sandbox_events_source_idx;
DROP INDEX sandbox_events_reason_idx;
DROP INDEX webhook_deliveries_received_idx;
ALTER TABLE webhook_deliveries DROP COLUMN event_at;
DROP TABLE webhook_rejections;
DROP TABLE orphan_kills;
DROP TABLE usage_hours;
DROP TABLE usage_intervals;
DROP TYPE usage_kind;
ALTER TABLE sandboxes DROP COLUMN lifetime_seconds, DROP COLUMN memory_mib, DROP COLUMN vcpus;
-- PostgreSQL cannot drop an enum value: 'operator' stays, and its events are deleted.
DELETE FROM sandbox_events WHERE source::text = 'operator';
DROP TABLE operator_log;
DROP TYPE operator_action;
DROP TABLE operators;
