-- +goose Up
-- A project's environment variables (docs/architecture.md, "Environment variables"): given to
-- its install and dev server, never part of its files. A plain value is stored as it is; a
-- secret's only sealed (keyring: AES-256-GCM, the project id and the name bound as associated
-- data) with the id of the key that sealed it, so a dump of the database holds no secret.
-- Deleting the project (or its founder's account) deletes them.
CREATE TABLE project_env (
    project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name       text NOT NULL CHECK (name ~ '^[A-Za-z_][A-Za-z0-9_]*$' AND length(name) <= 128),
    secret     boolean NOT NULL,
    value      text,
    sealed     bytea,
    key_id     text,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project_id, name),
    CHECK (CASE WHEN secret THEN value IS NULL AND sealed IS NOT NULL AND key_id IS NOT NULL
                ELSE value IS NOT NULL AND sealed IS NULL AND key_id IS NULL END)
);

-- Each change of a project's variables counts up env_revision; a sandbox's env_revision is the
-- one its dev server was last started with, so a running (or woken) preview whose count is
-- behind is given the change in place, as a new version is.
ALTER TABLE projects ADD COLUMN env_revision bigint NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN env_revision bigint NOT NULL DEFAULT 0;

-- The history's "Environment changed: OPENAI_API_KEY set, DEBUG removed" (names, never values)
-- and the outcome of applying it to a running preview.
ALTER TABLE sandbox_events ADD COLUMN env_set text[] NOT NULL DEFAULT '{}',
    ADD COLUMN env_removed text[] NOT NULL DEFAULT '{}';
ALTER TYPE event_reason ADD VALUE 'env_changed';
ALTER TYPE event_reason ADD VALUE 'env_applied';

-- +goose Down
-- event_reason keeps its values: PostgreSQL cannot drop an enum's value.
ALTER TABLE sandbox_events DROP COLUMN env_set, DROP COLUMN env_removed;
ALTER TABLE sandboxes DROP COLUMN env_revision;
ALTER TABLE projects DROP COLUMN env_revision;
DROP TABLE project_env;
