-- name: LockFounderContent :exec
-- Serializes, until the transaction ends, storing a founder's content and collecting what no
-- version uses (docs/architecture.md, "Versions"): a collection then sees every row that points
-- at content stored before it, and content stored after it is inserted again.
SELECT pg_advisory_xact_lock(hashtextextended('founder content ' || @owner_id::text, 0));

-- name: InsertBlobs :exec
-- Content is stored once per founder: a digest already stored is skipped. Under
-- LockFounderContent only: the row skipped is not locked, so only that lock keeps a collection
-- from deleting it before this transaction's rows that point at it commit.
INSERT INTO blobs (owner_id, sha256, content)
SELECT @owner_id::uuid, unnest(@sha256s::bytea[]), unnest(@contents::bytea[])
ON CONFLICT DO NOTHING;

-- name: InsertVersionFiles :exec
-- The files a version wrote, visible from it on.
INSERT INTO version_files (project_id, path, from_number, size, sha256, executable)
SELECT @project_id::uuid, unnest(@paths::text[]), @from_number::integer, unnest(@sizes::bigint[]), unnest(@sha256s::bytea[]),
    unnest(@executables::boolean[]);

-- name: CloseVersionFiles :exec
-- The current version's files at paths end where a new version changed or removed them.
UPDATE version_files SET until_number = @until_number
WHERE project_id = @project_id AND path = ANY(@paths::text[]) AND until_number IS NULL;

-- name: InsertVersion :one
-- The next number under the project's lock (LockProjectByOwner), as builds are numbered.
INSERT INTO versions (project_id, number, parent_number, source, restored_from, message, added, changed, removed,
    file_count, total_bytes)
VALUES (@project_id, (SELECT coalesce(max(number), 0) + 1 FROM versions WHERE project_id = @project_id),
    sqlc.narg('parent_number'), @source, sqlc.narg('restored_from'), @message, @added, @changed, @removed,
    @file_count, @total_bytes)
RETURNING *;

-- name: GetCurrentVersion :one
-- The project's newest version: what a rebuild builds and every preview converges to.
SELECT * FROM versions WHERE project_id = @project_id ORDER BY number DESC LIMIT 1;

-- name: GetVersionByNumber :one
SELECT * FROM versions WHERE project_id = @project_id AND number = @number;

-- name: GetVersion :one
SELECT * FROM versions WHERE id = @id;

-- name: ListVersions :many
-- Newest first, below a number (a page's cursor).
SELECT * FROM versions WHERE project_id = @project_id AND number < @before
ORDER BY number DESC LIMIT @max_versions;

-- name: ListVersionFiles :many
-- Version number's manifest: the rows visible at it.
SELECT path, size, sha256, executable FROM version_files
WHERE project_id = @project_id AND from_number <= @number::integer AND (until_number IS NULL OR until_number > @number::integer)
ORDER BY path;

-- name: ListVersionContents :many
-- Version number's files with their content (only paths, when any are given). A file whose
-- content is missing is still listed, not stored, so a reader fails instead of leaving it out
-- (versions.Contents).
SELECT f.path, f.executable, b.content, (b.sha256 IS NOT NULL)::boolean AS stored
FROM version_files f LEFT JOIN blobs b ON b.owner_id = @owner_id AND b.sha256 = f.sha256
WHERE f.project_id = @project_id AND f.from_number <= @number::integer AND (f.until_number IS NULL OR f.until_number > @number::integer)
  AND (cardinality(@paths::text[]) = 0 OR f.path = ANY(@paths::text[]))
ORDER BY f.path;

-- name: CountVersions :one
SELECT count(*)::integer FROM versions WHERE project_id = @project_id;

-- name: PruneVersions :execrows
-- Retention: the oldest versions beyond the kept number go, never the newest and never one a
-- build or a sandbox uses.
DELETE FROM versions WHERE id IN (
    SELECT v.id FROM versions v
    WHERE v.project_id = @project_id
      AND v.number < (SELECT max(number) FROM versions w WHERE w.project_id = @project_id)
      AND NOT EXISTS (SELECT 1 FROM builds b WHERE b.files_version_id = v.id)
      AND NOT EXISTS (SELECT 1 FROM sandboxes s WHERE s.deployed_version_id = v.id OR s.deploying_version_id = v.id)
    ORDER BY v.number LIMIT @excess);

-- name: PruneVersionFiles :many
-- The rows no kept version sees any more go; their digests are returned for DeleteUnusedBlobs.
DELETE FROM version_files f WHERE f.project_id = @project_id AND NOT EXISTS (
    SELECT 1 FROM versions v WHERE v.project_id = @project_id
      AND v.number >= f.from_number AND (f.until_number IS NULL OR v.number < f.until_number))
RETURNING f.sha256;

-- name: DeleteUnusedBlobs :exec
-- Of the given contents, those no version of the founder uses any more. Under
-- LockFounderContent only (InsertBlobs says why).
DELETE FROM blobs b WHERE b.owner_id = @owner_id AND b.sha256 = ANY(@sha256s::bytea[]) AND NOT EXISTS (
    SELECT 1 FROM version_files f JOIN projects p ON p.id = f.project_id
    WHERE f.sha256 = b.sha256 AND p.owner_id = @owner_id);

-- name: ClaimVersionKey :one
-- The first request with a key claims it; zero rows: the key is taken (GetVersionKey says by what).
INSERT INTO version_keys (owner_id, key, project_id, request_sha256)
VALUES (@owner_id, @key, @project_id, @request_sha256)
ON CONFLICT (owner_id, key) DO UPDATE SET project_id = excluded.project_id, request_sha256 = excluded.request_sha256, created_at = now()
    -- A first request whose instance died before it finished no longer holds its key.
    WHERE version_keys.version_number IS NULL AND version_keys.created_at < now() - interval '10 minutes'
RETURNING *;

-- name: GetVersionKey :one
SELECT * FROM version_keys WHERE owner_id = @owner_id AND key = @key;

-- name: FinishVersionKey :exec
UPDATE version_keys SET version_number = @version_number, unchanged = @unchanged
WHERE owner_id = @owner_id AND key = @key;

-- name: ReleaseVersionKey :exec
-- A request that failed gives its key back: a retry runs again.
DELETE FROM version_keys WHERE owner_id = @owner_id AND key = @key AND version_number IS NULL;

-- name: DeleteOldVersionKeys :exec
-- Keys are kept at least 24 hours (docs/api.md, "Versions").
DELETE FROM version_keys WHERE created_at < now() - interval '48 hours';

-- name: LockFounderStorage :one
-- The founder's storage lock, taken before any of their content is stored (versions.Service,
-- projects.Service): the quota's check then sees every other writer's content that committed.
-- The row is made on first use; the blobs' triggers keep its sum (migration 00014).
INSERT INTO founder_storage AS f (owner_id) VALUES (@owner_id)
ON CONFLICT (owner_id) DO UPDATE SET stored_bytes = f.stored_bytes
RETURNING f.stored_bytes;

-- name: GetFounderStorage :one
-- The bytes of the founder's unique content (0 before they stored any).
SELECT coalesce((SELECT stored_bytes FROM founder_storage WHERE owner_id = @owner_id), 0)::bigint;
