-- +goose Up
CREATE TYPE build_status AS ENUM ('queued', 'building', 'ready', 'failed');
CREATE TYPE build_kind AS ENUM ('initial', 'rebuild');
CREATE TYPE sandbox_status AS ENUM (
    'starting', 'running', 'paused', 'resuming', 'resume_failed',
    'killed', 'expired', 'terminated', 'unknown'
);
CREATE TYPE event_source AS ENUM ('user', 'webhook', 'reconciler', 'scheduler', 'build', 'events_api');

CREATE TABLE builds (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    project_id  uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    version     integer NOT NULL CHECK (version > 0),
    status      build_status NOT NULL DEFAULT 'queued',
    -- creating, uploading, installing, starting, waiting: shown under "Preparing sandbox…".
    stage       text NOT NULL DEFAULT '',
    error       text NOT NULL DEFAULT '',
    kind        build_kind NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    UNIQUE (project_id, version)
);

-- The files of one build, copied from the project (first build) or from the last good build.
CREATE TABLE build_files (
    build_id uuid NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    path     text NOT NULL,
    content  bytea NOT NULL,
    PRIMARY KEY (build_id, path)
);

CREATE TABLE sandboxes (
    id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- NULL until the provider has created it.
    provider_id           text UNIQUE,
    owner_id              uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    project_id            uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    build_id              uuid NOT NULL UNIQUE REFERENCES builds (id) ON DELETE CASCADE,
    status                sandbox_status NOT NULL DEFAULT 'starting',
    snapshot_kind         pause_kind,
    preview_url           text NOT NULL DEFAULT '',
    envd_token            text NOT NULL DEFAULT '',
    -- The sandbox domain the provider answered with, when it gave one (else E2B_DOMAIN).
    provider_domain       text NOT NULL DEFAULT '',
    last_active_at        timestamptz NOT NULL DEFAULT now(),
    last_verified_at      timestamptz,
    verification_failures integer NOT NULL DEFAULT 0,
    state_changed_at      timestamptz NOT NULL DEFAULT now(),
    -- The provider timestamp of the newest provider event applied, so older ones are ignored.
    last_event_at         timestamptz,
    end_at                timestamptz,
    killed_at             timestamptz,
    killed_reason         text NOT NULL DEFAULT '',
    failure_cause         text NOT NULL DEFAULT '',
    recreated             boolean NOT NULL DEFAULT false,
    -- True when Sandman itself asked the provider to kill it (rebuild, operator).
    kill_requested        boolean NOT NULL DEFAULT false,
    version               bigint NOT NULL DEFAULT 1,
    created_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sandboxes_owner_idx ON sandboxes (owner_id);
CREATE INDEX sandboxes_project_idx ON sandboxes (project_id, created_at DESC);
CREATE INDEX sandboxes_live_idx ON sandboxes (status) WHERE status IN ('running', 'paused', 'unknown', 'starting', 'resuming');

CREATE TABLE sandbox_events (
    id                 bigserial PRIMARY KEY,
    sandbox_id         uuid NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    from_status        sandbox_status NOT NULL,
    to_status          sandbox_status NOT NULL,
    source             event_source NOT NULL,
    reason             text NOT NULL DEFAULT '',
    provider_event_id  text,
    provider_timestamp timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sandbox_events_sandbox_idx ON sandbox_events (sandbox_id, id);

CREATE TABLE webhook_deliveries (
    id           bigserial PRIMARY KEY,
    event_id     text NOT NULL UNIQUE,
    delivery_id  text NOT NULL DEFAULT '',
    event_type   text NOT NULL DEFAULT '',
    headers      jsonb NOT NULL,
    body         bytea NOT NULL,
    outcome      text NOT NULL DEFAULT 'pending',
    received_at  timestamptz NOT NULL DEFAULT now(),
    processed_at timestamptz
);

CREATE TABLE credit_ledger (
    id              bigserial PRIMARY KEY,
    user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    delta           integer NOT NULL,
    reason          text NOT NULL,
    build_id        uuid REFERENCES builds (id) ON DELETE SET NULL,
    idempotency_key text UNIQUE,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX credit_ledger_user_idx ON credit_ledger (user_id, created_at);

-- Where the events catch-up reader stopped, per provider feed.
CREATE TABLE provider_cursor (
    name       text PRIMARY KEY,
    cursor     text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE provider_cursor;
DROP TABLE credit_ledger;
DROP TABLE webhook_deliveries;
DROP TABLE sandbox_events;
DROP TABLE sandboxes;
DROP TABLE build_files;
DROP TABLE builds;
DROP TYPE event_source;
DROP TYPE sandbox_status;
DROP TYPE build_kind;
DROP TYPE build_status;
