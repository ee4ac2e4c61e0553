-- name: InsertBuild :one
-- The next version of the project's build.
INSERT INTO builds (project_id, version, kind)
VALUES (@project_id, (SELECT coalesce(max(version), 0) + 1 FROM builds WHERE project_id = @project_id), @kind)
RETURNING *;

-- name: GetBuild :one
SELECT * FROM builds WHERE id = @id;

-- name: CopyProjectFilesToBuild :execrows
INSERT INTO build_files (build_id, path, content, sha256)
SELECT @build_id::uuid, f.path, f.content, f.sha256 FROM project_files f WHERE f.project_id = @project_id::uuid;

-- name: CopyBuildFiles :execrows
INSERT INTO build_files (build_id, path, content, sha256)
SELECT @to_build_id::uuid, f.path, f.content, f.sha256 FROM build_files f WHERE f.build_id = @from_build_id::uuid;

-- name: ListBuildFiles :many
SELECT path, content FROM build_files WHERE build_id = @build_id ORDER BY path;

-- name: ListBuildFileDigests :many
-- What the integrity check compares a sandbox's files with: paths, sizes and SHA-256, without
-- loading the contents (a bytea's length is read from its header).
SELECT path, length(content)::bigint AS size, sha256 FROM build_files WHERE build_id = @build_id ORDER BY path;

-- name: ListBuildFilesByPath :many
-- The stored files a heal uploads again.
SELECT path, content FROM build_files WHERE build_id = @build_id AND path = ANY(@paths::text[]) ORDER BY path;

-- name: GetLastGoodBuild :one
-- The newest build that reached Ready: a rebuild starts from its files.
SELECT * FROM builds WHERE project_id = @project_id AND status = 'ready'
ORDER BY version DESC LIMIT 1;

-- name: GetLatestBuild :one
SELECT * FROM builds WHERE project_id = @project_id ORDER BY version DESC LIMIT 1;

-- name: SetBuildStage :exec
UPDATE builds SET status = 'building', stage = @stage WHERE id = @id AND status IN ('queued', 'building');

-- name: FinishBuild :execrows
-- Zero rows: the build had finished already (it is finished once).
UPDATE builds SET status = @status, stage = '', error = @error, finished_at = now()
WHERE id = @id AND status IN ('queued', 'building');
