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

-- A change of variables is a note, like a visitor's: never why a preview is in its state (a
-- sleeping one's "Paused after 3 min…" stays its why). (::text: a value added to an enum cannot
-- be used as one in the transaction that added it.)
CREATE OR REPLACE VIEW project_states AS
SELECT p.id AS project_id, p.owner_id,
       coalesce(cur.file_count, 0)::integer AS file_count,
       coalesce(cur.number, 0)::integer AS current_version,
       coalesce((SELECT max(n.app_good_version) FROM sandboxes n WHERE n.project_id = p.id), 0)::integer AS last_good_version,
       EXISTS (SELECT 1 FROM share_links l WHERE l.project_id = p.id)::boolean AS shared,
       s.id AS sandbox_id,
       coalesce(chg.id, 0)::bigint AS change_event_id,
       coalesce((SELECT max(ev.id) FROM sandbox_events ev WHERE ev.sandbox_id = s.id), 0)::bigint AS latest_event_id,
       coalesce((SELECT v.number FROM versions v WHERE v.id = s.deployed_version_id), 0)::integer AS deployed_number,
       coalesce((SELECT v.number FROM versions v WHERE v.id = s.deploying_version_id), 0)::integer AS deploying_number
FROM projects p
LEFT JOIN LATERAL (SELECT v.number, v.file_count FROM versions v WHERE v.project_id = p.id
    ORDER BY v.number DESC LIMIT 1) cur ON true
-- Laterals, not subqueries in a join's condition: each is computed once per project, however
-- many times the queries that read the view join on its result.
LEFT JOIN LATERAL (SELECT n.id FROM sandboxes n WHERE n.project_id = p.id
    ORDER BY n.created_at DESC LIMIT 1) newest ON true
LEFT JOIN sandboxes s ON s.id = newest.id
LEFT JOIN LATERAL (SELECT max(ev.id) AS id FROM sandbox_events ev WHERE ev.sandbox_id = s.id
    AND NOT (ev.from_status = ev.to_status AND (ev.source = 'visitor' OR ev.reason::text = 'env_changed'))) chg ON true;

-- +goose Down
-- event_reason keeps its values: PostgreSQL cannot drop an enum's value.
CREATE OR REPLACE VIEW project_states AS
SELECT p.id AS project_id, p.owner_id,
       coalesce(cur.file_count, 0)::integer AS file_count,
       coalesce(cur.number, 0)::integer AS current_version,
       coalesce((SELECT max(n.app_good_version) FROM sandboxes n WHERE n.project_id = p.id), 0)::integer AS last_good_version,
       EXISTS (SELECT 1 FROM share_links l WHERE l.project_id = p.id)::boolean AS shared,
       s.id AS sandbox_id,
       coalesce(chg.id, 0)::bigint AS change_event_id,
       coalesce((SELECT max(ev.id) FROM sandbox_events ev WHERE ev.sandbox_id = s.id), 0)::bigint AS latest_event_id,
       coalesce((SELECT v.number FROM versions v WHERE v.id = s.deployed_version_id), 0)::integer AS deployed_number,
       coalesce((SELECT v.number FROM versions v WHERE v.id = s.deploying_version_id), 0)::integer AS deploying_number
FROM projects p
LEFT JOIN LATERAL (SELECT v.number, v.file_count FROM versions v WHERE v.project_id = p.id
    ORDER BY v.number DESC LIMIT 1) cur ON true
-- Laterals, not subqueries in a join's condition: each is computed once per project, however
-- many times the queries that read the view join on its result.
LEFT JOIN LATERAL (SELECT n.id FROM sandboxes n WHERE n.project_id = p.id
    ORDER BY n.created_at DESC LIMIT 1) newest ON true
LEFT JOIN sandboxes s ON s.id = newest.id
LEFT JOIN LATERAL (SELECT max(ev.id) AS id FROM sandbox_events ev WHERE ev.sandbox_id = s.id
    AND NOT (ev.source = 'visitor' AND ev.from_status = ev.to_status)) chg ON true;
ALTER TABLE sandbox_events DROP COLUMN env_set, DROP COLUMN env_removed;
ALTER TABLE sandboxes DROP COLUMN env_revision;
ALTER TABLE projects DROP COLUMN env_revision;
DROP TABLE project_env;
