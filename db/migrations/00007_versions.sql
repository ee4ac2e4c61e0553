-- +goose Up
-- Versions of a project's files (docs/architecture.md, "Versions"). Content is stored once per
-- founder, keyed by its SHA-256: never shared between founders, so no founder can learn that
-- another stored a file. A version is a numbered manifest (path, size, SHA-256, executable bit)
-- over that content.
--
-- Names: builds.version and sandboxes.version already mean a build's number and a row's
-- optimistic-lock version. Here a project's version is `versions.number`; a build builds
-- `builds.files_version_id`; a sandbox's files are `sandboxes.deployed_version_id`.
CREATE TABLE blobs (
    owner_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    sha256   bytea NOT NULL CHECK (length(sha256) = 32),
    content  bytea NOT NULL,
    PRIMARY KEY (owner_id, sha256)
);

-- A version's manifest is the rows visible at its number: a row holds one file from the version
-- that wrote it (from_number) until the first that changed or removed it (until_number; NULL
-- while the current version has it). A version stores only what it changed, so a project's
-- thousand versions of 500 files keep about a row per change, not 500 per version.
CREATE TABLE version_files (
    project_id   uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    path         text NOT NULL,
    from_number  integer NOT NULL CHECK (from_number > 0),
    until_number integer CHECK (until_number > from_number),
    size         bigint NOT NULL CHECK (size >= 0),
    sha256       bytea NOT NULL CHECK (length(sha256) = 32),
    executable   boolean NOT NULL DEFAULT false,
    PRIMARY KEY (project_id, path, from_number)
);
CREATE INDEX version_files_number_idx ON version_files (project_id, from_number);
-- Finding content no version uses any more (retention).
CREATE INDEX version_files_sha256_idx ON version_files (sha256);

CREATE TABLE versions (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    project_id    uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    number        integer NOT NULL CHECK (number > 0),
    parent_number integer,
    -- created (the project's first files), upload (the browser's form), api, restore.
    source        text NOT NULL CHECK (source IN ('created', 'upload', 'api', 'restore')),
    restored_from integer,
    message       text NOT NULL DEFAULT '' CHECK (length(message) <= 500),
    added         integer NOT NULL DEFAULT 0,
    changed       integer NOT NULL DEFAULT 0,
    removed       integer NOT NULL DEFAULT 0,
    file_count    integer NOT NULL,
    total_bytes   bigint NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, number)
);

-- Idempotency-Key of POST /api/projects/{id}/versions, per founder, kept at least 24 hours.
-- version_number is NULL while the first request runs.
CREATE TABLE version_keys (
    owner_id       uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    key            text NOT NULL,
    project_id     uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    request_sha256 bytea NOT NULL,
    version_number integer,
    unchanged      boolean NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, key)
);
CREATE INDEX version_keys_created_idx ON version_keys (created_at);

-- The starters' defaults: the static site's dev server reloads changed files itself; every
-- other project is restarted on a new version.
ALTER TABLE projects ADD COLUMN reloads_itself boolean NOT NULL DEFAULT false;
UPDATE projects SET reloads_itself = true WHERE starter = 'static';

ALTER TABLE builds ADD COLUMN files_version_id uuid REFERENCES versions (id);
ALTER TABLE sandboxes ADD COLUMN deployed_version_id uuid REFERENCES versions (id),
    -- The version being applied to it now ("Applying version 8…"), NULL otherwise, since when
    -- and by which job: a claim older than the apply's deadline is a worker that went away, and
    -- the job's own next attempt (after its worker died) takes its claim back.
    ADD COLUMN deploying_version_id uuid REFERENCES versions (id) ON DELETE SET NULL,
    ADD COLUMN deploying_since timestamptz,
    ADD COLUMN deploying_job bigint;

-- A version's history entries: which version, how long the apply took, and what the dev
-- server printed when it did not start on it.
ALTER TABLE sandbox_events ADD COLUMN version_number integer,
    ADD COLUMN duration_ms integer,
    ADD COLUMN output text NOT NULL DEFAULT '';

-- Every existing project's files become its version 1, and every build points at it.
INSERT INTO blobs (owner_id, sha256, content)
SELECT p.owner_id, f.sha256, f.content FROM project_files f JOIN projects p ON p.id = f.project_id
ON CONFLICT DO NOTHING;
INSERT INTO version_files (project_id, path, from_number, size, sha256)
SELECT f.project_id, f.path, 1, length(f.content), f.sha256 FROM project_files f;
INSERT INTO versions (project_id, number, source, added, file_count, total_bytes, created_at)
SELECT p.id, 1, 'created', coalesce(s.n, 0), coalesce(s.n, 0), coalesce(s.bytes, 0), p.created_at
FROM projects p
LEFT JOIN (SELECT project_id, count(*)::integer AS n, sum(length(content))::bigint AS bytes
           FROM project_files GROUP BY project_id) s ON s.project_id = p.id;
UPDATE builds b SET files_version_id = v.id FROM versions v WHERE v.project_id = b.project_id AND v.number = 1;
UPDATE sandboxes s SET deployed_version_id = b.files_version_id FROM builds b WHERE b.id = s.build_id;
ALTER TABLE builds ALTER COLUMN files_version_id SET NOT NULL;
ALTER TABLE sandboxes ALTER COLUMN deployed_version_id SET NOT NULL;
CREATE INDEX builds_files_version_idx ON builds (files_version_id);
CREATE INDEX sandboxes_deployed_version_idx ON sandboxes (deployed_version_id);

-- The copies go: a build's files are its version's.
DROP TABLE build_files;
DROP TABLE project_files;

-- +goose Down
CREATE TABLE project_files (
    project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    path       text NOT NULL,
    content    bytea NOT NULL,
    sha256     bytea NOT NULL CHECK (length(sha256) = 32),
    PRIMARY KEY (project_id, path)
);
CREATE TABLE build_files (
    build_id uuid NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    path     text NOT NULL,
    content  bytea NOT NULL,
    sha256   bytea NOT NULL CHECK (length(sha256) = 32),
    PRIMARY KEY (build_id, path)
);
INSERT INTO project_files (project_id, path, content, sha256)
SELECT f.project_id, f.path, b.content, f.sha256
FROM version_files f JOIN projects p ON p.id = f.project_id
JOIN blobs b ON b.owner_id = p.owner_id AND b.sha256 = f.sha256
WHERE f.until_number IS NULL;
INSERT INTO build_files (build_id, path, content, sha256)
SELECT bu.id, f.path, b.content, f.sha256
FROM builds bu JOIN versions v ON v.id = bu.files_version_id JOIN projects p ON p.id = v.project_id
JOIN version_files f ON f.project_id = v.project_id AND f.from_number <= v.number AND (f.until_number IS NULL OR f.until_number > v.number)
JOIN blobs b ON b.owner_id = p.owner_id AND b.sha256 = f.sha256;
ALTER TABLE sandbox_events DROP COLUMN output, DROP COLUMN duration_ms, DROP COLUMN version_number;
ALTER TABLE sandboxes DROP COLUMN deploying_job, DROP COLUMN deploying_since, DROP COLUMN deploying_version_id, DROP COLUMN deployed_version_id;
ALTER TABLE builds DROP COLUMN files_version_id;
ALTER TABLE projects DROP COLUMN reloads_itself;
DROP TABLE version_keys;
DROP TABLE versions;
DROP TABLE version_files;
DROP TABLE blobs;
